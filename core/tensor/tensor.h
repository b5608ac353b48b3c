// Tensor: a shape, a dtype, a device and shared contiguous storage of dtype-sized elements.
//
// The bytes belong to the device's memory (device.h): f32 4 bytes, bf16 2 bytes of real bf16
// bits. Host code reads and writes only cpu tensors; on any other device data() is a
// HostAccessError, and bytes move through the Kernels seam (kernels.h). `meta` holds only the
// shape, so a 175B-parameter model can be walked through without a byte of data. Tensors are always
// contiguous; reshape and views of a contiguous range share storage, everything else that changes
// layout copies.
//
//   Tensor x = Tensor::zeros({2, 3});
//   x.data()[4] = 1.0f;
//   Tensor y = x.reshape({3, 2});   // same storage
//   Tensor h = Tensor::from_values({2}, {1.0f, 3.14159f}, DType::bf16);   // 4 bytes; 3.140625
#pragma once
#include <memory>
#include <span>
#include <vector>

#include "core/tensor/device.h"
#include "core/tensor/dtype.h"
#include "core/tensor/shape.h"

namespace zero3 {

struct TensorStorage;

class Tensor {
 public:
  Tensor() = default;  // undefined: no shape, no storage
  // Zeroed memory on `device` (any device with registered memory, or meta).
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu);
  // Memory whose bytes are whatever it held before (a reused block): only for an output that a
  // kernel overwrites whole before anything reads it. Spares the zeroing and the page faults.
  static Tensor uninitialized(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu);
  // Host tensors from host values; values are rounded to bf16 when dtype is bf16.
  static Tensor full(const Shape& shape, float value, DType dtype = DType::f32);
  static Tensor from_values(const Shape& shape, const std::vector<float>& values, DType dtype = DType::f32);
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
  bool is_meta() const { return device_.kind == DeviceKind::meta; }

  // Host element access to cpu tensors. data()/values() need f32, bf16_data() bf16; a device
  // tensor throws HostAccessError naming the access and the tensor.
  float* data();
  const float* data() const;
  std::span<float> values();
  std::span<const float> values() const;
  uint16_t* bf16_data();
  const uint16_t* bf16_data() const;
  float item() const;                   // the one element of a numel-1 cpu tensor, either dtype
  std::vector<float> to_floats() const; // every element of a cpu tensor as a float (bf16 widened)

  // The raw bytes, for the code that runs where they live: kernels and communicators of this
  // tensor's device. Host code that calls it on a device tensor defeats the host-access check.
  void* device_bytes();
  const void* device_bytes() const;
  // The same storage labelled as another device with host-readable bytes: how the simulator's
  // opaque kernels run the cpu reference kernels over opaque memory (sim/opaque_device.cc).
  Tensor relabeled_as(Device device) const;

  Tensor clone() const;                       // deep copy of a cpu or meta tensor
  Tensor reshape(const Shape& shape) const;   // shares storage; numel must match
  // A view of the first shape_numel(shape) elements with the given shape (shares storage). Lets a
  // gather buffer of world * shard elements show the unpadded parameter without a copy.
  Tensor view_prefix(const Shape& shape) const;
  // A view of shape_numel(shape) elements from element `first` on (shares storage): one block of
  // a tensor's outermost dimension, such as the q, k and v of attention's [3, B, heads, T, hd].
  Tensor view_range(int64_t first, const Shape& shape) const;
  Tensor to_dtype(DType dtype) const;         // host copy with rounding when narrowing to bf16
  // True when both tensors view the same storage (used to spot aliasing of released buffers).
  bool shares_storage_with(const Tensor& other) const { return storage_ && storage_ == other.storage_; }
  // Identity of the underlying storage (null for meta): lets the simulator track in-flight buffers.
  const void* storage_id() const { return storage_.get(); }

 private:
  Tensor(const Shape& shape, DType dtype, Device device, std::shared_ptr<TensorStorage> storage,
         int64_t offset_bytes = 0);
  void* first_byte() const;  // the storage's bytes from this tensor's first element on
  void require_host(const char* access, DType dtype) const;

  bool defined_ = false;
  Shape shape_;
  int64_t numel_ = 0;
  DType dtype_ = DType::f32;
  Device device_ = Device::cpu;
  std::shared_ptr<TensorStorage> storage_;
  int64_t offset_bytes_ = 0;  // where this tensor's first element sits in storage_ (views)
};

std::string describe(const Tensor& tensor);  // "f32[2,3] cpu"

}  // namespace zero3
