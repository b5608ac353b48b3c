// Embedding lookup.
#include "core/nn/embedding.h"

namespace zero3 {

Embedding::Embedding(int64_t num_embeddings, int64_t dim, float init_std)
    : Module("embedding"), weight_(add_parameter("weight", {num_embeddings, dim}, Init::normal, init_std)) {}

Var Embedding::forward(Context& ctx, const Tensor& ids) {
  return ctx.invoke(*this, [&] { return embedding(ctx, ctx.param(*this, weight_), ids); });
}

TokenEmbedding::TokenEmbedding(int64_t vocab, int64_t dim, float init_std)
    : Layer("embedding"), weight_(add_parameter("weight", {vocab, dim}, Init::normal, init_std)) {}

Var TokenEmbedding::forward(Context& ctx, const Var& ids) {
  return ctx.invoke(*this, [&] {
    const Var table = ctx.param(*this, weight_);
    const Var tokens = embedding(ctx, table, ids.value());
    const int64_t rows = ids.value().numel();
    return reshape(ctx, tokens, {rows, table.shape()[1]});
  });
}

}  // namespace zero3
