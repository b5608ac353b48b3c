// Every kernel: add its work (counted from shapes and dtypes) to the running total, then forward.
#include "traces/format/work_counting_kernels.h"

namespace zero3 {

namespace {

double bytes_of(const Tensor& tensor) { return static_cast<double>(tensor.bytes()); }

// `elements` of `tensor`'s dtype: the touched part of a larger tensor.
double bytes_of(int64_t elements, const Tensor& tensor) {
  return static_cast<double>(elements) * static_cast<double>(dtype_bytes(tensor.dtype()));
}

}  // namespace

void WorkCountingKernels::count(double bytes, double transcendentals) {
  total_.bytes += bytes;
  total_.transcendentals += transcendentals;
  total_.calls += 1;
}

void WorkCountingKernels::binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  count(bytes_of(a) + bytes_of(b) + bytes_of(out));
  inner_.binary(op, a, b, out);
}

void WorkCountingKernels::sum_to_shape(const Tensor& in, Tensor& out) {
  count(bytes_of(in) + bytes_of(out));
  inner_.sum_to_shape(in, out);
}

void WorkCountingKernels::unary(UnaryOp op, const Tensor& in, Tensor& out) {
  // GELU's tanh approximation evaluates one tanh per element, SiLU one exp; ReLU is a comparison.
  count(bytes_of(in) + bytes_of(out), op != UnaryOp::relu ? static_cast<double>(in.numel()) : 0.0);
  inner_.unary(op, in, out);
}

void WorkCountingKernels::unary_backward(UnaryOp op, const Tensor& in, const Tensor& grad_out, Tensor& grad_in) {
  backward_kernel();
  count(bytes_of(in) + bytes_of(grad_out) + bytes_of(grad_in), op != UnaryOp::relu ? static_cast<double>(in.numel()) : 0.0);
  inner_.unary_backward(op, in, grad_out, grad_in);
}

void WorkCountingKernels::scale(const Tensor& in, float factor, Tensor& out) {
  count(bytes_of(in) + bytes_of(out));
  inner_.scale(in, factor, out);
}

void WorkCountingKernels::add_into(Tensor& accumulator, const Tensor& addend) {
  count(2.0 * bytes_of(accumulator) + bytes_of(addend));  // the accumulator is read and written
  inner_.add_into(accumulator, addend);
}

void WorkCountingKernels::fill(Tensor& out, float value) {
  count(bytes_of(out));
  inner_.fill(out, value);
}

void WorkCountingKernels::copy(const Tensor& in, Tensor& out) {
  count(bytes_of(in) + bytes_of(out));
  inner_.copy(in, out);
}

void WorkCountingKernels::copy_segments(const Tensor& in, Tensor& out, const std::vector<CopySegment>& segments) {
  int64_t elements = 0;
  for (const CopySegment& segment : segments) elements += segment.count;
  count(bytes_of(elements, in) + bytes_of(elements, out));
  inner_.copy_segments(in, out, segments);
}

void WorkCountingKernels::fill_range(Tensor& out, int64_t begin, int64_t count_elements, float value) {
  count(bytes_of(count_elements, out));
  inner_.fill_range(out, begin, count_elements, value);
}

void WorkCountingKernels::fill_from_scalar(Tensor& out, const Tensor& scalar, float multiplier, float divisor) {
  count(bytes_of(scalar) + bytes_of(out));
  inner_.fill_from_scalar(out, scalar, multiplier, divisor);
}

void WorkCountingKernels::scale_by_scalar(const Tensor& in, const Tensor& scalar, float multiplier, float divisor,
                                          Tensor& out) {
  count(bytes_of(in) + bytes_of(scalar) + bytes_of(out));
  inner_.scale_by_scalar(in, scalar, multiplier, divisor, out);
}

void WorkCountingKernels::row_argmax(const Tensor& x, Tensor& out) {
  count(bytes_of(x) + bytes_of(out));
  inner_.row_argmax(x, out);
}

void WorkCountingKernels::download(const Tensor& device_tensor, Tensor& host) {
  count(2.0 * bytes_of(device_tensor));
  inner_.copy_to_host(device_tensor, host);
}

