// Every kernel: check its operands against the rank's in-flight collectives, then forward.
#include "sim/hazard_checking_kernels.h"

#include "core/base/errors.h"

namespace zero3 {

namespace {

[[noreturn]] void throw_hazard(int rank, const char* kernel, const char* access, const Tensor& tensor,
                               const InFlightUse& use) {
  const std::string advice = use.written ? "; wait() on the collective's Work before reading it"
                                         : "; wait() on the collective's Work before overwriting it";
  throw CorrectnessError("rank " + std::to_string(rank) + ": kernel " + kernel + " " + access + " " +
                         describe(tensor) + ", which is " + describe(use) + " still in flight" + advice);
}

}  // namespace

void HazardCheckingKernels::check(const char* kernel, std::initializer_list<const Tensor*> reads,
                                  std::initializer_list<const Tensor*> writes) const {
  if (in_flight_.empty()) return;
  for (const Tensor* tensor : reads) {
    if (const InFlightUse* use = in_flight_.writer_of(tensor->storage_id())) {
      throw_hazard(rank_, kernel, "reads", *tensor, *use);
    }
  }
  for (const Tensor* tensor : writes) {
    if (const InFlightUse* use = in_flight_.user_of(tensor->storage_id())) {
      throw_hazard(rank_, kernel, "writes", *tensor, *use);
    }
  }
}

void HazardCheckingKernels::binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  check("binary", {&a, &b}, {&out});
  inner_.binary(op, a, b, out);
}

void HazardCheckingKernels::sum_to_shape(const Tensor& in, Tensor& out) {
  check("sum_to_shape", {&in}, {&out});
  inner_.sum_to_shape(in, out);
}

void HazardCheckingKernels::unary(UnaryOp op, const Tensor& in, Tensor& out) {
  check("unary", {&in}, {&out});
  inner_.unary(op, in, out);
}

void HazardCheckingKernels::unary_backward(UnaryOp op, const Tensor& in, const Tensor& grad_out, Tensor& grad_in) {
  check("unary_backward", {&in, &grad_out}, {&grad_in});
  inner_.unary_backward(op, in, grad_out, grad_in);
}

void HazardCheckingKernels::scale(const Tensor& in, float factor, Tensor& out) {
  check("scale", {&in}, {&out});
  inner_.scale(in, factor, out);
}

void HazardCheckingKernels::add_into(Tensor& accumulator, const Tensor& addend) {
  check("add_into", {&accumulator, &addend}, {&accumulator});
  inner_.add_into(accumulator, addend);
}

void HazardCheckingKernels::fill(Tensor& out, float value) {
  check("fill", {}, {&out});
  inner_.fill(out, value);
}

void HazardCheckingKernels::copy(const Tensor& in, Tensor& out) {
  check("copy", {&in}, {&out});
  inner_.copy(in, out);
}

void HazardCheckingKernels::copy_segments(const Tensor& in, Tensor& out, const std::vector<CopySegment>& segments) {
  check("copy_segments", {&in}, {&out});
  inner_.copy_segments(in, out, segments);
}

void HazardCheckingKernels::fill_range(Tensor& out, int64_t begin, int64_t count, float value) {
  check("fill_range", {}, {&out});
  inner_.fill_range(out, begin, count, value);
}

void HazardCheckingKernels::fill_from_scalar(Tensor& out, const Tensor& scalar, float multiplier, float divisor) {
  check("fill_from_scalar", {&scalar}, {&out});
  inner_.fill_from_scalar(out, scalar, multiplier, divisor);
}

void HazardCheckingKernels::scale_by_scalar(const Tensor& in, const Tensor& scalar, float multiplier, float divisor,
                                            Tensor& out) {
  check("scale_by_scalar", {&in, &scalar}, {&out});
  inner_.scale_by_scalar(in, scalar, multiplier, divisor, out);
}

void HazardCheckingKernels::row_argmax(const Tensor& x, Tensor& out) {
  check("row_argmax", {&x}, {&out});
  inner_.row_argmax(x, out);
}

void HazardCheckingKernels::download(const Tensor& device_tensor, Tensor& host) {
  check("copy_to_host", {&device_tensor}, {});
  inner_.copy_to_host(device_tensor, host);
}

void HazardCheckingKernels::upload(const Tensor& host, Tensor& device_tensor) {
  check("copy_from_host", {}, {&device_tensor});
  inner_.copy_from_host(host, device_tensor);
}

void HazardCheckingKernels::matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& out,
                                   int64_t batch, int64_t m, int64_t n, int64_t k, bool b_shared, float beta) {
  // With beta != 0 the GEMM also reads out; the write check below covers that storage either way.
  check("matmul", {&a, &b}, {&out});
  inner_.matmul(a, trans_a, b, trans_b, out, batch, m, n, k, b_shared, beta);
}

void HazardCheckingKernels::layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps,
                                               Tensor& out, Tensor& mean, Tensor& rstd) {
  check("layer_norm_forward", {&x, &gamma, &beta}, {&out, &mean, &rstd});
  inner_.layer_norm_forward(x, gamma, beta, eps, out, mean, rstd);
}

