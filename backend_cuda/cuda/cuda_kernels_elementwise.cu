// Elementwise kernels: binary with PyTorch broadcasting, unary and its backward, scaling, fills,
// and the copies (casts and segment copies). One thread per element, grid-stride loops.
#include <string>

#include "backend_cuda/cuda/cuda_kernels_internal.h"
#include "core/tensor/kernel_preconditions.h"

namespace zero3 {
namespace {

using cuda_math::StridedWalk;

__global__ void binary_kernel(BinaryOp op, ElementsIn a, ElementsIn b, ElementsOut out, StridedWalk walk,
                              int64_t count) {
  for (int64_t i = first_index(); i < count; i += index_stride()) {
    int64_t offset_a = 0, offset_b = 0;
    walk.offsets(i, offset_a, offset_b);
    out.store(i, cuda_math::binary_value(op, a[offset_a], b[offset_b]));
  }
}

__global__ void unary_kernel(UnaryOp op, ElementsIn in, ElementsOut out, int64_t count) {
  for (int64_t i = first_index(); i < count; i += index_stride()) out.store(i, cuda_math::unary_value(op, in[i]));
}

__global__ void unary_backward_kernel(UnaryOp op, ElementsIn in, ElementsIn grad_out, ElementsOut grad_in,
                                      int64_t count) {
  for (int64_t i = first_index(); i < count; i += index_stride()) {
    grad_in.store(i, cuda_math::unary_gradient(op, in[i], grad_out[i]));
  }
}

__global__ void scale_kernel(ElementsIn in, float factor, ElementsOut out, int64_t count) {
  for (int64_t i = first_index(); i < count; i += index_stride()) out.store(i, in[i] * factor);
}

// The factor comes from a device scalar (the loss and its seeds never visit the host).
__global__ void scale_by_scalar_kernel(ElementsIn in, ElementsIn scalar, float multiplier, float divisor,
                                       ElementsOut out, int64_t count) {
  const float factor = cuda_math::scalar_factor(scalar[0], multiplier, divisor);
  for (int64_t i = first_index(); i < count; i += index_stride()) out.store(i, in[i] * factor);
}

__global__ void add_into_kernel(ElementsOut accumulator, ElementsIn addend, int64_t count) {
  for (int64_t i = first_index(); i < count; i += index_stride()) accumulator.store(i, accumulator[i] + addend[i]);
}

__global__ void fill_kernel(ElementsOut out, int64_t begin, int64_t count, float value) {
  for (int64_t i = first_index(); i < count; i += index_stride()) out.store(begin + i, value);
}

__global__ void fill_from_scalar_kernel(ElementsOut out, ElementsIn scalar, float multiplier, float divisor,
                                        int64_t count) {
  const float value = cuda_math::scalar_factor(scalar[0], multiplier, divisor);
  for (int64_t i = first_index(); i < count; i += index_stride()) out.store(i, value);
}

// One run of a cast between different dtypes (equal dtypes go through cudaMemcpyAsync).
__global__ void cast_kernel(ElementsIn in, int64_t from, ElementsOut out, int64_t to, int64_t count) {
  for (int64_t i = first_index(); i < count; i += index_stride()) cuda_math::copy_element(in, from + i, out, to + i);
}

// A non-empty segment as the kernel sees it: `first` is the index of its first element among
// all the segments' elements laid end to end.
struct DeviceSegment {
  int64_t from = 0;
  int64_t to = 0;
  int64_t first = 0;
};

// Every element of every segment, one thread each; a thread finds its segment by binary search,
// so a few long segments and many short ones (bucket packing, bias rows) both fill the GPU.
__global__ void copy_segments_kernel(ElementsIn in, ElementsOut out, const DeviceSegment* segments,
                                     int64_t segment_count, int64_t total) {
  for (int64_t i = first_index(); i < total; i += index_stride()) {
    int64_t low = 0, high = segment_count - 1;  // the last segment whose first element is <= i
    while (low < high) {
      const int64_t middle = (low + high + 1) / 2;
      if (segments[middle].first <= i) {
        low = middle;
      } else {
        high = middle - 1;
      }
    }
    const DeviceSegment& segment = segments[low];
    cuda_math::copy_element(in, segment.from + i - segment.first, out, segment.to + i - segment.first);
  }
}

}  // namespace

void CudaKernels::binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  check_binary_sizes(a, b, out);
  const ElementsIn pa = read(a), pb = read(b);
  const ElementsOut po = write(out);
  const int64_t count = out.numel();
  if (count == 0) return;
  const StridedWalk walk = cuda_math::make_broadcast_walk(a.shape(), b.shape(), out.shape());
  binary_kernel<<<blocks_for(count), kThreads, 0, stream()>>>(op, pa, pb, po, walk, count);
  check_launch("binary_kernel");
}

void CudaKernels::unary(UnaryOp op, const Tensor& in, Tensor& out) {
  check_same_numel("unary", in, out);
  const ElementsIn pi = read(in);
  const ElementsOut po = write(out);
  if (in.numel() == 0) return;
  unary_kernel<<<blocks_for(in.numel()), kThreads, 0, stream()>>>(op, pi, po, in.numel());
  check_launch("unary_kernel");
}

