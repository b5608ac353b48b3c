// The CpuKernels class and the helpers its files (cpu_kernels*.cc) share; private to those files.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor/kernels.h"

namespace zero3 {

// Every kernel ends with this on its outputs, so CPU bf16 is an exact emulation of bf16 storage.
void round_if_bf16(Tensor& tensor);

// Ops validate ids and targets with a ShapeError; here a bad one is a programmer error.
int64_t checked_row(float value, int64_t rows);

// Walks `shape` in row-major order one innermost row at a time. `row` receives the contiguous
// offset of the row in `shape`, the offsets into two strided operands, the row length and the
// operands' innermost strides.
template <class Row>
void for_each_row(const Shape& shape, const std::vector<int64_t>& strides_a, const std::vector<int64_t>& strides_b,
                  Row row) {
  if (shape_numel(shape) == 0) return;
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (rank == 0) {
    row(0, 0, 0, 1, 0, 0);
    return;
  }
  const int64_t inner = shape[rank - 1];
  std::vector<int64_t> index(rank - 1, 0);
  int64_t offset = 0, offset_a = 0, offset_b = 0;
  while (true) {
    row(offset, offset_a, offset_b, inner, strides_a[rank - 1], strides_b[rank - 1]);
    offset += inner;
    int64_t d = rank - 2;
    for (; d >= 0; --d) {
      ++index[d];
      offset_a += strides_a[d];
      offset_b += strides_b[d];
      if (index[d] < shape[d]) break;
      offset_a -= strides_a[d] * shape[d];
      offset_b -= strides_b[d] * shape[d];
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

class CpuKernels final : public Kernels {
 public:
  const char* name() const override { return "cpu"; }

  // cpu_kernels_elementwise.cc
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) override;
  void sum_to_shape(const Tensor& in, Tensor& out) override;
  void unary(UnaryOp op, const Tensor& in, Tensor& out) override;
  void unary_backward(UnaryOp op, const Tensor& in, const Tensor& grad_out, Tensor& grad_in) override;
  void scale(const Tensor& in, float factor, Tensor& out) override;
  void add_into(Tensor& accumulator, const Tensor& addend) override;
  void fill(Tensor& out, float value) override;
  void copy(const Tensor& in, Tensor& out) override;
  void round_to_dtype(Tensor& tensor) override;
  void sum_all(const Tensor& in, Tensor& out_scalar) override;
  double sum_of_squares(const Tensor& in) override;
  void adamw(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamWCoefficients& coefficients) override;

  // cpu_kernels_matmul.cc
  void matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& out, int64_t batch, int64_t m,
              int64_t n, int64_t k, bool b_shared, float beta) override;

  // cpu_kernels_normalization.cc
  void layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& out,
                          Tensor& mean, Tensor& rstd) override;
  void layer_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                           const Tensor& grad_out, Tensor& grad_x, Tensor& grad_gamma, Tensor& grad_beta) override;
  void causal_softmax_forward(const Tensor& scores, Tensor& out) override;
  void causal_softmax_backward(const Tensor& out, const Tensor& grad_out, Tensor& grad_scores) override;
  void cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& loss, Tensor& probs) override;
  void cross_entropy_backward(const Tensor& probs, const Tensor& targets, float grad_loss,
                              Tensor& grad_logits) override;

  // cpu_kernels_indexing.cc
  void permute(const Tensor& in, const std::vector<int64_t>& perm, Tensor& out) override;
  void slice(const Tensor& in, int64_t dim, int64_t start, Tensor& out) override;
  void slice_backward_into(const Tensor& grad_part, int64_t dim, int64_t start, Tensor& grad_in) override;
  void select_rows(const Tensor& x, const std::vector<int64_t>& rows, Tensor& out) override;
  void select_rows_backward_into(const Tensor& grad_out, const std::vector<int64_t>& rows, Tensor& grad_x) override;
  void embedding_forward(const Tensor& table, const Tensor& ids, Tensor& out) override;
  void embedding_backward_into(const Tensor& grad_out, const Tensor& ids, Tensor& grad_table) override;
};

}  // namespace zero3
