// The Kernels seam: the data-level op set of one device, and the only way bytes of a device
// tensor move. Ops (ops.h) check shapes, allocate outputs on device() and record autograd;
// kernels only compute, on tensors already shaped correctly and resident on device(). The CPU
// kernels (cpu_kernels.cc) are the reference and the oracle for the CUDA kernels. A kernel never
// sees a meta tensor: ops infer shapes and skip the kernel call for meta inputs.
//
// Conventions: all tensors are contiguous; `out` is preallocated by the caller; gradients are
// written (not accumulated) unless the name says `into`; a kernel writing a bf16 output rounds
// each element once, to nearest even. Device-to-host copies are host syncs (on a GPU the host
// waits for the stream) and are counted: host_syncs() is what the train report prints per step.
//
//   Kernels& kernels = cpu_kernels();
//   Tensor out = Tensor::zeros({2, 3});
//   kernels.binary(BinaryOp::add, a, b, out);   // a [2, 3] + b [3], broadcast as PyTorch does
//   kernels.matmul(x, false, w, true, y, 1, rows, out_features, in_features, false, 0.0f);  // y = x w^T
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor/tensor.h"

namespace zero3 {

enum class BinaryOp : uint8_t { add, sub, mul };
enum class UnaryOp : uint8_t { gelu, relu, silu };

// The scalars of one AdamW update, computed once per step by the optimizer (training/optimizer.h)
// from its hyperparameters and the step number; the kernel applies them element by element.
// One run of elements copied by copy_segments.
struct CopySegment {
  int64_t from = 0;   // offset in the source
  int64_t to = 0;     // offset in the destination
  int64_t count = 0;
};

// Elements [begin, end) of one tensor, a part of a sum of squares.
struct TensorRange {
  const Tensor* tensor = nullptr;
  int64_t begin = 0;
  int64_t end = 0;
};

struct AdamWCoefficients {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float decay = 1.0f;                  // 1 - lr * weight_decay (decoupled weight decay)
  float step_size = 1e-3f;             // lr / (1 - beta1^step)
  float bias_correction2_sqrt = 1.0f;  // sqrt(1 - beta2^step)
};

class Kernels {
 public:
  virtual ~Kernels() = default;
  virtual const char* name() const = 0;
  // Where these kernels compute: ops allocate their outputs and gradients here.
  virtual Device device() const = 0;

  // Host <-> device. `host` is a cpu tensor of the same dtype and numel as the device tensor.
  // copy_to_host is a host sync and counted; copy_from_host is an upload (asynchronous on a GPU).
  void copy_to_host(const Tensor& device_tensor, Tensor& host);
  void copy_from_host(const Tensor& host, Tensor& device_tensor);
  Tensor to_host(const Tensor& device_tensor);  // a new cpu tensor (a host sync)
  Tensor copy_to_device(const Tensor& host);    // a new tensor on device(), always a copy (an upload)
  Tensor to_device(const Tensor& host);         // copy_to_device, or `host` itself if already there or meta
  int64_t host_syncs() const { return host_syncs_; }
  int64_t uploads() const { return uploads_; }

  // out = a OP b, PyTorch broadcasting; out has broadcast_shapes(a, b).
  virtual void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) = 0;
  // out = in summed over the dims that broadcasting expanded from out.shape() to in.shape().
  virtual void sum_to_shape(const Tensor& in, Tensor& out) = 0;
  virtual void unary(UnaryOp op, const Tensor& in, Tensor& out) = 0;
  // grad_in = d op(in) / d in * grad_out.
  virtual void unary_backward(UnaryOp op, const Tensor& in, const Tensor& grad_out, Tensor& grad_in) = 0;
  virtual void scale(const Tensor& in, float factor, Tensor& out) = 0;
  // accumulator += addend (same shape).
  virtual void add_into(Tensor& accumulator, const Tensor& addend) = 0;
  virtual void fill(Tensor& out, float value) = 0;
  virtual void copy(const Tensor& in, Tensor& out) = 0;  // same numel; rounds to out's dtype (a cast)
  // out[s.to + i] = in[s.from + i] for each segment (rounding to out's dtype): bucket packing,
  // unpacking and shard slicing. Segments of one call never overlap in out.
  virtual void copy_segments(const Tensor& in, Tensor& out, const std::vector<CopySegment>& segments) = 0;
  virtual void fill_range(Tensor& out, int64_t begin, int64_t count, float value) = 0;
  // Scalars that stay on the device (the loss and its backward seeds): with s = scalar's one
  // element and f = s * multiplier / divisor in float, fill writes f everywhere and scale in * f.
  virtual void fill_from_scalar(Tensor& out, const Tensor& scalar, float multiplier, float divisor) = 0;
  virtual void scale_by_scalar(const Tensor& in, const Tensor& scalar, float multiplier, float divisor,
                               Tensor& out) = 0;

