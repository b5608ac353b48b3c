// Tensor construction, access and copies.
#include "core/tensor/tensor.h"

#include <algorithm>

#include "core/base/errors.h"

namespace zero3 {

const char* device_name(Device device) { return device == Device::meta ? "meta" : "cpu"; }

Tensor::Tensor(const Shape& shape, DType dtype, Device device, std::shared_ptr<std::vector<float>> storage)
    : defined_(true), shape_(shape), numel_(shape_numel(shape)), dtype_(dtype), device_(device),
      storage_(std::move(storage)) {
  for (int64_t dim : shape) ZERO3_CHECK(dim >= 0, "negative dimension in " + shape_str(shape));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  if (device == Device::meta) return meta(shape, dtype);
  auto storage = std::make_shared<std::vector<float>>(static_cast<size_t>(shape_numel(shape)), 0.0f);
  return Tensor(shape, dtype, device, std::move(storage));
}

Tensor Tensor::full(const Shape& shape, float value, DType dtype) {
  Tensor tensor = zeros(shape, dtype);
  const float stored = dtype == DType::bf16 ? round_to_bf16(value) : value;
  std::fill(tensor.storage_->begin(), tensor.storage_->end(), stored);
  return tensor;
}

Tensor Tensor::from_values(const Shape& shape, std::vector<float> values, DType dtype) {
  ZERO3_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape),
              std::to_string(values.size()) + " values for shape " + shape_str(shape));
  if (dtype == DType::bf16) {
    for (float& value : values) value = round_to_bf16(value);
  }
  return Tensor(shape, dtype, Device::cpu, std::make_shared<std::vector<float>>(std::move(values)));
}

Tensor Tensor::scalar(float value, DType dtype) { return from_values({}, {value}, dtype); }

Tensor Tensor::meta(const Shape& shape, DType dtype) { return Tensor(shape, dtype, Device::meta, nullptr); }

int64_t Tensor::dim(int64_t index) const {
  const int64_t resolved = index < 0 ? index + rank() : index;
  ZERO3_CHECK(resolved >= 0 && resolved < rank(), "dim " + std::to_string(index) + " of " + describe(*this));
  return shape_[resolved];
}

float* Tensor::data() {
  ZERO3_CHECK(defined_ && device_ == Device::cpu, "data() of " + describe(*this));
  return storage_->data();
}

const float* Tensor::data() const {
  ZERO3_CHECK(defined_ && device_ == Device::cpu, "data() of " + describe(*this));
  return storage_->data();
}

std::span<float> Tensor::values() { return {data(), static_cast<size_t>(numel_)}; }
std::span<const float> Tensor::values() const { return {data(), static_cast<size_t>(numel_)}; }

float Tensor::item() const {
  ZERO3_CHECK(numel_ == 1, "item() of " + describe(*this));
  return data()[0];
}

Tensor Tensor::clone() const {
  ZERO3_CHECK(defined_, "clone() of an undefined tensor");
  if (is_meta()) return meta(shape_, dtype_);
  return Tensor(shape_, dtype_, device_,
                std::make_shared<std::vector<float>>(storage_->begin(), storage_->begin() + numel_));
}

Tensor Tensor::reshape(const Shape& shape) const {
  if (shape_numel(shape) != numel_) {
    throw ShapeError("cannot reshape " + describe(*this) + " to " + shape_str(shape));
  }
  return Tensor(shape, dtype_, device_, storage_);
}

Tensor Tensor::view_prefix(const Shape& shape) const {
  if (shape_numel(shape) > numel_) {
    throw ShapeError("cannot view " + shape_str(shape) + " inside " + describe(*this));
  }
  return Tensor(shape, dtype_, device_, storage_);
}

Tensor Tensor::to_dtype(DType dtype) const {
  Tensor out = clone();
  out.dtype_ = dtype;
  if (dtype == DType::bf16 && !is_meta()) {
    for (float& value : *out.storage_) value = round_to_bf16(value);
  }
  return out;
}

std::string describe(const Tensor& tensor) {
  if (!tensor.defined()) return "undefined tensor";
  return std::string(dtype_name(tensor.dtype())) + shape_str(tensor.shape()) + " " + device_name(tensor.device());
}

}  // namespace zero3
