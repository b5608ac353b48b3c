// CudaKernels and what its files (cuda_kernels*.cu) share: operand views, launch sizes, scratch
// and table uploads, the block-wide reductions behind BlockTeam, and the deterministic split
// sums. Private to those files, which nvcc compiles.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend_cuda/cuda/cuda_context.h"
#include "backend_cuda/cuda/cuda_element_functions.h"
#include "backend_cuda/cuda/gemm_shape.h"
#include "core/tensor/kernels.h"

namespace zero3 {

using cuda_math::ElementsIn;
using cuda_math::ElementsOut;

// Elementwise launches: kThreads a block, at most kMaxBlocks blocks, each thread striding over the
// rest (grid-stride loops with int64 indices, so any numel fits).
inline constexpr int kThreads = 256;
inline constexpr int64_t kMaxBlocks = 65536;

inline unsigned blocks_for(int64_t count) {
  return static_cast<unsigned>(std::clamp<int64_t>((count + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

// Threads for a kernel that gives each row one block: a whole number of warps, up to 256, no more
// than the row needs. Depends on the row length only, so a shape always reduces in one order.
inline unsigned row_threads(int64_t cols) {
  return static_cast<unsigned>(std::clamp<int64_t>((cols + 31) / 32 * 32, 32, 256));
}

__device__ inline int64_t first_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t index_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// A launch's configuration error (a bad grid, a missing kernel image), as BackendError.
void check_launch(const char* kernel);

// Sum of one double per thread over the block, returned to every thread. Fixed shape: a shuffle
// tree in each warp, then the warps' totals in warp order, so the same inputs give the same bits.
// Every thread of the block must call it (blockDim.x a multiple of 32).
__device__ inline double block_sum(double value) {
  __shared__ double warp_totals[32];
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_down_sync(0xffffffffu, value, offset);
  __syncthreads();  // the previous call's readers are done with warp_totals
  if (threadIdx.x % 32 == 0) warp_totals[threadIdx.x / 32] = value;
  __syncthreads();
  double total = 0.0;
  for (unsigned w = 0; w < blockDim.x / 32; ++w) total += warp_totals[w];
  return total;
}

// The block's largest float by SerialTeam's rule (`best < candidate` replaces), to every thread.
__device__ inline float block_max(float value) {
  __shared__ float warp_best[32];
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_down_sync(0xffffffffu, value, offset);
    if (value < other) value = other;
  }
  __syncthreads();
  if (threadIdx.x % 32 == 0) warp_best[threadIdx.x / 32] = value;
  __syncthreads();
  float best = warp_best[0];
  for (unsigned w = 1; w < blockDim.x / 32; ++w) {
    if (best < warp_best[w]) best = warp_best[w];
  }
  return best;
}

// SerialTeam's interface over one thread block: each thread takes every blockDim.x-th element of
// the row, and sums and maxima meet in block_sum / block_max. The row functions of
// cuda_element_functions.h run on it unchanged.
struct BlockTeam {
  template <class Term>
  __device__ double sum(int64_t count, Term term) const {
    double local = 0.0;
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) local += term(i);
    return block_sum(local);
  }
  template <class Value>
  __device__ float max(int64_t count, Value value) const {
    float local = -INFINITY;
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
      const float candidate = value(i);
      if (local < candidate) local = candidate;
    }
    return block_max(local);
  }
  template <class Body>
  __device__ void for_each(int64_t count, Body body) const {
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) body(i);
  }
  __device__ bool leader() const { return threadIdx.x == 0; }
};

// ---- Split sums: `outputs` sums of `reduced` double terms each, term(output, r) ----
// Too few outputs to give each a thread (a bias gradient has C of them over B*T rows), so each
// output's range of r is cut into `splits` chunks summed in parallel, then the chunks in order.
// The split count depends on the sizes only: a shape always sums in the same order.

inline int64_t split_count(int64_t outputs, int64_t reduced) {
  constexpr int64_t kThreadsWanted = 131072, kTermsPerChunkMin = 64, kSplitsMax = 4096;
  const int64_t wanted = (kThreadsWanted + outputs - 1) / outputs;
  const int64_t affordable = (reduced + kTermsPerChunkMin - 1) / kTermsPerChunkMin;
  return std::clamp<int64_t>(std::min(wanted, affordable), 1, kSplitsMax);
}

// Work item = split * outputs + output: neighbouring threads take neighbouring outputs, which
// read neighbouring elements when the output index is the inner dim.
template <class Term>
__global__ void split_sums_kernel(Term term, int64_t outputs, int64_t reduced, int64_t splits, double* partials) {
  const int64_t chunk = (reduced + splits - 1) / splits;
  for (int64_t item = first_index(); item < outputs * splits; item += index_stride()) {
    const int64_t output = item % outputs;
    const int64_t begin = item / outputs * chunk;
    const int64_t end = begin + chunk < reduced ? begin + chunk : reduced;
    double total = 0.0;
    for (int64_t r = begin; r < end; ++r) total += term(output, r);
    partials[item] = total;
  }
}

template <class Finish>
__global__ void finish_split_sums_kernel(const double* partials, int64_t outputs, int64_t splits, Finish finish) {
  for (int64_t output = first_index(); output < outputs; output += index_stride()) {
    double total = 0.0;
    for (int64_t split = 0; split < splits; ++split) total += partials[split * outputs + output];
    finish(output, total);
  }
}

// Writes each finished sum as a float into `out`.
struct StoreSum {
  ElementsOut out;
  __device__ void operator()(int64_t output, double total) const { out.store(output, static_cast<float>(total)); }
};

class CudaKernels final : public Kernels {
 public:
  explicit CudaKernels(CudaContext& context);
  const char* name() const override { return "cuda"; }
  Device device() const override { return context_.device(); }

