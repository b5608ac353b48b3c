// Embedding lookup.
#include "core/nn/embedding.h"

namespace zero3 {

Embedding::Embedding(int64_t num_embeddings, int64_t dim, float init_std)
    : Module("embedding"), weight_(add_parameter("weight", {num_embeddings, dim}, Init::normal, init_std)) {}

Var Embedding::forward(Context& ctx, const Tensor& ids) {
  return ctx.invoke(*this, [&] { return embedding(ctx, ctx.param(*this, weight_), ids); });
}

}  // namespace zero3
