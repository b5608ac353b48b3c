// Kernels that move elements by index: permute, slice, select_rows and the embedding lookup.
#include <algorithm>
#include <string>
#include <vector>

#include "core/base/math_bugs.h"
#include "core/tensor/cpu_kernels_internal.h"
#include "core/tensor/kernel_preconditions.h"
#include "core/tensor/slice_layout.h"

namespace zero3 {

void CpuKernels::permute(const Tensor& in, const std::vector<int64_t>& perm, Tensor& out) {
  check_permute_sizes(in, perm, out);
  const std::vector<int64_t> in_strides = contiguous_strides(in.shape());
  std::vector<int64_t> strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) strides[i] = in_strides[perm[i]];
  const FloatsIn pi = read(in);
  FloatsOut po = write(out);
  const std::vector<int64_t> unused(perm.size(), 0);
  for_each_row(out.shape(), strides, unused,
               [&](int64_t offset, int64_t oa, int64_t, int64_t count, int64_t sa, int64_t) {
                 for (int64_t i = 0; i < count; ++i) po[offset + i] = pi[oa + i * sa];
               });
}

void CpuKernels::slice(const Tensor& in, int64_t dim, int64_t start, Tensor& out) {
  const SliceLayout layout = slice_layout(in.shape(), out.shape(), dim, start);
  std::vector<CopySegment> rows;
  for (int64_t o = 0; o < layout.outer; ++o) {
    rows.push_back({.from = (o * layout.dim_full + start) * layout.inner,
                    .to = o * layout.dim_part * layout.inner,
                    .count = layout.dim_part * layout.inner});
  }
  copy_segments(in, out, rows);
}

void CpuKernels::slice_backward_into(const Tensor& grad_part, int64_t dim, int64_t start, Tensor& grad_in) {
  const SliceLayout layout = slice_layout(grad_in.shape(), grad_part.shape(), dim, start);
  const int64_t block = layout.dim_part * layout.inner;
  const FloatsIn part = read(grad_part);
  FloatsOut full = write(grad_in);
  for (int64_t o = 0; o < layout.outer; ++o) {
    float* dst = full.get() + (o * layout.dim_full + start) * layout.inner;
    const float* src = part.get() + o * block;
    for (int64_t i = 0; i < block; ++i) dst[i] += src[i];
  }
}

void CpuKernels::select_rows(const Tensor& x, const std::vector<int64_t>& rows, Tensor& out) {
  check_select_rows_sizes(x, rows, out);
  const int64_t cols = x.dim(1);
  std::vector<CopySegment> segments;
  for (size_t r = 0; r < rows.size(); ++r) {
    segments.push_back({.from = rows[r] * cols, .to = static_cast<int64_t>(r) * cols, .count = cols});
  }
  copy_segments(x, out, segments);
}

void CpuKernels::select_rows_backward_into(const Tensor& grad_out, const std::vector<int64_t>& rows, Tensor& grad_x) {
  check_select_rows_backward_sizes(grad_out, rows, grad_x);
  const int64_t cols = grad_x.dim(1);
  const FloatsIn part = read(grad_out);
  FloatsOut full = write(grad_x);
  for (size_t r = 0; r < rows.size(); ++r) {
    float* dst = full.get() + rows[r] * cols;
    const float* src = part.get() + static_cast<int64_t>(r) * cols;
    for (int64_t c = 0; c < cols; ++c) dst[c] += src[c];
  }
}

void CpuKernels::embedding_forward(const Tensor& table, const Tensor& ids, Tensor& out) {
  check_embedding_forward_sizes(table, ids, out);
  const int64_t cols = table.dim(1);
  const FloatsIn pids = read(ids);
  std::vector<CopySegment> rows;
  for (int64_t i = 0; i < ids.numel(); ++i) {
    rows.push_back({.from = checked_row(pids[i], table.dim(0)) * cols, .to = i * cols, .count = cols});
  }
  copy_segments(table, out, rows);
}

void CpuKernels::embedding_backward_into(const Tensor& grad_out, const Tensor& ids, Tensor& grad_table) {
  check_embedding_backward_sizes(grad_out, ids, grad_table);
  const int64_t cols = grad_table.dim(1);
  const FloatsIn pids = read(ids), pgrad = read(grad_out);
  FloatsOut table = write(grad_table);
  const bool once = math_bug_on(MathBug::embedding_backward_repeated_id_once);
  std::vector<bool> seen(once ? static_cast<size_t>(grad_table.dim(0)) : 0);
  for (int64_t i = 0; i < ids.numel(); ++i) {
    const int64_t id = checked_row(pids[i], grad_table.dim(0));
    if (once) {  // a later use of the same id adds nothing
      if (seen[static_cast<size_t>(id)]) continue;
      seen[static_cast<size_t>(id)] = true;
    }
    float* row = table.get() + id * cols;
    const float* grad = pgrad.get() + i * cols;
    for (int64_t c = 0; c < cols; ++c) row[c] += grad[c];
  }
}

}  // namespace zero3