void WorkCountingKernels::upload(const Tensor& host, Tensor& device_tensor) {
  count(2.0 * bytes_of(device_tensor));
  inner_.copy_from_host(host, device_tensor);
}

void WorkCountingKernels::matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& out,
                                 int64_t batch, int64_t m, int64_t n, int64_t k, bool b_shared, float beta) {
  const double flops = 2.0 * static_cast<double>(batch) * static_cast<double>(m) * static_cast<double>(n) *
                       static_cast<double>(k);
  total_.flops += flops;
  // Both operands per batch entry: activations times activations, attention's per-head products
  // (scores = q k^T, probabilities x v and their gradients), which grow with seq_len^2. A weight
  // is shared across the batch or the batch is 1 (a linear layer's rows are flattened).
  if (batch > 1 && !b_shared) total_.flops_quadratic += flops;
  total_.calls += 1;
  inner_.matmul(a, trans_a, b, trans_b, out, batch, m, n, k, b_shared, beta);
}

void WorkCountingKernels::layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps,
                                             Tensor& out, Tensor& mean, Tensor& rstd) {
  count(bytes_of(x) + bytes_of(gamma) + bytes_of(beta) + bytes_of(out) + bytes_of(mean) + bytes_of(rstd));
  inner_.layer_norm_forward(x, gamma, beta, eps, out, mean, rstd);
}

void WorkCountingKernels::layer_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean,
                                              const Tensor& rstd, const Tensor& grad_out, Tensor& grad_x,
                                              Tensor& grad_gamma, Tensor& grad_beta) {
  backward_kernel();
  count(bytes_of(x) + bytes_of(gamma) + bytes_of(mean) + bytes_of(rstd) + bytes_of(grad_out) + bytes_of(grad_x) +
        bytes_of(grad_gamma) + bytes_of(grad_beta));
  inner_.layer_norm_backward(x, gamma, mean, rstd, grad_out, grad_x, grad_gamma, grad_beta);
}

void WorkCountingKernels::rms_norm_forward(const Tensor& x, const Tensor& gamma, float eps, Tensor& out,
                                           Tensor& rstd) {
  count(bytes_of(x) + bytes_of(gamma) + bytes_of(out) + bytes_of(rstd));
  inner_.rms_norm_forward(x, gamma, eps, out, rstd);
}

void WorkCountingKernels::rms_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& rstd,
                                            const Tensor& grad_out, Tensor& grad_x, Tensor& grad_gamma) {
  backward_kernel();
  count(bytes_of(x) + bytes_of(gamma) + bytes_of(rstd) + bytes_of(grad_out) + bytes_of(grad_x) + bytes_of(grad_gamma));
  inner_.rms_norm_backward(x, gamma, rstd, grad_out, grad_x, grad_gamma);
}

void WorkCountingKernels::embedding_forward(const Tensor& table, const Tensor& ids, Tensor& out) {
  // One table row read per id, however large the table.
  count(bytes_of(ids) + bytes_of(out.numel(), table) + bytes_of(out));
  inner_.embedding_forward(table, ids, out);
}

void WorkCountingKernels::embedding_backward_into(const Tensor& grad_out, const Tensor& ids, Tensor& grad_table) {
  backward_kernel();
  count(bytes_of(grad_out) + bytes_of(ids) + 2.0 * bytes_of(grad_out.numel(), grad_table));
  inner_.embedding_backward_into(grad_out, ids, grad_table);
}

void WorkCountingKernels::cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& loss,
                                                Tensor& probs) {
  // An exp per logit, a log per row.
  const double rows = logits.rank() >= 1 ? static_cast<double>(logits.dim(0)) : 0.0;
  count(bytes_of(logits) + bytes_of(targets) + bytes_of(loss) + bytes_of(probs), static_cast<double>(logits.numel()) + rows);
  inner_.cross_entropy_forward(logits, targets, loss, probs);
}

