// The parts of the Kernels seam every device shares: checked, counted host transfers and cast.
#include "core/tensor/kernels.h"

#include "core/base/errors.h"

namespace zero3 {
namespace {

void check_transfer(const char* what, const Tensor& device_tensor, const Tensor& host, Device device) {
  ZERO3_CHECK(host.defined() && host.device().host_readable() && device_tensor.defined() &&
                  device_tensor.device() == device && host.dtype() == device_tensor.dtype() &&
                  host.numel() == device_tensor.numel(),
              std::string(what) + " between " + describe(device_tensor) + " and " + describe(host));
}

}  // namespace

void Kernels::copy_to_host(const Tensor& device_tensor, Tensor& host) {
  check_transfer("copy_to_host", device_tensor, host, device());
  ++host_syncs_;
  download(device_tensor, host);
}

void Kernels::copy_from_host(const Tensor& host, Tensor& device_tensor) {
  check_transfer("copy_from_host", device_tensor, host, device());
  ++uploads_;
  upload(host, device_tensor);
}

Tensor Kernels::to_host(const Tensor& device_tensor) {
  Tensor host = Tensor::uninitialized(device_tensor.shape(), device_tensor.dtype());
  copy_to_host(device_tensor, host);
  return host;
}

Tensor Kernels::copy_to_device(const Tensor& host) {
  Tensor out = device_uninitialized(*this, host.shape(), host.dtype());
  copy_from_host(host, out);
  return out;
}

Tensor Kernels::to_device(const Tensor& host) {
  if (host.is_meta() || host.device() == device()) return host;
  return copy_to_device(host);
}

Tensor device_full(Kernels& kernels, const Shape& shape, float value, DType dtype) {
  Tensor out = device_uninitialized(kernels, shape, dtype);
  kernels.fill(out, value);
  return out;
}

Tensor cast(Kernels& kernels, const Tensor& in, DType dtype) {
  if (in.is_meta()) return Tensor::meta(in.shape(), dtype);
  Tensor out = device_uninitialized(kernels, in.shape(), dtype);
  kernels.copy(in, out);
  return out;
}

}  // namespace zero3
