// WorkCountingKernels: a Kernels decorator that forwards every call to the inner kernels and adds
// the call's work (kernel_work.h) to a running total, from the operands' shapes and dtypes alone:
// what `zero3 train --record` writes per module into a trace, and what `zero3 bench calibrate`
// divides its timings by, so that both count bytes the same way.
//
//   - matmul: 2 m n k flops per product of the batch, nothing else (the GEMM rate prices it);
//   - every other kernel: the bytes it reads and writes (each tensor's numel x its dtype's size;
//     only the touched part of a tensor for segments, ranges, slices, rows and embedding rows);
//   - transcendentals: GELU's tanh (forward and backward, one per element), the causal softmax's
//     exp (one per visible score), cross-entropy's exp per logit and log per row;
//   - one call per kernel call, downloads and uploads included.
// Attention's per-head products (a batched GEMM whose right operand is per batch, not shared) and
// the causal softmax are counted as growing with seq_len^2 as well (KernelWork's quadratic parts).
//
//   WorkCountingKernels counting(cpu_kernels());
//   const KernelWork before = counting.total();
//   counting.matmul(x, false, w, true, y, 1, rows, out_features, in_features, false, 0.0f);
//   KernelWork work = counting.total().since(before);   // work.flops == 2 * rows * out * in
#pragma once
#include <functional>

#include "core/tensor/kernels.h"
#include "traces/format/kernel_work.h"

namespace zero3 {

class WorkCountingKernels : public Kernels {
 public:
  explicit WorkCountingKernels(Kernels& inner) : inner_(inner) {}

  // Everything counted since construction; callers take differences (KernelWork::since).
  const KernelWork& total() const { return total_; }
  // Called before each kernel only backward uses (the `_backward` family), before it is counted:
  // how the recorder tells the loss's forward from its backward, which run outside every module.
  void set_before_backward_kernel(std::function<void()> listener) { before_backward_kernel_ = std::move(listener); }

  const char* name() const override { return inner_.name(); }
  Device device() const override { return inner_.device(); }
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) override;
  void sum_to_shape(const Tensor& in, Tensor& out) override;
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
  void row_argmax(const Tensor& x, Tensor& out) override;
  void matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& out, int64_t batch, int64_t m,
              int64_t n, int64_t k, bool b_shared, float beta) override;
  void layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& out,
                          Tensor& mean, Tensor& rstd) override;
  void layer_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                           const Tensor& grad_out, Tensor& grad_x, Tensor& grad_gamma, Tensor& grad_beta) override;
  void rms_norm_forward(const Tensor& x, const Tensor& gamma, float eps, Tensor& out, Tensor& rstd) override;
  void rms_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& rstd, const Tensor& grad_out,
                         Tensor& grad_x, Tensor& grad_gamma) override;
  void embedding_forward(const Tensor& table, const Tensor& ids, Tensor& out) override;
  void embedding_backward_into(const Tensor& grad_out, const Tensor& ids, Tensor& grad_table) override;
  void cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& loss, Tensor& probs) override;
  void cross_entropy_backward(const Tensor& probs, const Tensor& targets, const Tensor& grad_loss,
                              Tensor& grad_logits) override;
  void causal_softmax_forward(const Tensor& scores, Tensor& out) override;
  void causal_softmax_backward(const Tensor& out, const Tensor& grad_out, Tensor& grad_scores) override;
  void permute(const Tensor& in, const std::vector<int64_t>& perm, Tensor& out) override;
  void slice(const Tensor& in, int64_t dim, int64_t start, Tensor& out) override;
  void slice_backward_into(const Tensor& grad_part, int64_t dim, int64_t start, Tensor& grad_in) override;
  void select_rows(const Tensor& x, const std::vector<int64_t>& rows, Tensor& out) override;
  void select_rows_backward_into(const Tensor& grad_out, const std::vector<int64_t>& rows, Tensor& grad_x) override;
  void sum_all(const Tensor& in, Tensor& out_scalar) override;
  void average(const Tensor& in, Tensor& out_scalar) override;
  void sum_of_squares_into(const std::vector<TensorRange>& parts, Tensor& out, int64_t index,
                           double divisor) override;
  void adamw(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
             const AdamWCoefficients& coefficients) override;

 protected:
  void download(const Tensor& device_tensor, Tensor& host) override;
  void upload(const Tensor& host, Tensor& device_tensor) override;

 private:
  // One memory-bound call moving `bytes` (read + written) with `transcendentals` evaluations.
  void count(double bytes, double transcendentals = 0.0);
  void backward_kernel() const {
    if (before_backward_kernel_) before_backward_kernel_();
  }

  Kernels& inner_;
  KernelWork total_;
  std::function<void()> before_backward_kernel_;
};

}  // namespace zero3
