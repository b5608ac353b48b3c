// GPT-2 style model with tied embeddings.
#include "core/models/gpt_model.h"

#include <cmath>

#include "core/base/errors.h"

namespace zero3 {

namespace {

// GPT-2's initialisation: N(0, 0.02), position table N(0, 0.01), and residual projections scaled
// by 1/sqrt(2 * layers) so that the residual stream's variance does not grow with depth.
constexpr float kInitStd = 0.02f;
constexpr float kPositionInitStd = 0.01f;

std::unique_ptr<Sequential> make_blocks(const GptConfig& config) {
  const float proj_init_std = kInitStd / std::sqrt(2.0f * static_cast<float>(std::max<int64_t>(config.layers, 1)));
  auto blocks = std::make_unique<Sequential>();
  for (int64_t i = 0; i < config.layers; ++i) {
    blocks->append(std::make_unique<TransformerBlock>(config.width, config.heads, kInitStd, proj_init_std));
  }
  return blocks;
}

}  // namespace

Gpt::Gpt(const GptConfig& config)
    : Module("gpt"), config_(config),
      wte_(add_child("wte", std::make_unique<Embedding>(config.vocab, config.width, kInitStd))),
      wpe_(add_child("wpe", std::make_unique<Embedding>(config.context, config.width, kPositionInitStd))),
      blocks_(add_child("h", make_blocks(config))),
      ln_f_(add_child("ln_f", std::make_unique<LayerNorm>(config.width))),
      lm_head_(add_child("lm_head", std::make_unique<TiedLinear>(wte_.weight(), /*transposed=*/false,
                                                                 /*has_bias=*/false))) {}

Var Gpt::forward(Context& ctx, const Tensor& ids) {
  if (ids.rank() != 2 || ids.dim(1) > config_.context) {
    throw ShapeError("gpt: expected token ids [batch, T] with T <= context " + std::to_string(config_.context) +
                     ", got " + describe(ids));
  }
  return ctx.invoke(*this, [&] {
    const int64_t steps = ids.dim(1);
    std::vector<float> positions(static_cast<size_t>(steps));
    for (int64_t t = 0; t < steps; ++t) positions[static_cast<size_t>(t)] = static_cast<float>(t);
    const Var tokens = wte_.forward(ctx, ids);
    const Var where = wpe_.forward(ctx, Tensor::from_values({steps}, std::move(positions)));
    const Var h = blocks_.forward(ctx, add(ctx, tokens, where));
    return lm_head_.forward(ctx, ln_f_.forward(ctx, h));
  });
}

GptModel::GptModel(const GptConfig& config) : Model(std::make_unique<Gpt>(config)) { finalize(); }

Var GptModel::loss(Context& ctx, const Batch& batch) {
  const Var logits = gpt().forward(ctx, batch.inputs);
  const int64_t rows = batch.inputs.numel();
  return cross_entropy(ctx, reshape(ctx, logits, {rows, gpt().config().vocab}), batch.targets.reshape({rows}));
}

}  // namespace zero3
