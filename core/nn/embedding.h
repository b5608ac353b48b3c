// Embedding: a [num_embeddings, dim] table looked up by integer ids (token and position tables).
#pragma once
#include "core/nn/module.h"
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

}  // namespace zero3
