// The differentiable op set the model zoo is built from. Each op checks shapes (ShapeError names
// the op and both shapes), computes through ctx.kernels(), and records its backward on ctx's tape.
// Meta tensors in, meta tensors out: with Device::meta every op only infers shapes.
//
// Elementwise ops broadcast exactly like PyTorch, including a size-1 dim against a size-0 dim:
// mul(x[B,1], p[0]) is [B,0] and sums to 0. That is the broadcast trap, reproduced on purpose.
//
//   Var h = relu(ctx, linear(ctx, x, ctx.param(layer, weight), &bias_var));
//   Var loss = mse(ctx, h, target);
#pragma once
#include <vector>

#include "core/autograd/autograd.h"
#include "core/autograd/context.h"

namespace zero3 {

// A value that takes no gradient (inputs, targets, raw parameter handles).
Var constant(const Tensor& value);

Var add(Context& ctx, const Var& a, const Var& b);
Var sub(Context& ctx, const Var& a, const Var& b);
Var mul(Context& ctx, const Var& a, const Var& b);
Var scale(Context& ctx, const Var& x, float factor);

Var gelu(Context& ctx, const Var& x);  // tanh approximation, as GPT-2
Var relu(Context& ctx, const Var& x);
Var silu(Context& ctx, const Var& x);  // x sigmoid(x), as torch.nn.functional.silu

// a [..., m, k] @ b [k, n] -> [..., m, n]; or batched a [B, m, k] @ b [B, k, n] -> [B, m, n].
Var matmul(Context& ctx, const Var& a, const Var& b);
// x [..., in] @ weight[out, in]^T + bias[out] (PyTorch's layout); bias may be undefined.
Var linear(Context& ctx, const Var& x, const Var& weight, const Var& bias);

// Normalises over the last dim; gamma and beta have shape [last dim].
Var layer_norm(Context& ctx, const Var& x, const Var& gamma, const Var& beta, float eps = 1e-5f);
// x * gamma / sqrt(mean(x^2 over the last dim) + eps), as torch.nn.functional.rms_norm.
Var rms_norm(Context& ctx, const Var& x, const Var& gamma, float eps = 1e-5f);
// table [V, C], ids any shape holding integer values in [0, V) -> ids.shape + [C].
Var embedding(Context& ctx, const Var& table, const Tensor& ids);

Var reshape(Context& ctx, const Var& x, const Shape& shape);
Var transpose(Context& ctx, const Var& x, int64_t dim0, int64_t dim1);
Var slice(Context& ctx, const Var& x, int64_t dim, int64_t start, int64_t length);
Var concat(Context& ctx, const std::vector<Var>& parts, int64_t dim);
// Rows of a 2-D x [N, C] picked by index -> [rows.size(), C]; and the reverse: `rows_values`
// [R, C] placed at `rows` of a zero [n_rows, C] tensor (indices unique). MoE routing uses both.
Var select_rows(Context& ctx, const Var& x, const std::vector<int64_t>& rows);
Var scatter_rows(Context& ctx, const Var& rows_values, const std::vector<int64_t>& rows, int64_t n_rows);

Var sum(Context& ctx, const Var& x);   // all elements -> scalar; 0 for an empty tensor
Var mean(Context& ctx, const Var& x);  // all elements -> scalar; ShapeError for an empty tensor

// Softmax over the last dim of scores [..., T, T] with positions j > i masked out.
Var causal_softmax(Context& ctx, const Var& scores);
// qkv [B, T, 3C] (q, k, v concatenated on the last dim) -> [B, T, C], heads of width C / heads.
Var causal_self_attention(Context& ctx, const Var& qkv, int64_t heads);

// Mean softmax cross-entropy of logits [N, V] against integer targets [N].
Var cross_entropy(Context& ctx, const Var& logits, const Tensor& targets);
// Mean squared error; pred and target of the same shape.
Var mse(Context& ctx, const Var& pred, const Tensor& target);

// Rounds a value to bf16 in forward; the gradient passes through unchanged (mixed precision).
Var to_bf16(Context& ctx, const Var& x);

}  // namespace zero3
