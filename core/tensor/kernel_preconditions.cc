// The shared kernel preconditions; each check and message is the reference kernels' own.
#include "core/tensor/kernel_preconditions.h"

#include <string>

#include "core/base/errors.h"

namespace zero3 {
namespace {

void check_rows_in(const std::vector<int64_t>& rows, int64_t row_count) {
  for (int64_t row : rows) ZERO3_CHECK(row >= 0 && row < row_count, "select_rows row " + std::to_string(row));
}

}  // namespace

void check_binary_sizes(const Tensor& a, const Tensor& b, const Tensor& out) {
  ZERO3_CHECK(out.shape() == broadcast_shapes(a.shape(), b.shape()), "binary out " + describe(out));
}

void check_sum_to_shape_sizes(const Tensor& in, const Tensor& out) {
  ZERO3_CHECK(broadcast_shapes(out.shape(), in.shape()) == in.shape(),
              "sum_to_shape " + describe(in) + " -> " + describe(out));
}

void check_same_numel(const char* kernel, const Tensor& in, const Tensor& out) {
  ZERO3_CHECK(in.numel() == out.numel(), std::string(kernel) + " " + describe(in) + " -> " + describe(out));
}

void check_unary_backward_sizes(const Tensor& in, const Tensor& grad_out, const Tensor& grad_in) {
  ZERO3_CHECK(in.numel() == grad_out.numel() && in.numel() == grad_in.numel(), "unary_backward sizes");
}

void check_add_into_sizes(const Tensor& accumulator, const Tensor& addend) {
  ZERO3_CHECK(accumulator.shape() == addend.shape(), "add_into " + describe(accumulator) + " += " + describe(addend));
}

void check_fill_range_sizes(const Tensor& out, int64_t begin, int64_t count) {
  ZERO3_CHECK(begin >= 0 && count >= 0 && begin + count <= out.numel(),
              "fill_range [" + std::to_string(begin) + ", +" + std::to_string(count) + ") of " + describe(out));
}

void check_copy_segments_sizes(const Tensor& in, const Tensor& out, const std::vector<CopySegment>& segments) {
  for (const CopySegment& segment : segments) {
    ZERO3_CHECK(segment.count >= 0 && segment.from >= 0 && segment.to >= 0 &&
                    segment.from + segment.count <= in.numel() && segment.to + segment.count <= out.numel(),
                "copy segment " + std::to_string(segment.from) + "->" + std::to_string(segment.to) + " x" +
                    std::to_string(segment.count) + " from " + describe(in) + " to " + describe(out));
  }
}

void check_scalar_operand(const char* kernel, const Tensor& scalar) {
  ZERO3_CHECK(scalar.numel() == 1, std::string(kernel) + " by " + describe(scalar));
}

void check_row_argmax_sizes(const Tensor& x, const Tensor& out) {
  const int64_t rows = x.dim(0), cols = x.dim(1);
  ZERO3_CHECK(out.numel() == rows && cols > 0, "row_argmax of " + describe(x) + " into " + describe(out));
}

void check_average_sizes(const Tensor& in) { ZERO3_CHECK(in.numel() > 0, "average of " + describe(in)); }

void check_sum_of_squares_sizes(const std::vector<TensorRange>& parts, const Tensor& out, int64_t index) {
  ZERO3_CHECK(out.dtype() == DType::f32 && index >= 0 && index < out.numel(), "sum of squares into " + describe(out));
  for (const TensorRange& part : parts) {
    ZERO3_CHECK(part.begin >= 0 && part.begin <= part.end && part.end <= part.tensor->numel(), "sum of squares range");
  }
}

void check_adamw_sizes(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq) {
  ZERO3_CHECK(param.numel() == grad.numel() && param.numel() == exp_avg.numel() &&
                  param.numel() == exp_avg_sq.numel(),
              "adamw on " + describe(param));
}

void check_permute_sizes(const Tensor& in, const std::vector<int64_t>& perm, const Tensor& out) {
  ZERO3_CHECK(perm.size() == in.shape().size() && out.numel() == in.numel(), "permute of " + describe(in));
}

void check_select_rows_sizes(const Tensor& x, const std::vector<int64_t>& rows, const Tensor& out) {
  ZERO3_CHECK(out.numel() == static_cast<int64_t>(rows.size()) * x.dim(1), "select_rows out " + describe(out));
  check_rows_in(rows, x.dim(0));
}

void check_select_rows_backward_sizes(const Tensor& grad_out, const std::vector<int64_t>& rows, const Tensor& grad_x) {
  ZERO3_CHECK(grad_out.numel() == static_cast<int64_t>(rows.size()) * grad_x.dim(1),
              "select_rows grad " + describe(grad_out));
  check_rows_in(rows, grad_x.dim(0));
}

void check_embedding_forward_sizes(const Tensor& table, const Tensor& ids, const Tensor& out) {
  ZERO3_CHECK(out.numel() == ids.numel() * table.dim(1), "embedding out " + describe(out));
}

void check_embedding_backward_sizes(const Tensor& grad_out, const Tensor& ids, const Tensor& grad_table) {
  ZERO3_CHECK(grad_out.numel() == ids.numel() * grad_table.dim(1), "embedding grad " + describe(grad_out));
}

void check_matmul_sizes(const Tensor& a, const Tensor& b, const Tensor& out, int64_t batch, int64_t m, int64_t n,
                        int64_t k, bool b_shared) {
  ZERO3_CHECK(a.numel() == batch * m * k && out.numel() == batch * m * n &&
                  b.numel() == (b_shared ? 1 : batch) * k * n,
              "matmul sizes: a " + describe(a) + " b " + describe(b) + " out " + describe(out));
}

// Layer norm's rows are mean's elements and its columns gamma's, as the kernels read them.
void check_layer_norm_forward_sizes(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& out,
                                    const Tensor& mean, const Tensor& rstd) {
  const int64_t cols = gamma.numel();
  const int64_t rows = mean.numel();
  ZERO3_CHECK(x.numel() == rows * cols && out.numel() == x.numel() && beta.numel() == cols && rstd.numel() == rows,
              "layer_norm sizes: x " + describe(x) + " gamma " + describe(gamma));
}

void check_layer_norm_backward_sizes(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& grad_out,
                                     const Tensor& grad_x, const Tensor& grad_gamma, const Tensor& grad_beta) {
  const int64_t cols = gamma.numel();
  const int64_t rows = mean.numel();
  ZERO3_CHECK(x.numel() == rows * cols && grad_out.numel() == x.numel() && grad_x.numel() == x.numel() &&
                  grad_gamma.numel() == cols && grad_beta.numel() == cols,
              "layer_norm_backward sizes: x " + describe(x) + " gamma " + describe(gamma));
}

// RMSNorm's rows are rstd's elements and its columns gamma's.
void check_rms_norm_forward_sizes(const Tensor& x, const Tensor& gamma, const Tensor& out, const Tensor& rstd) {
  ZERO3_CHECK(x.numel() == rstd.numel() * gamma.numel() && out.numel() == x.numel(),
              "rms_norm sizes: x " + describe(x) + " gamma " + describe(gamma) + " rstd " + describe(rstd));
}

void check_rms_norm_backward_sizes(const Tensor& x, const Tensor& gamma, const Tensor& rstd, const Tensor& grad_out,
                                   const Tensor& grad_x, const Tensor& grad_gamma) {
  ZERO3_CHECK(x.numel() == rstd.numel() * gamma.numel() && grad_out.numel() == x.numel() &&
                  grad_x.numel() == x.numel() && grad_gamma.numel() == gamma.numel(),
              "rms_norm_backward sizes: x " + describe(x) + " gamma " + describe(gamma));
}

void check_causal_softmax_forward_sizes(const Tensor& scores, const Tensor& out) {
  ZERO3_CHECK(out.numel() == scores.numel(), "causal_softmax out " + describe(out));
}

void check_causal_softmax_backward_sizes(const Tensor& out, const Tensor& grad_out, const Tensor& grad_scores) {
  ZERO3_CHECK(grad_out.numel() == out.numel() && grad_scores.numel() == out.numel(), "causal_softmax_backward sizes");
}

void check_cross_entropy_forward_sizes(const Tensor& logits, const Tensor& targets, const Tensor& loss,
                                       const Tensor& probs) {
  const int64_t rows = logits.dim(0), vocab = logits.dim(1);
  ZERO3_CHECK(rows > 0 && vocab > 0 && targets.numel() == rows && probs.numel() == logits.numel() &&
                  loss.numel() == 1,
              "cross_entropy sizes: logits " + describe(logits) + " targets " + describe(targets));
}

void check_cross_entropy_backward_sizes(const Tensor& probs, const Tensor& targets, const Tensor& grad_loss,
                                        const Tensor& grad_logits) {
  const int64_t rows = probs.dim(0);
  ZERO3_CHECK(rows > 0 && grad_logits.numel() == probs.numel() && targets.numel() == rows,
              "cross_entropy_backward sizes: probs " + describe(probs));
  ZERO3_CHECK(grad_loss.numel() == 1, "cross_entropy_backward seed " + describe(grad_loss));
}

}  // namespace zero3