void CudaKernels::unary_backward(UnaryOp op, const Tensor& in, const Tensor& grad_out, Tensor& grad_in) {
  check_unary_backward_sizes(in, grad_out, grad_in);
  const ElementsIn pi = read(in), pg = read(grad_out);
  const ElementsOut po = write(grad_in);
  if (in.numel() == 0) return;
  unary_backward_kernel<<<blocks_for(in.numel()), kThreads, 0, stream()>>>(op, pi, pg, po, in.numel());
  check_launch("unary_backward_kernel");
}

void CudaKernels::scale(const Tensor& in, float factor, Tensor& out) {
  check_same_numel("scale", in, out);
  const ElementsIn pi = read(in);
  const ElementsOut po = write(out);
  if (in.numel() == 0) return;
  scale_kernel<<<blocks_for(in.numel()), kThreads, 0, stream()>>>(pi, factor, po, in.numel());
  check_launch("scale_kernel");
}

void CudaKernels::add_into(Tensor& accumulator, const Tensor& addend) {
  check_add_into_sizes(accumulator, addend);
  const ElementsIn pb = read(addend);
  const ElementsOut pa = write(accumulator);
  if (addend.numel() == 0) return;
  add_into_kernel<<<blocks_for(addend.numel()), kThreads, 0, stream()>>>(pa, pb, addend.numel());
  check_launch("add_into_kernel");
}

void CudaKernels::fill(Tensor& out, float value) { fill_range(out, 0, out.numel(), value); }

void CudaKernels::fill_range(Tensor& out, int64_t begin, int64_t count, float value) {
  check_fill_range_sizes(out, begin, count);
  const ElementsOut po = write(out);
  if (count == 0) return;
  fill_kernel<<<blocks_for(count), kThreads, 0, stream()>>>(po, begin, count, value);
  check_launch("fill_kernel");
}

void CudaKernels::fill_from_scalar(Tensor& out, const Tensor& scalar, float multiplier, float divisor) {
  check_scalar_operand("fill_from_scalar", scalar);
  const ElementsIn ps = read(scalar);
  const ElementsOut po = write(out);
  if (out.numel() == 0) return;
  fill_from_scalar_kernel<<<blocks_for(out.numel()), kThreads, 0, stream()>>>(po, ps, multiplier, divisor,
                                                                            out.numel());
  check_launch("fill_from_scalar_kernel");
}

void CudaKernels::scale_by_scalar(const Tensor& in, const Tensor& scalar, float multiplier, float divisor,
                                  Tensor& out) {
  check_scalar_operand("scale_by_scalar", scalar);
  check_same_numel("scale", in, out);
  const ElementsIn pi = read(in), ps = read(scalar);
  const ElementsOut po = write(out);
  if (in.numel() == 0) return;
  scale_by_scalar_kernel<<<blocks_for(in.numel()), kThreads, 0, stream()>>>(pi, ps, multiplier, divisor, po,
                                                                           in.numel());
  check_launch("scale_by_scalar_kernel");
}

void CudaKernels::copy(const Tensor& in, Tensor& out) {
  check_same_numel("copy", in, out);
  copy_segments(in, out, {{.from = 0, .to = 0, .count = in.numel()}});
}

// Segments are copied all at once, so a segment's source must not overlap another's destination
// in a buffer that is both in and out; every caller copies between different buffers.
void CudaKernels::copy_segments(const Tensor& in, Tensor& out, const std::vector<CopySegment>& segments) {
  check_copy_segments_sizes(in, out, segments);
  const ElementsIn pi = read(in);
  const ElementsOut po = write(out);
  if (segments.size() == 1) {
    const CopySegment& segment = segments[0];
    if (segment.count == 0) return;
    if (in.dtype() == out.dtype()) {
      const int64_t element = dtype_bytes(in.dtype());
      check_cuda(cudaMemcpyAsync(static_cast<char*>(out.device_bytes()) + segment.to * element,
                                 static_cast<const char*>(in.device_bytes()) + segment.from * element,
                                 static_cast<size_t>(segment.count * element), cudaMemcpyDeviceToDevice, stream()),
                 "cudaMemcpyAsync(device to device)");
      return;
    }
    cast_kernel<<<blocks_for(segment.count), kThreads, 0, stream()>>>(pi, segment.from, po, segment.to, segment.count);
    check_launch("cast_kernel");
    return;
  }
  std::vector<DeviceSegment> table;
  int64_t total = 0;
  for (const CopySegment& segment : segments) {
    if (segment.count == 0) continue;
    table.push_back({.from = segment.from, .to = segment.to, .first = total});
    total += segment.count;
  }
  if (total == 0) return;
  const Tensor device_table = upload_table(table);
  copy_segments_kernel<<<blocks_for(total), kThreads, 0, stream()>>>(
      pi, po, static_cast<const DeviceSegment*>(device_table.device_bytes()), static_cast<int64_t>(table.size()),
      total);
  check_launch("copy_segments_kernel");
}

}  // namespace zero3
