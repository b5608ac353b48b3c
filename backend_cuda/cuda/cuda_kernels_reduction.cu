// Sums and the optimizer: sum_to_shape, sum_all, average, sum_of_squares_into (all summed in
// double, as the reference sums) and AdamW. No atomics: a whole-range sum is a fixed number of
// blocks per range, each a fixed tree, then the blocks' totals in order, so the same input gives
// the same bits on every run.
#include <string>

#include "backend_cuda/cuda/cuda_kernels_internal.h"
#include "core/base/errors.h"
#include "core/tensor/kernel_preconditions.h"

namespace zero3 {
namespace {

// Elements [begin, end) of one operand, summed by `blocks` blocks whose totals go to
// partials[first_partial + block].
struct DeviceRange {
  ElementsIn values;
  int64_t begin = 0;
  int64_t end = 0;
  int64_t first_partial = 0;
  int64_t blocks = 1;
};

// Blocks for a range: about 16 elements a thread, at most kRangeBlocksMax. A function of the
// range's length only, so a range always splits the same way.
constexpr int64_t kRangeBlocksMax = 1024;
int64_t range_blocks(int64_t count) {
  constexpr int64_t kElementsPerBlock = int64_t{kThreads} * 16;
  return std::clamp<int64_t>((count + kElementsPerBlock - 1) / kElementsPerBlock, 1, kRangeBlocksMax);
}

// grid.y walks the ranges and grid.x a range's blocks; conditions on blockIdx alone keep every
// thread of a block together for block_sum.
__global__ void range_sums_kernel(const DeviceRange* ranges, int64_t range_count, bool squares, double* partials) {
  for (int64_t r = blockIdx.y; r < range_count; r += gridDim.y) {
    const DeviceRange range = ranges[r];
    if (static_cast<int64_t>(blockIdx.x) >= range.blocks) continue;
    double local = 0.0;
    const int64_t stride = range.blocks * blockDim.x;
    for (int64_t i = range.begin + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < range.end;
         i += stride) {
      const double value = range.values[i];
      local += squares ? value * value : value;
    }
    const double total = block_sum(local);
    if (threadIdx.x == 0) partials[range.first_partial + blockIdx.x] = total;
  }
}

// One block: each range's block totals summed (a fixed tree), the ranges added in order, as the
// reference adds its parts, then divided and rounded once.
__global__ void finish_range_sums_kernel(const DeviceRange* ranges, int64_t range_count, const double* partials,
                                         double divisor, ElementsOut out, int64_t index) {
  double running = 0.0;
  for (int64_t r = 0; r < range_count; ++r) {
    double local = 0.0;
    for (int64_t b = threadIdx.x; b < ranges[r].blocks; b += blockDim.x) local += partials[ranges[r].first_partial + b];
    running += block_sum(local);
  }
  if (threadIdx.x == 0) out.store(index, cuda_math::finished_sum(running, divisor));
}

__global__ void convert_kernel(ElementsIn in, ElementsOut out, int64_t count) {
  for (int64_t i = first_index(); i < count; i += index_stride()) out.store(i, in[i]);
}

__global__ void adamw_kernel(ElementsOut param, ElementsIn grad, ElementsOut exp_avg, ElementsOut exp_avg_sq,
                             AdamWCoefficients coefficients, int64_t count) {
  for (int64_t i = first_index(); i < count; i += index_stride()) {
    const cuda_math::AdamWState state =
        cuda_math::adamw_update({.param = param[i], .exp_avg = exp_avg[i], .exp_avg_sq = exp_avg_sq[i]}, grad[i],
                                coefficients);
    param.store(i, state.param);
    exp_avg.store(i, state.exp_avg);
    exp_avg_sq.store(i, state.exp_avg_sq);
  }
}

}  // namespace

void CudaKernels::finished_range_sum(const std::vector<TensorRange>& parts, bool squares, double divisor,
                                     Tensor& out, int64_t index) {
  const ElementsOut po = write(out);
  std::vector<DeviceRange> ranges;
  int64_t partial_count = 0, blocks_max = 1;
  for (const TensorRange& part : parts) {
    const int64_t blocks = range_blocks(part.end - part.begin);
    ranges.push_back({.values = read(*part.tensor), .begin = part.begin, .end = part.end,
                      .first_partial = partial_count, .blocks = blocks});
    partial_count += blocks;
    blocks_max = std::max(blocks_max, blocks);
  }
  const Tensor device_ranges = upload_table(ranges);
  Tensor partials = scratch(partial_count * static_cast<int64_t>(sizeof(double)));
  const auto* range_table = static_cast<const DeviceRange*>(device_ranges.device_bytes());
  auto* partial_sums = static_cast<double*>(partials.device_bytes());
  const auto range_count = static_cast<int64_t>(ranges.size());
  if (range_count > 0) {
    const dim3 grid(static_cast<unsigned>(blocks_max), static_cast<unsigned>(std::min<int64_t>(range_count, 65535)));
    range_sums_kernel<<<grid, kThreads, 0, stream()>>>(range_table, range_count, squares, partial_sums);
    check_launch("range_sums_kernel");
  }
  finish_range_sums_kernel<<<1, kThreads, 0, stream()>>>(range_table, range_count, partial_sums, divisor, po, index);
  check_launch("finish_range_sums_kernel");
}

void CudaKernels::sum_to_shape(const Tensor& in, Tensor& out) {
  check_sum_to_shape_sizes(in, out);
  const ElementsIn pi = read(in);
  const ElementsOut po = write(out);
  if (out.numel() == 0) return;
  if (in.numel() == out.numel()) {
    convert_kernel<<<blocks_for(in.numel()), kThreads, 0, stream()>>>(pi, po, in.numel());
    check_launch("convert_kernel");
  } else if (out.numel() == 1) {
    finished_range_sum({{.tensor = &in, .begin = 0, .end = in.numel()}}, false, 1.0, out, 0);
  } else {
    const cuda_math::ReductionPlan plan = cuda_math::make_reduction_plan(in.shape(), out.shape());
    ZERO3_CHECK(plan.outputs == out.numel(), "sum_to_shape plan for " + describe(in) + " -> " + describe(out));
    split_sums(cuda_math::SumToShapeTerm{.in = pi, .kept = plan.kept, .reduced = plan.reduced}, plan.outputs,
               plan.reduced_count, StoreSum{.out = po});
  }
}

void CudaKernels::sum_all(const Tensor& in, Tensor& out_scalar) {
  finished_range_sum({{.tensor = &in, .begin = 0, .end = in.numel()}}, false, 1.0, out_scalar, 0);
}

void CudaKernels::average(const Tensor& in, Tensor& out_scalar) {
  check_average_sizes(in);
  finished_range_sum({{.tensor = &in, .begin = 0, .end = in.numel()}}, false, static_cast<double>(in.numel()),
                     out_scalar, 0);
}

void CudaKernels::sum_of_squares_into(const std::vector<TensorRange>& parts, Tensor& out, int64_t index,
                                      double divisor) {
  check_sum_of_squares_sizes(parts, out, index);
  finished_range_sum(parts, true, divisor, out, index);
}

void CudaKernels::adamw(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                        const AdamWCoefficients& coefficients) {
  check_adamw_sizes(param, grad, exp_avg, exp_avg_sq);
  const ElementsIn g = read(grad);
  const ElementsOut p = write(param), m = write(exp_avg), v = write(exp_avg_sq);
  if (param.numel() == 0) return;
  adamw_kernel<<<blocks_for(param.numel()), kThreads, 0, stream()>>>(p, g, m, v, coefficients, param.numel());
  check_launch("adamw_kernel");
}

}  // namespace zero3
