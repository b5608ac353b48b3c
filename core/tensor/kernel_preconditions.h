// The preconditions every Kernels implementation shares, so a backend cannot drift from the reference's contract.
#pragma once
// Plain declarations only: nvcc compiles the CUDA kernels that include this header.
#include <cstdint>
#include <vector>

#include "core/tensor/kernels.h"

namespace zero3 {

// Elementwise, sums and AdamW.
void check_binary_sizes(const Tensor& a, const Tensor& b, const Tensor& out);
void check_sum_to_shape_sizes(const Tensor& in, const Tensor& out);
// unary, scale and copy: one element out per element in; `kernel` starts the message.
void check_same_numel(const char* kernel, const Tensor& in, const Tensor& out);
void check_unary_backward_sizes(const Tensor& in, const Tensor& grad_out, const Tensor& grad_in);
void check_add_into_sizes(const Tensor& accumulator, const Tensor& addend);
void check_fill_range_sizes(const Tensor& out, int64_t begin, int64_t count);
void check_copy_segments_sizes(const Tensor& in, const Tensor& out, const std::vector<CopySegment>& segments);
// fill_from_scalar and scale_by_scalar: the factor is a one-element device tensor.
void check_scalar_operand(const char* kernel, const Tensor& scalar);
void check_row_argmax_sizes(const Tensor& x, const Tensor& out);
void check_average_sizes(const Tensor& in);
void check_sum_of_squares_sizes(const std::vector<TensorRange>& parts, const Tensor& out, int64_t index);
void check_adamw_sizes(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq);

// Indexing.
void check_permute_sizes(const Tensor& in, const std::vector<int64_t>& perm, const Tensor& out);
void check_select_rows_sizes(const Tensor& x, const std::vector<int64_t>& rows, const Tensor& out);
void check_select_rows_backward_sizes(const Tensor& grad_out, const std::vector<int64_t>& rows, const Tensor& grad_x);
void check_embedding_forward_sizes(const Tensor& table, const Tensor& ids, const Tensor& out);
void check_embedding_backward_sizes(const Tensor& grad_out, const Tensor& ids, const Tensor& grad_table);

// GEMM.
void check_matmul_sizes(const Tensor& a, const Tensor& b, const Tensor& out, int64_t batch, int64_t m, int64_t n,
                        int64_t k, bool b_shared);

// Row normalisation.
void check_layer_norm_forward_sizes(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& out,
                                    const Tensor& mean, const Tensor& rstd);
void check_layer_norm_backward_sizes(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& grad_out,
                                     const Tensor& grad_x, const Tensor& grad_gamma, const Tensor& grad_beta);
void check_rms_norm_forward_sizes(const Tensor& x, const Tensor& gamma, const Tensor& out, const Tensor& rstd);
void check_rms_norm_backward_sizes(const Tensor& x, const Tensor& gamma, const Tensor& rstd, const Tensor& grad_out,
                                   const Tensor& grad_x, const Tensor& grad_gamma);
void check_causal_softmax_forward_sizes(const Tensor& scores, const Tensor& out);
void check_causal_softmax_backward_sizes(const Tensor& out, const Tensor& grad_out, const Tensor& grad_scores);
void check_cross_entropy_forward_sizes(const Tensor& logits, const Tensor& targets, const Tensor& loss,
                                       const Tensor& probs);
void check_cross_entropy_backward_sizes(const Tensor& probs, const Tensor& targets, const Tensor& grad_loss,
                                        const Tensor& grad_logits);

}  // namespace zero3
