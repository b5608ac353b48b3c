// Tensor construction, host access and copies; storage comes from the device's memory.
#include "core/tensor/tensor.h"

#include <algorithm>
#include <cstring>

#include "core/base/errors.h"

namespace zero3 {

// The bytes of one allocation, returned to the memory that gave them when the last view goes.
struct TensorStorage {
  TensorStorage(Device on, int64_t byte_count, bool zeroed)
      : device(on), memory(&device_memory(on)), size(byte_count),
        bytes(zeroed ? memory->allocate(on, byte_count) : memory->allocate_uninitialized(on, byte_count)) {}
  ~TensorStorage() { memory->free(device, bytes, size); }
  TensorStorage(const TensorStorage&) = delete;
  TensorStorage& operator=(const TensorStorage&) = delete;

  Device device;
  DeviceMemory* memory;
  int64_t size;
  void* bytes;
};

Tensor::Tensor(const Shape& shape, DType dtype, Device device, std::shared_ptr<TensorStorage> storage,
               int64_t offset_bytes)
    : defined_(true), shape_(shape), numel_(shape_numel(shape)), dtype_(dtype), device_(device),
      storage_(std::move(storage)), offset_bytes_(offset_bytes) {
  for (int64_t dim : shape) ZERO3_CHECK(dim >= 0, "negative dimension in " + shape_str(shape));
}

namespace {

std::shared_ptr<TensorStorage> new_storage(const Shape& shape, DType dtype, Device device, bool zeroed) {
  for (int64_t dim : shape) ZERO3_CHECK(dim >= 0, "negative dimension in " + shape_str(shape));
  return std::make_shared<TensorStorage>(device, shape_numel(shape) * dtype_bytes(dtype), zeroed);
}

}  // namespace

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  if (device.kind == DeviceKind::meta) return meta(shape, dtype);
  return Tensor(shape, dtype, device, new_storage(shape, dtype, device, true));
}

Tensor Tensor::uninitialized(const Shape& shape, DType dtype, Device device) {
  if (device.kind == DeviceKind::meta) return meta(shape, dtype);
  return Tensor(shape, dtype, device, new_storage(shape, dtype, device, false));
}

Tensor Tensor::full(const Shape& shape, float value, DType dtype) {
  return from_values(shape, std::vector<float>(static_cast<size_t>(shape_numel(shape)), value), dtype);
}

Tensor Tensor::from_values(const Shape& shape, const std::vector<float>& values, DType dtype) {
  ZERO3_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape),
              std::to_string(values.size()) + " values for shape " + shape_str(shape));
  Tensor tensor = zeros(shape, dtype);
  if (dtype == DType::bf16) {
    std::transform(values.begin(), values.end(), tensor.bf16_data(), bf16_bits);
  } else if (!values.empty()) {
    std::memcpy(tensor.data(), values.data(), values.size() * sizeof(float));
  }
  return tensor;
}

Tensor Tensor::scalar(float value, DType dtype) { return from_values({}, {value}, dtype); }

Tensor Tensor::meta(const Shape& shape, DType dtype) { return Tensor(shape, dtype, Device::meta, nullptr); }

int64_t Tensor::dim(int64_t index) const {
  const int64_t resolved = index < 0 ? index + rank() : index;
  ZERO3_CHECK(resolved >= 0 && resolved < rank(), "dim " + std::to_string(index) + " of " + describe(*this));
  return shape_[resolved];
}

void Tensor::require_host(const char* access, DType dtype) const {
  ZERO3_CHECK(defined_ && !is_meta(), std::string(access) + " of " + describe(*this));
  if (!device_.host_readable()) {
    throw HostAccessError(std::string("host ") + access + " of " + describe(*this) +
                          ": device memory reaches the host only through Kernels::copy_to_host");
  }
  ZERO3_CHECK(dtype == dtype_, std::string(access) + " wants " + dtype_name(dtype) + " but the tensor is " +
                                   describe(*this));
}