  // cuda_kernels_elementwise.cu
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) override;
  void unary(UnaryOp op, const Tensor& in, Tensor& out) override;
  void unary_backward(UnaryOp op, const Tensor& in, const Tensor& grad_out, Tensor& grad_in) override;
  void scale(const Tensor& in, float factor, Tensor& out) override;
  void add_into(Tensor& accumulator, const Tensor& addend) override;
  void fill(Tensor& out, float value) override;
  void copy(const Tensor& in, Tensor& out) override;
  void copy_segments(const Tensor& in, Tensor& out, const std::vector<CopySegment>& segments) override;
  void fill_range(Tensor& out, int64_t begin, int64_t count, float value) override;
  void fill_from_scalar(Tensor& out, const Tensor& scalar, float multiplier, float divisor) override;
  void scale_by_scalar(const Tensor& in, const Tensor& scalar, float multiplier, float divisor, Tensor& out) override;

  // cuda_kernels_matmul.cu. Every call is also offered to the attached GEMM shape log, if any
  // (attach_gemm_shape_log in cuda_kernels.h), which keeps it while recording.
  void attach_gemm_shape_log(GemmShapeLog* log) { gemm_shape_log_ = log; }
  void matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& out, int64_t batch, int64_t m,
              int64_t n, int64_t k, bool b_shared, float beta) override;

  // cuda_kernels_normalization.cu
  void layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& out,
                          Tensor& mean, Tensor& rstd) override;
  void layer_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                           const Tensor& grad_out, Tensor& grad_x, Tensor& grad_gamma, Tensor& grad_beta) override;
  void rms_norm_forward(const Tensor& x, const Tensor& gamma, float eps, Tensor& out, Tensor& rstd) override;
  void rms_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& rstd, const Tensor& grad_out,
                         Tensor& grad_x, Tensor& grad_gamma) override;
  void causal_softmax_forward(const Tensor& scores, Tensor& out) override;
  void causal_softmax_backward(const Tensor& out, const Tensor& grad_out, Tensor& grad_scores) override;
  void cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& loss, Tensor& probs) override;
  void cross_entropy_backward(const Tensor& probs, const Tensor& targets, const Tensor& grad_loss,
                              Tensor& grad_logits) override;

  // cuda_kernels_indexing.cu
  void permute(const Tensor& in, const std::vector<int64_t>& perm, Tensor& out) override;
  void slice(const Tensor& in, int64_t dim, int64_t start, Tensor& out) override;
  void slice_backward_into(const Tensor& grad_part, int64_t dim, int64_t start, Tensor& grad_in) override;
  void select_rows(const Tensor& x, const std::vector<int64_t>& rows, Tensor& out) override;
  void select_rows_backward_into(const Tensor& grad_out, const std::vector<int64_t>& rows, Tensor& grad_x) override;
  void embedding_forward(const Tensor& table, const Tensor& ids, Tensor& out) override;
  void embedding_backward_into(const Tensor& grad_out, const Tensor& ids, Tensor& grad_table) override;
  void row_argmax(const Tensor& x, Tensor& out) override;

  // cuda_kernels_reduction.cu
  void sum_to_shape(const Tensor& in, Tensor& out) override;
  void sum_all(const Tensor& in, Tensor& out_scalar) override;
  void average(const Tensor& in, Tensor& out_scalar) override;
  void sum_of_squares_into(const std::vector<TensorRange>& parts, Tensor& out, int64_t index,
                           double divisor) override;
  void adamw(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
             const AdamWCoefficients& coefficients) override;

  // Shared by the files above; defined in cuda_kernels.cu unless said otherwise.
  cudaStream_t stream() const { return context_.compute_stream(); }
  // Operand views, checked to live on this GPU.
  void require_resident(const Tensor& tensor) const;
  ElementsIn read(const Tensor& tensor) const;
  ElementsOut write(Tensor& tensor) const;
  // Device bytes freed when the tensor goes: the cuda memory frees on the compute stream, so a
  // kernel enqueued before the free still finds them.
  Tensor scratch(int64_t bytes) const;
  // `count` items of `bytes_each` bytes (from pageable host memory) copied to scratch on the
  // compute stream: the tables of segments, rows and ranges some kernels read.
  Tensor upload_bytes(const void* items, int64_t count, int64_t bytes_each);
  template <class Item>
  Tensor upload_table(const std::vector<Item>& items) {
    return upload_bytes(items.data(), static_cast<int64_t>(items.size()), static_cast<int64_t>(sizeof(Item)));
  }
  // Sums in double of whole element ranges, written as one float (cuda_kernels_reduction.cu). The
  // ranges are in bounds: whole tensors, or sum_of_squares_into's, checked by its precondition.
  void finished_range_sum(const std::vector<TensorRange>& parts, bool squares, double divisor, Tensor& out,
                          int64_t index);

  // `outputs` sums of `reduced` terms each (split_sums_kernel), finish(output, total) per output.
  template <class Term, class Finish>
  void split_sums(Term term, int64_t outputs, int64_t reduced, Finish finish) {
    if (outputs == 0) return;
    const int64_t splits = split_count(outputs, reduced);
    Tensor partials = scratch(outputs * splits * static_cast<int64_t>(sizeof(double)));
    auto* partial_sums = static_cast<double*>(partials.device_bytes());
    split_sums_kernel<<<blocks_for(outputs * splits), kThreads, 0, stream()>>>(term, outputs, reduced, splits,
                                                                             partial_sums);
    check_launch("split_sums_kernel");
    finish_split_sums_kernel<<<blocks_for(outputs), kThreads, 0, stream()>>>(partial_sums, outputs, splits, finish);
    check_launch("finish_split_sums_kernel");
  }

 protected:
  void download(const Tensor& device_tensor, Tensor& host) override;
  void upload(const Tensor& host, Tensor& device_tensor) override;

 private:
  void copy_bytes_to_device(const void* host, void* device, int64_t bytes);

  CudaContext& context_;
  GemmShapeLog* gemm_shape_log_ = nullptr;  // not owned; null: no one asked for the GEMM shapes
};

}  // namespace zero3
