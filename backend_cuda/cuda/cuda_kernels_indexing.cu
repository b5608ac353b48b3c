// Kernels that move elements by index: permute, slice, select_rows, the embedding lookup and
// row_argmax. The backward scatters add in index order without atomics (deterministic): the
// contributions to one row are sorted next to each other (stably), then summed in order.
#include <cub/cub.cuh>

#include <algorithm>
#include <bit>
#include <string>

#include "backend_cuda/cuda/cuda_kernels_internal.h"
#include "core/tensor/kernel_preconditions.h"
#include "core/tensor/slice_layout.h"

namespace zero3 {
namespace {

using cuda_math::StridedWalk;

// Walked over out's index space; reads go through floats, as the reference's permute does.
__global__ void permute_kernel(ElementsIn in, ElementsOut out, StridedWalk walk, int64_t count) {
  for (int64_t i = first_index(); i < count; i += index_stride()) out.store(i, in[walk.offset(i, 0)]);
}

// The offset in the full tensor of element `i` of the part, the part starting at `start`.
__device__ int64_t full_offset(const SliceLayout& layout, int64_t i, int64_t start) {
  const int64_t block = layout.dim_part * layout.inner;
  return (i / block * layout.dim_full + start) * layout.inner + i % block;
}

// Copies as the reference's segment copies do: equal dtypes keep their bits.
__global__ void slice_kernel(ElementsIn in, ElementsOut out, SliceLayout layout, int64_t start, int64_t count) {
  for (int64_t i = first_index(); i < count; i += index_stride()) {
    cuda_math::copy_element(in, full_offset(layout, i, start), out, i);
  }
}

__global__ void slice_backward_kernel(ElementsIn grad_part, ElementsOut grad_in, SliceLayout layout, int64_t start,
                                      int64_t count) {
  for (int64_t i = first_index(); i < count; i += index_stride()) {
    const int64_t target = full_offset(layout, i, start);
    grad_in.store(target, grad_in[target] + grad_part[i]);
  }
}

__global__ void select_rows_kernel(ElementsIn x, const int64_t* rows, ElementsOut out, int64_t cols, int64_t count) {
  for (int64_t i = first_index(); i < count; i += index_stride()) {
    cuda_math::copy_element(x, rows[i / cols] * cols + i % cols, out, i);
  }
}

// An id that is not a row of the table (the ops reject those first) gives a NaN row.
__global__ void embedding_forward_kernel(ElementsIn table, int64_t table_rows, ElementsIn ids, ElementsOut out,
                                         int64_t cols, int64_t count) {
  for (int64_t i = first_index(); i < count; i += index_stride()) {
    const int64_t row = cuda_math::row_index(ids[i / cols], table_rows);
    if (row < 0) {
      out.store(i, cuda_math::quiet_nan());
    } else {
      cuda_math::copy_element(table, row * cols + i % cols, out, i);
    }
  }
}

// Sort keys for the embedding backward: the table row of each id (table_rows for a bad id, which
// sorts last and is skipped), with the id's position as the value.
__global__ void embedding_keys_kernel(ElementsIn ids, int64_t table_rows, uint64_t* keys, int64_t* positions,
                                      int64_t count) {
  for (int64_t i = first_index(); i < count; i += index_stride()) {
    const int64_t row = cuda_math::row_index(ids[i], table_rows);
    keys[i] = static_cast<uint64_t>(row < 0 ? table_rows : row);
    positions[i] = i;
  }
}

// keys sorted stably, positions alongside: the first entry of each run of equal keys sums the
// run's gradient rows in position order onto its table row, one thread per column. The order,
// the float sums from the table's value and the single rounding are the reference's, so the
// result is its bits.
__global__ void add_sorted_runs_kernel(const uint64_t* keys, const int64_t* positions, int64_t count,
                                       ElementsIn grad_out, ElementsOut grad_table, int64_t table_rows, int64_t cols) {
  for (int64_t item = first_index(); item < count * cols; item += index_stride()) {
    const int64_t i = item / cols, c = item % cols;
    const uint64_t key = keys[i];
    if (key >= static_cast<uint64_t>(table_rows) || (i > 0 && keys[i - 1] == key)) continue;
    const int64_t target = static_cast<int64_t>(key) * cols + c;
    float total = grad_table[target];
    for (int64_t j = i; j < count && keys[j] == key; ++j) total += grad_out[positions[j] * cols + c];
    grad_table.store(target, total);
  }
}

__global__ void row_argmax_kernel(ElementsIn x, ElementsOut out, int64_t rows, int64_t cols) {
  for (int64_t row = first_index(); row < rows; row += index_stride()) {
    out.store(row, static_cast<float>(cuda_math::row_argmax_of(x, row, cols)));
  }
}

}  // namespace

void CudaKernels::permute(const Tensor& in, const std::vector<int64_t>& perm, Tensor& out) {
  check_permute_sizes(in, perm, out);
  const ElementsIn pi = read(in);
  const ElementsOut po = write(out);
  if (out.numel() == 0) return;
  const StridedWalk walk = cuda_math::make_permute_walk(in.shape(), perm);
  permute_kernel<<<blocks_for(out.numel()), kThreads, 0, stream()>>>(pi, po, walk, out.numel());
  check_launch("permute_kernel");
}

void CudaKernels::slice(const Tensor& in, int64_t dim, int64_t start, Tensor& out) {
  const SliceLayout layout = slice_layout(in.shape(), out.shape(), dim, start);
  const ElementsIn pi = read(in);
  const ElementsOut po = write(out);
  if (out.numel() == 0) return;
  slice_kernel<<<blocks_for(out.numel()), kThreads, 0, stream()>>>(pi, po, layout, start, out.numel());
  check_launch("slice_kernel");
}

void CudaKernels::slice_backward_into(const Tensor& grad_part, int64_t dim, int64_t start, Tensor& grad_in) {
  const SliceLayout layout = slice_layout(grad_in.shape(), grad_part.shape(), dim, start);
  const ElementsIn part = read(grad_part);
  const ElementsOut full = write(grad_in);
  if (grad_part.numel() == 0) return;
  slice_backward_kernel<<<blocks_for(grad_part.numel()), kThreads, 0, stream()>>>(part, full, layout, start,
                                                                                 grad_part.numel());
  check_launch("slice_backward_kernel");
}

void CudaKernels::select_rows(const Tensor& x, const std::vector<int64_t>& rows, Tensor& out) {
  check_select_rows_sizes(x, rows, out);
  const int64_t cols = x.dim(1);
  const ElementsIn px = read(x);
  const ElementsOut po = write(out);
  if (out.numel() == 0) return;
  const Tensor device_rows = upload_table(rows);
  select_rows_kernel<<<blocks_for(out.numel()), kThreads, 0, stream()>>>(
      px, static_cast<const int64_t*>(device_rows.device_bytes()), po, cols, out.numel());
  check_launch("select_rows_kernel");
}

// The rows are on the host already: they are sorted there (stably, so repeated rows keep their
// order) and the GPU adds the runs.
void CudaKernels::select_rows_backward_into(const Tensor& grad_out, const std::vector<int64_t>& rows,
                                            Tensor& grad_x) {
  check_select_rows_backward_sizes(grad_out, rows, grad_x);
  const int64_t cols = grad_x.dim(1);
  const ElementsIn part = read(grad_out);
  const ElementsOut full = write(grad_x);
  if (grad_out.numel() == 0) return;
  std::vector<int64_t> positions(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) positions[i] = static_cast<int64_t>(i);
  std::stable_sort(positions.begin(), positions.end(), [&](int64_t p, int64_t q) { return rows[p] < rows[q]; });
  std::vector<uint64_t> keys(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) keys[i] = static_cast<uint64_t>(rows[positions[i]]);
  const Tensor device_keys = upload_table(keys), device_positions = upload_table(positions);
  const auto count = static_cast<int64_t>(rows.size());
  add_sorted_runs_kernel<<<blocks_for(count * cols), kThreads, 0, stream()>>>(
      static_cast<const uint64_t*>(device_keys.device_bytes()),
      static_cast<const int64_t*>(device_positions.device_bytes()), count, part, full, grad_x.dim(0), cols);
  check_launch("add_sorted_runs_kernel");
}

void CudaKernels::embedding_forward(const Tensor& table, const Tensor& ids, Tensor& out) {
  check_embedding_forward_sizes(table, ids, out);
  const int64_t cols = table.dim(1);
  const ElementsIn pt = read(table), pids = read(ids);
  const ElementsOut po = write(out);
  if (out.numel() == 0) return;
  embedding_forward_kernel<<<blocks_for(out.numel()), kThreads, 0, stream()>>>(pt, table.dim(0), pids, po, cols,
                                                                             out.numel());
  check_launch("embedding_forward_kernel");
}

// The ids live on the GPU, so they are sorted there: cub's radix sort is stable, so equal rows
// keep their id order, and it sorts only the bits a row index needs.
void CudaKernels::embedding_backward_into(const Tensor& grad_out, const Tensor& ids, Tensor& grad_table) {
  check_embedding_backward_sizes(grad_out, ids, grad_table);
  const int64_t cols = grad_table.dim(1), table_rows = grad_table.dim(0), count = ids.numel();
  const ElementsIn pids = read(ids), pgrad = read(grad_out);
  const ElementsOut table = write(grad_table);
  if (count == 0 || cols == 0) return;
  const int64_t array_bytes = count * static_cast<int64_t>(sizeof(int64_t));
  Tensor keys_in = scratch(array_bytes), keys_out = scratch(array_bytes);
  Tensor positions_in = scratch(array_bytes), positions_out = scratch(array_bytes);
  auto* unsorted_keys = static_cast<uint64_t*>(keys_in.device_bytes());
  auto* sorted_keys = static_cast<uint64_t*>(keys_out.device_bytes());
  auto* unsorted_positions = static_cast<int64_t*>(positions_in.device_bytes());
  auto* sorted_positions = static_cast<int64_t*>(positions_out.device_bytes());
  embedding_keys_kernel<<<blocks_for(count), kThreads, 0, stream()>>>(pids, table_rows, unsorted_keys,
                                                                    unsorted_positions, count);
  check_launch("embedding_keys_kernel");
  const int end_bit = std::max(1, static_cast<int>(std::bit_width(static_cast<uint64_t>(table_rows))));
  size_t temporary_bytes = 0;
  check_cuda(cub::DeviceRadixSort::SortPairs(nullptr, temporary_bytes, unsorted_keys, sorted_keys, unsorted_positions,
                                             sorted_positions, count, 0, end_bit, stream()),
             "cub::DeviceRadixSort::SortPairs (size query)");
  Tensor temporary = scratch(std::max<int64_t>(1, static_cast<int64_t>(temporary_bytes)));
  check_cuda(cub::DeviceRadixSort::SortPairs(temporary.device_bytes(), temporary_bytes, unsorted_keys, sorted_keys,
                                             unsorted_positions, sorted_positions, count, 0, end_bit, stream()),
             "cub::DeviceRadixSort::SortPairs");
  add_sorted_runs_kernel<<<blocks_for(count * cols), kThreads, 0, stream()>>>(sorted_keys, sorted_positions, count,
                                                                            pgrad, table, table_rows, cols);
  check_launch("add_sorted_runs_kernel");
}

// One thread per row: MoE routing's rows have a handful of experts each, and a serial scan keeps
// the reference's tie (and NaN) behaviour exactly.
void CudaKernels::row_argmax(const Tensor& x, Tensor& out) {
  check_row_argmax_sizes(x, out);
  const int64_t rows = x.dim(0), cols = x.dim(1);
  const ElementsIn px = read(x);
  const ElementsOut po = write(out);
  if (rows == 0) return;
  row_argmax_kernel<<<blocks_for(rows), kThreads, 0, stream()>>>(px, po, rows, cols);
  check_launch("row_argmax_kernel");
}

}  // namespace zero3
