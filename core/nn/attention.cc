// Causal self-attention block.
#include "core/nn/attention.h"

#include "core/base/errors.h"

namespace zero3 {

CausalSelfAttention::CausalSelfAttention(int64_t width, int64_t heads, float init_std, float proj_init_std,
                                         const AttentionOptions& options)
    : Layer("causal_self_attention"), heads_(heads), rows_per_sequence_(options.rows_per_sequence),
      qkv_(add_child("qkv", std::make_unique<Linear>(width, 3 * width, options.qkv_bias, init_std))),
      proj_(add_child("proj", std::make_unique<Linear>(width, width, options.proj_bias, proj_init_std))) {
  ZERO3_CHECK(heads > 0 && width % heads == 0,
              "width " + std::to_string(width) + " is not a multiple of heads " + std::to_string(heads));
  ZERO3_CHECK(options.rows_per_sequence >= 0, "negative rows per sequence");
}

Var CausalSelfAttention::forward(Context& ctx, const Var& x) {
  return ctx.invoke(*this, [&] {
    if (rows_per_sequence_ == 0) return proj_.forward(ctx, causal_self_attention(ctx, qkv_.forward(ctx, x), heads_));
    const Shape& rows = x.shape();
    if (rows.size() != 2 || rows[0] % rows_per_sequence_ != 0) {
      throw ShapeError("causal_self_attention: token rows " + shape_str(rows) + " are not [B*T, C] with T = " +
                       std::to_string(rows_per_sequence_));
    }
    const int64_t sequences = rows[0] / rows_per_sequence_;
    const Var qkv = reshape(ctx, qkv_.forward(ctx, x), {sequences, rows_per_sequence_, 3 * rows[1]});
    const Var attended = causal_self_attention(ctx, qkv, heads_);
    return proj_.forward(ctx, reshape(ctx, attended, rows));
  });
}

}  // namespace zero3