void HazardCheckingKernels::layer_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean,
                                                const Tensor& rstd, const Tensor& grad_out, Tensor& grad_x,
                                                Tensor& grad_gamma, Tensor& grad_beta) {
  check("layer_norm_backward", {&x, &gamma, &mean, &rstd, &grad_out}, {&grad_x, &grad_gamma, &grad_beta});
  inner_.layer_norm_backward(x, gamma, mean, rstd, grad_out, grad_x, grad_gamma, grad_beta);
}

void HazardCheckingKernels::rms_norm_forward(const Tensor& x, const Tensor& gamma, float eps, Tensor& out,
                                             Tensor& rstd) {
  check("rms_norm_forward", {&x, &gamma}, {&out, &rstd});
  inner_.rms_norm_forward(x, gamma, eps, out, rstd);
}

void HazardCheckingKernels::rms_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& rstd,
                                              const Tensor& grad_out, Tensor& grad_x, Tensor& grad_gamma) {
  check("rms_norm_backward", {&x, &gamma, &rstd, &grad_out}, {&grad_x, &grad_gamma});
  inner_.rms_norm_backward(x, gamma, rstd, grad_out, grad_x, grad_gamma);
}

void HazardCheckingKernels::embedding_forward(const Tensor& table, const Tensor& ids, Tensor& out) {
  check("embedding_forward", {&table, &ids}, {&out});
  inner_.embedding_forward(table, ids, out);
}

void HazardCheckingKernels::embedding_backward_into(const Tensor& grad_out, const Tensor& ids, Tensor& grad_table) {
  check("embedding_backward_into", {&grad_out, &ids, &grad_table}, {&grad_table});
  inner_.embedding_backward_into(grad_out, ids, grad_table);
}

void HazardCheckingKernels::cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& loss,
                                                  Tensor& probs) {
  check("cross_entropy_forward", {&logits, &targets}, {&loss, &probs});
  inner_.cross_entropy_forward(logits, targets, loss, probs);
}

void HazardCheckingKernels::cross_entropy_backward(const Tensor& probs, const Tensor& targets, const Tensor& grad_loss,
                                                   Tensor& grad_logits) {
  check("cross_entropy_backward", {&probs, &targets, &grad_loss}, {&grad_logits});
  inner_.cross_entropy_backward(probs, targets, grad_loss, grad_logits);
}

void HazardCheckingKernels::causal_softmax_forward(const Tensor& scores, Tensor& out) {
  check("causal_softmax_forward", {&scores}, {&out});
  inner_.causal_softmax_forward(scores, out);
}

void HazardCheckingKernels::causal_softmax_backward(const Tensor& out, const Tensor& grad_out, Tensor& grad_scores) {
  check("causal_softmax_backward", {&out, &grad_out}, {&grad_scores});
  inner_.causal_softmax_backward(out, grad_out, grad_scores);
}

void HazardCheckingKernels::permute(const Tensor& in, const std::vector<int64_t>& perm, Tensor& out) {
  check("permute", {&in}, {&out});
  inner_.permute(in, perm, out);
}

void HazardCheckingKernels::slice(const Tensor& in, int64_t dim, int64_t start, Tensor& out) {
  check("slice", {&in}, {&out});
  inner_.slice(in, dim, start, out);
}

void HazardCheckingKernels::slice_backward_into(const Tensor& grad_part, int64_t dim, int64_t start,
                                                Tensor& grad_in) {
  check("slice_backward_into", {&grad_part, &grad_in}, {&grad_in});
  inner_.slice_backward_into(grad_part, dim, start, grad_in);
}

void HazardCheckingKernels::select_rows(const Tensor& x, const std::vector<int64_t>& rows, Tensor& out) {
  check("select_rows", {&x}, {&out});
  inner_.select_rows(x, rows, out);
}

void HazardCheckingKernels::select_rows_backward_into(const Tensor& grad_out, const std::vector<int64_t>& rows,
                                                      Tensor& grad_x) {
  check("select_rows_backward_into", {&grad_out, &grad_x}, {&grad_x});
  inner_.select_rows_backward_into(grad_out, rows, grad_x);
}

void HazardCheckingKernels::sum_all(const Tensor& in, Tensor& out_scalar) {
  check("sum_all", {&in}, {&out_scalar});
  inner_.sum_all(in, out_scalar);
}

void HazardCheckingKernels::average(const Tensor& in, Tensor& out_scalar) {
  check("average", {&in}, {&out_scalar});
  inner_.average(in, out_scalar);
}

void HazardCheckingKernels::sum_of_squares_into(const std::vector<TensorRange>& parts, Tensor& out, int64_t index,
                                                double divisor) {
  for (const TensorRange& part : parts) check("sum_of_squares_into", {part.tensor}, {});
  check("sum_of_squares_into", {}, {&out});
  inner_.sum_of_squares_into(parts, out, index, divisor);
}

void HazardCheckingKernels::adamw(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                                  const AdamWCoefficients& coefficients) {
  check("adamw", {&param, &grad, &exp_avg, &exp_avg_sq}, {&param, &exp_avg, &exp_avg_sq});
  inner_.adamw(param, grad, exp_avg, exp_avg_sq, coefficients);
}

}  // namespace zero3