  // Batched GEMM: out[b] = beta * out[b] + op(a[b]) @ op(b[b]) with op = transpose when asked.
  // a is [batch, m, k] (or [batch, k, m] if trans_a); b is [batch_b, k, n] (or [batch_b, n, k]),
  // with batch_b either batch or 1 (shared across the batch). Leading shapes are flattened.
  virtual void matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& out,
                      int64_t batch, int64_t m, int64_t n, int64_t k, bool b_shared, float beta) = 0;

  // x [rows, C]; gamma, beta [C]; saves mean and rstd [rows] for backward.
  virtual void layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps,
                                  Tensor& out, Tensor& mean, Tensor& rstd) = 0;
  virtual void layer_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                                   const Tensor& grad_out, Tensor& grad_x, Tensor& grad_gamma,
                                   Tensor& grad_beta) = 0;

  // x [rows, C]; gamma [C]; out = x * rstd * gamma with rstd = 1 / sqrt(mean(x^2) + eps) per row,
  // saved [rows] for backward (RMSNorm: LayerNorm without the mean and the bias).
  virtual void rms_norm_forward(const Tensor& x, const Tensor& gamma, float eps, Tensor& out, Tensor& rstd) = 0;
  virtual void rms_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& rstd, const Tensor& grad_out,
                                 Tensor& grad_x, Tensor& grad_gamma) = 0;

  // table [V, C], ids [N] (integer values) -> out [N, C]; backward scatter-adds into grad_table.
  virtual void embedding_forward(const Tensor& table, const Tensor& ids, Tensor& out) = 0;
  virtual void embedding_backward_into(const Tensor& grad_out, const Tensor& ids, Tensor& grad_table) = 0;

  // Mean cross-entropy of logits [N, V] against targets [N]; saves softmax probabilities.
  virtual void cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& loss, Tensor& probs) = 0;
  virtual void cross_entropy_backward(const Tensor& probs, const Tensor& targets, const Tensor& grad_loss,
                                      Tensor& grad_logits) = 0;

  // scores [batch, T, T]: softmax over the last dim with j > i masked to probability 0.
  virtual void causal_softmax_forward(const Tensor& scores, Tensor& out) = 0;
  virtual void causal_softmax_backward(const Tensor& out, const Tensor& grad_out, Tensor& grad_scores) = 0;

  // out = in with dims permuted (out.shape[i] = in.shape[perm[i]]).
  virtual void permute(const Tensor& in, const std::vector<int64_t>& perm, Tensor& out) = 0;
  // View in as [outer, dim_in, inner]; copy rows [start, start + dim_out) into out [outer, dim_out, inner].
  virtual void slice(const Tensor& in, int64_t dim, int64_t start, Tensor& out) = 0;
  // The reverse: add grad_part [outer, dim_part, inner] into grad_in at [start, start + dim_part).
  virtual void slice_backward_into(const Tensor& grad_part, int64_t dim, int64_t start, Tensor& grad_in) = 0;
  // Rows of x [N, C] at `rows` -> out [R, C]; and the reverse, adding rows into grad_x.
  virtual void select_rows(const Tensor& x, const std::vector<int64_t>& rows, Tensor& out) = 0;
  virtual void select_rows_backward_into(const Tensor& grad_out, const std::vector<int64_t>& rows,
                                         Tensor& grad_x) = 0;

  // out [rows] = the index of each row's largest element of x [rows, cols], ties to the lowest
  // (MoE routing; the caller copies it to the host: the one inherent sync per MoE layer).
  virtual void row_argmax(const Tensor& x, Tensor& out) = 0;

  virtual void sum_all(const Tensor& in, Tensor& out_scalar) = 0;     // summed in double
  virtual void average(const Tensor& in, Tensor& out_scalar) = 0;     // double sum / numel, then rounded
  // out (f32) element `index` = float(sum over parts, in order, of each part's sum of squares in
  // double, divided by `divisor`): the canonical partial of the gradient norm
  // (training/optimizer.h), and with the element count as divisor the mse loss.
  virtual void sum_of_squares_into(const std::vector<TensorRange>& parts, Tensor& out, int64_t index,
                                   double divisor = 1.0) = 0;

  // One AdamW step on f32 tensors of equal numel (decoupled weight decay, bias correction).
  virtual void adamw(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                     const AdamWCoefficients& coefficients) = 0;

 protected:
  // The byte moves behind copy_to_host / copy_from_host (shapes already checked).
  virtual void download(const Tensor& device_tensor, Tensor& host) = 0;
  virtual void upload(const Tensor& host, Tensor& device_tensor) = 0;

 private:
  int64_t host_syncs_ = 0;
  int64_t uploads_ = 0;
};

// A new tensor on the kernels' device: what ops, backward closures and engines allocate with.
inline Tensor device_zeros(Kernels& kernels, const Shape& shape, DType dtype = DType::f32) {
  return Tensor::zeros(shape, dtype, kernels.device());
}
// The same without the zeroing, for an output the next kernel call writes whole (kernels.h's
// convention: outputs are written, not accumulated, unless the kernel's name says `into`).
inline Tensor device_uninitialized(Kernels& kernels, const Shape& shape, DType dtype = DType::f32) {
  return Tensor::uninitialized(shape, dtype, kernels.device());
}
// `value` everywhere, on the kernels' device (constants ops need: ones for bias rows, loss seeds).
Tensor device_full(Kernels& kernels, const Shape& shape, float value, DType dtype = DType::f32);
// `in` converted to `dtype` on the kernels' device (a copy even when the dtype is the same).
Tensor cast(Kernels& kernels, const Tensor& in, DType dtype);

// The CPU reference kernels (GEMM through BLAS). One shared instance; it holds no state but its
// host-sync counts.
Kernels& cpu_kernels();
// The same reference kernels computing over another device whose memory this process can
// address (the simulator's opaque device): operands must live on `device`.
std::unique_ptr<Kernels> make_reference_kernels(Device device, const char* name);

}  // namespace zero3