void* Tensor::first_byte() const { return static_cast<char*>(storage_->bytes) + offset_bytes_; }

float* Tensor::data() {
  require_host("data()", DType::f32);
  return static_cast<float*>(first_byte());
}

const float* Tensor::data() const {
  require_host("data()", DType::f32);
  return static_cast<const float*>(first_byte());
}

std::span<float> Tensor::values() { return {data(), static_cast<size_t>(numel_)}; }
std::span<const float> Tensor::values() const { return {data(), static_cast<size_t>(numel_)}; }

uint16_t* Tensor::bf16_data() {
  require_host("bf16_data()", DType::bf16);
  return static_cast<uint16_t*>(first_byte());
}

const uint16_t* Tensor::bf16_data() const {
  require_host("bf16_data()", DType::bf16);
  return static_cast<const uint16_t*>(first_byte());
}

float Tensor::item() const {
  ZERO3_CHECK(numel_ == 1, "item() of " + describe(*this));
  return dtype_ == DType::bf16 ? bf16_value(bf16_data()[0]) : data()[0];
}

std::vector<float> Tensor::to_floats() const {
  if (dtype_ == DType::f32) {
    const std::span<const float> source = values();
    return {source.begin(), source.end()};
  }
  const uint16_t* bits = bf16_data();
  std::vector<float> out(static_cast<size_t>(numel_));
  std::transform(bits, bits + numel_, out.begin(), bf16_value);
  return out;
}

void* Tensor::device_bytes() {
  ZERO3_CHECK(defined_ && !is_meta(), "device_bytes() of " + describe(*this));
  return first_byte();
}

const void* Tensor::device_bytes() const {
  ZERO3_CHECK(defined_ && !is_meta(), "device_bytes() of " + describe(*this));
  return first_byte();
}

Tensor Tensor::relabeled_as(Device device) const {
  ZERO3_CHECK(defined_ && !is_meta() && device.host_readable(), "relabel of " + describe(*this));
  return Tensor(shape_, dtype_, device, storage_, offset_bytes_);
}

Tensor Tensor::clone() const {
  ZERO3_CHECK(defined_, "clone() of an undefined tensor");
  if (is_meta()) return meta(shape_, dtype_);
  require_host("clone()", dtype_);
  Tensor out = zeros(shape_, dtype_);
  if (numel_ > 0) std::memcpy(out.first_byte(), first_byte(), static_cast<size_t>(bytes()));
  return out;
}

Tensor Tensor::reshape(const Shape& shape) const {
  if (shape_numel(shape) != numel_) {
    throw ShapeError("cannot reshape " + describe(*this) + " to " + shape_str(shape));
  }
  return Tensor(shape, dtype_, device_, storage_, offset_bytes_);
}

Tensor Tensor::view_prefix(const Shape& shape) const { return view_range(0, shape); }

Tensor Tensor::view_range(int64_t first, const Shape& shape) const {
  ZERO3_CHECK(defined_, "view of an undefined tensor");
  for (int64_t dim : shape) ZERO3_CHECK(dim >= 0, "negative dimension in " + shape_str(shape));
  if (first < 0 || first > numel_ || shape_numel(shape) > numel_ - first) {
    throw ShapeError("cannot view " + shape_str(shape) + " from element " + std::to_string(first) + " of " +
                     describe(*this));
  }
  if (is_meta()) return meta(shape, dtype_);
  return Tensor(shape, dtype_, device_, storage_, offset_bytes_ + first * dtype_bytes(dtype_));
}

Tensor Tensor::to_dtype(DType dtype) const {
  if (is_meta()) return meta(shape_, dtype);
  if (dtype == dtype_) return clone();
  return from_values(shape_, to_floats(), dtype);
}

std::string describe(const Tensor& tensor) {
  if (!tensor.defined()) return "undefined tensor";
  return std::string(dtype_name(tensor.dtype())) + shape_str(tensor.shape()) + " " + device_name(tensor.device());
}

}  // namespace zero3
