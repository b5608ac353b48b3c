// Embedding: a [num_embeddings, dim] table looked up by integer ids (token and position tables).
// TokenEmbedding: the same table as the first layer of a sequential token model
// (core/models/MODEL_SPEC.md, `embedding`): ids [B, T] in, one row per token [B*T, dim] out.
#pragma once
#include "core/nn/layer.h"
#include "core/autograd/ops.h"

namespace zero3 {

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim, float init_std);

  Parameter& weight() const { return weight_; }
  // ids of any shape holding integers in [0, num_embeddings) -> ids.shape + [dim].
  Var forward(Context& ctx, const Tensor& ids);

 private:
  Parameter& weight_;
};

class TokenEmbedding : public Layer {
 public:
  TokenEmbedding(int64_t vocab, int64_t dim, float init_std);

  Parameter& weight() const { return weight_; }
  // `ids` a constant holding integers [B, T] (on the host): token rows [B*T, dim].
  Var forward(Context& ctx, const Var& ids) override;

 private:
  Parameter& weight_;
};

}  // namespace zero3