void WorkCountingKernels::cross_entropy_backward(const Tensor& probs, const Tensor& targets, const Tensor& grad_loss,
                                                 Tensor& grad_logits) {
  backward_kernel();
  count(bytes_of(probs) + bytes_of(targets) + bytes_of(grad_loss) + bytes_of(grad_logits));
  inner_.cross_entropy_backward(probs, targets, grad_loss, grad_logits);
}

void WorkCountingKernels::causal_softmax_forward(const Tensor& scores, Tensor& out) {
  // Query i of each [T, T] matrix sees keys 0..i: T (T + 1) / 2 exps per matrix.
  const int64_t steps = scores.rank() >= 2 ? scores.dim(-1) : 0;
  const double matrices = steps == 0 ? 0.0 : static_cast<double>(scores.numel() / steps / steps);
  const double exps = matrices * static_cast<double>(steps) * static_cast<double>(steps + 1) / 2.0;
  const double bytes = bytes_of(scores) + bytes_of(out);
  count(bytes, exps);
  total_.bytes_quadratic += bytes;
  total_.transcendentals_quadratic += exps;
  inner_.causal_softmax_forward(scores, out);
}

void WorkCountingKernels::causal_softmax_backward(const Tensor& out, const Tensor& grad_out, Tensor& grad_scores) {
  backward_kernel();
  const double bytes = bytes_of(out) + bytes_of(grad_out) + bytes_of(grad_scores);
  count(bytes);
  total_.bytes_quadratic += bytes;
  inner_.causal_softmax_backward(out, grad_out, grad_scores);
}

void WorkCountingKernels::permute(const Tensor& in, const std::vector<int64_t>& perm, Tensor& out) {
  count(bytes_of(in) + bytes_of(out));
  inner_.permute(in, perm, out);
}

void WorkCountingKernels::slice(const Tensor& in, int64_t dim, int64_t start, Tensor& out) {
  count(bytes_of(out.numel(), in) + bytes_of(out));
  inner_.slice(in, dim, start, out);
}

void WorkCountingKernels::slice_backward_into(const Tensor& grad_part, int64_t dim, int64_t start, Tensor& grad_in) {
  backward_kernel();
  count(bytes_of(grad_part) + 2.0 * bytes_of(grad_part.numel(), grad_in));
  inner_.slice_backward_into(grad_part, dim, start, grad_in);
}

void WorkCountingKernels::select_rows(const Tensor& x, const std::vector<int64_t>& rows, Tensor& out) {
  count(bytes_of(out.numel(), x) + bytes_of(out));
  inner_.select_rows(x, rows, out);
}

void WorkCountingKernels::select_rows_backward_into(const Tensor& grad_out, const std::vector<int64_t>& rows,
                                                    Tensor& grad_x) {
  backward_kernel();
  count(bytes_of(grad_out) + 2.0 * bytes_of(grad_out.numel(), grad_x));
  inner_.select_rows_backward_into(grad_out, rows, grad_x);
}

void WorkCountingKernels::sum_all(const Tensor& in, Tensor& out_scalar) {
  count(bytes_of(in) + bytes_of(out_scalar));
  inner_.sum_all(in, out_scalar);
}

void WorkCountingKernels::average(const Tensor& in, Tensor& out_scalar) {
  count(bytes_of(in) + bytes_of(out_scalar));
  inner_.average(in, out_scalar);
}

void WorkCountingKernels::sum_of_squares_into(const std::vector<TensorRange>& parts, Tensor& out, int64_t index,
                                              double divisor) {
  double bytes = bytes_of(1, out);
  for (const TensorRange& part : parts) bytes += bytes_of(part.end - part.begin, *part.tensor);
  count(bytes);
  inner_.sum_of_squares_into(parts, out, index, divisor);
}

void WorkCountingKernels::adamw(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                                const AdamWCoefficients& coefficients) {
  // The parameter and both moments are read and written, the gradient read.
  count(2.0 * (bytes_of(param) + bytes_of(exp_avg) + bytes_of(exp_avg_sq)) + bytes_of(grad));
  inner_.adamw(param, grad, exp_avg, exp_avg_sq, coefficients);
}

}  // namespace zero3
