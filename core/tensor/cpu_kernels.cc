// The CPU reference kernels: plain loops in float (double where a sum must not drift), GEMM
// through cblas, zero-sized dims accepted, bf16 operands widened to float and results rounded
// once into bf16 storage. Here: the operand views, host transfers, the shared helpers and the
// one instance; the kernels themselves are in cpu_kernels_*.cc by topic.
#include <algorithm>
#include <cstring>
#include <string>

#include "core/base/errors.h"
#include "core/tensor/cpu_kernels_internal.h"
#include "core/tensor/kernels.h"

namespace zero3 {

void operand_not_resident(const Tensor& tensor, Device device) {
  check_failed("tensor.defined() && tensor.device() == device", __FILE__, __LINE__,
               "kernel operand " + describe(tensor) + " is not on " + device_name(device));
}

FloatsIn::FloatsIn(const Tensor& tensor, Device device) {
  require_resident(tensor, device);
  if (tensor.dtype() == DType::f32) {
    data_ = static_cast<const float*>(tensor.device_bytes());
    return;
  }
  const auto* bits = static_cast<const uint16_t*>(tensor.device_bytes());
  widened_.resize(static_cast<size_t>(tensor.numel()));
  std::transform(bits, bits + tensor.numel(), widened_.begin(), bf16_value);
  data_ = widened_.data();
}

FloatsOut::FloatsOut(Tensor& tensor, Device device) : tensor_(tensor) {
  require_resident(tensor, device);
  if (tensor.dtype() == DType::f32) {
    data_ = static_cast<float*>(tensor.device_bytes());
    return;
  }
  const auto* bits = static_cast<const uint16_t*>(tensor.device_bytes());
  scratch_.resize(static_cast<size_t>(tensor.numel()));
  std::transform(bits, bits + tensor.numel(), scratch_.begin(), bf16_value);
  data_ = scratch_.data();
}

FloatsOut::~FloatsOut() {
  if (tensor_.dtype() != DType::bf16) return;
  std::transform(scratch_.begin(), scratch_.end(), static_cast<uint16_t*>(tensor_.device_bytes()), bf16_bits);
}

int64_t checked_row(float value, int64_t rows) {
  const auto row = static_cast<int64_t>(value);
  ZERO3_CHECK(static_cast<float>(row) == value && row >= 0 && row < rows,
              "row index " + std::to_string(value) + " outside [0, " + std::to_string(rows) + ")");
  return row;
}

void CpuKernels::download(const Tensor& device_tensor, Tensor& host) {
  require_resident(device_tensor, device_);
  if (host.bytes() > 0) std::memcpy(host.device_bytes(), device_tensor.device_bytes(), static_cast<size_t>(host.bytes()));
}

void CpuKernels::upload(const Tensor& host, Tensor& device_tensor) {
  require_resident(device_tensor, device_);
  if (host.bytes() > 0) std::memcpy(device_tensor.device_bytes(), host.device_bytes(), static_cast<size_t>(host.bytes()));
}

std::unique_ptr<Kernels> make_reference_kernels(Device device, const char* name) {
  return std::make_unique<CpuKernels>(device, name);
}

Kernels& cpu_kernels() {
  static CpuKernels kernels(Device::cpu, "cpu");
  return kernels;
}

}  // namespace zero3
