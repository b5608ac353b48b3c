// Gpt: a GPT-2 style decoder — token and position embeddings, transformer blocks, a final
// LayerNorm and an LM head TIED to the token embedding. The head is its own module (`lm_head`)
// owning no parameter: it reaches wte.weight through the checked accessor, an external use.
//
//   GptModel model(GptConfig{.vocab = 64, .context = 16, .layers = 2, .heads = 2, .width = 32});
//   model.initialize(seed);
//   Var loss = model.loss(ctx, batch);   // batch: token ids [B, T], next tokens [B, T]
#pragma once
#include "core/nn/embedding.h"
#include "core/nn/layer_norm.h"
#include "core/nn/model.h"
#include "core/nn/sequential.h"
#include "core/nn/tied_linear.h"
#include "core/nn/transformer.h"

namespace zero3 {

struct GptConfig {
  int64_t vocab = 0;
  int64_t context = 0;  // the longest sequence, the size of the position table
  int64_t layers = 0;
  int64_t heads = 1;
  int64_t width = 0;
};

// The module tree's root: ids [B, T] -> logits [B, T, vocab].
class Gpt : public Module {
 public:
  explicit Gpt(const GptConfig& config);

  const GptConfig& config() const { return config_; }
  Embedding& wte() const { return wte_; }
  Sequential& blocks() const { return blocks_; }
  TiedLinear& lm_head() const { return lm_head_; }
  Var forward(Context& ctx, const Tensor& ids);

 private:
  GptConfig config_;
  Embedding& wte_;
  Embedding& wpe_;
  Sequential& blocks_;
  LayerNorm& ln_f_;
  TiedLinear& lm_head_;
};

class GptModel : public Model {
 public:
  explicit GptModel(const GptConfig& config);
  Gpt& gpt() { return static_cast<Gpt&>(root()); }
  // Mean next-token cross-entropy over every position of the batch.
  Var loss(Context& ctx, const Batch& batch) override;
};

}  // namespace zero3
