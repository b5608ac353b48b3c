// Tensor: a shape, a dtype, a device and shared contiguous storage.
//
// Devices: `cpu` holds data (one float per element, see dtype.h); `meta` holds only the shape, so
// a 175B-parameter model can be walked through without a byte of data. Tensors are always
// contiguous; reshape shares storage, everything else that changes layout copies.
//
//   Tensor x = Tensor::zeros({2, 3});
//   x.data()[4] = 1.0f;
//   Tensor y = x.reshape({3, 2});   // same storage
#pragma once
#include <memory>
#include <span>
#include <vector>

#include "core/tensor/dtype.h"
#include "core/tensor/shape.h"

namespace zero3 {

enum class Device : uint8_t { cpu, meta };
const char* device_name(Device device);

class Tensor {
 public:
  Tensor() = default;  // undefined: no shape, no storage
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu);
  static Tensor full(const Shape& shape, float value, DType dtype = DType::f32);
  // Values are rounded to bf16 when dtype is bf16.
  static Tensor from_values(const Shape& shape, std::vector<float> values, DType dtype = DType::f32);
  static Tensor scalar(float value, DType dtype = DType::f32);
  static Tensor meta(const Shape& shape, DType dtype = DType::f32);

  bool defined() const { return defined_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t index) const;  // negative counts from the end
  int64_t numel() const { return numel_; }
  int64_t bytes() const { return numel_ * dtype_bytes(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool is_meta() const { return device_ == Device::meta; }

  // Element access for cpu tensors; asserts on meta or undefined tensors.
  float* data();
  const float* data() const;
  std::span<float> values();
  std::span<const float> values() const;
  float item() const;  // the one element of a numel-1 tensor

  Tensor clone() const;                       // deep copy, same dtype and device
  Tensor reshape(const Shape& shape) const;   // shares storage; numel must match
  // A view of the first shape_numel(shape) elements with the given shape (shares storage). Lets a
  // gather buffer of world * shard elements show the unpadded parameter without a copy.
  Tensor view_prefix(const Shape& shape) const;
  Tensor to_dtype(DType dtype) const;         // copy with rounding when narrowing to bf16
  // True when both tensors view the same storage (used to spot aliasing of released buffers).
  bool shares_storage_with(const Tensor& other) const { return storage_ && storage_ == other.storage_; }
  // Identity of the underlying storage (null for meta): lets the simulator track in-flight buffers.
  const void* storage_id() const { return storage_.get(); }

 private:
  Tensor(const Shape& shape, DType dtype, Device device, std::shared_ptr<std::vector<float>> storage);

  bool defined_ = false;
  Shape shape_;
  int64_t numel_ = 0;
  DType dtype_ = DType::f32;
  Device device_ = Device::cpu;
  std::shared_ptr<std::vector<float>> storage_;
};

std::string describe(const Tensor& tensor);  // "f32[2,3] cpu"

}  // namespace zero3
