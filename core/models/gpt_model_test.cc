// GPT: the GPT-2 parameter table, the tied LM head as an external use of wte.weight, stable ids,
// gradients, and shape-only (meta) initialisation of the 124M model.
#include "core/models/gpt_model.h"

#include <cmath>

#include <gtest/gtest.h>

#include "core/nn/access_recorder.h"
#include "core/base/errors.h"
#include "core/tensor/kernels.h"
#include "core/models/model_zoo.h"
#include "core/nn/module_gradcheck.h"

namespace zero3 {
namespace {

TEST(Gpt, Gpt2SmallHas124439808ParametersWithTheTiedEmbeddingCountedOnce) {
  BuiltModel built = build_model("gpt2-124m", {});
  EXPECT_EQ(built.model->parameter_count(), 124439808);
  EXPECT_EQ(built.model->parameter("wte.weight").shape(), (Shape{50257, 768}));
  EXPECT_EQ(built.model->parameter("wpe.weight").shape(), (Shape{1024, 768}));
  EXPECT_EQ(built.model->parameter("h.11.attn.qkv.weight").shape(), (Shape{2304, 768}));
  EXPECT_EQ(built.model->parameter("h.11.mlp.fc.weight").shape(), (Shape{3072, 768}));
  EXPECT_EQ(built.model->parameter("ln_f.bias").shape(), (Shape{768}));
  // 2 embeddings + 12 blocks of 12 tensors + the final LayerNorm's 2: no separate head weight.
  EXPECT_EQ(built.model->parameters().size(), 2u + 12u * 12u + 2u);
}

// No wall-clock bound here (timed unit tests flake on loaded machines); allocating nothing is the
// property that makes meta initialisation cheap, and that is what is asserted.
TEST(Gpt, MetaInitialisationOfGpt2SmallAllocatesNoData) {
  BuiltModel built = build_model("gpt2-124m", {});
  built.model->initialize(7, Device::meta);
  for (const Parameter* param : built.model->parameters()) {
    ASSERT_TRUE(param->data.is_meta()) << param->name();
    EXPECT_EQ(param->data.storage_id(), nullptr) << param->name();
    EXPECT_EQ(param->data.shape(), param->shape()) << param->name();
  }
}

TEST(Gpt, LmHeadOwnsNoParameterAndUsesWteWeightThroughTheCheckedAccessor) {
  BuiltModel built = build_model("gpt-tiny", {.seed = 3, .data_file = ""});
  built.model->initialize(3);
  auto& gpt = static_cast<GptModel&>(*built.model).gpt();
  EXPECT_TRUE(gpt.lm_head().parameters().empty());
  AccessRecorder recorder;
  Context ctx(cpu_kernels(), &recorder);
  built.model->loss(ctx, built.data->batch(0, 0, 0, 1, 2));
  Parameter& wte = built.model->parameter("wte.weight");
  std::vector<const Parameter*> head_uses;
  for (const auto& access : recorder.accesses) {
    if (access.user == &gpt.lm_head()) head_uses.push_back(access.param);
  }
  ASSERT_EQ(head_uses.size(), 1u);
  EXPECT_EQ(head_uses[0], &wte);
  EXPECT_EQ(&wte.owner(), &gpt.wte());
  EXPECT_NE(static_cast<Module*>(&gpt.lm_head()), &wte.owner());
}

TEST(Gpt, ParameterIdsFollowRegistrationOrderAndAreStable) {
  const std::vector<std::string> expected_prefix = {
      "wte.weight", "wpe.weight", "h.0.ln_1.weight", "h.0.ln_1.bias", "h.0.attn.qkv.weight", "h.0.attn.qkv.bias",
      "h.0.attn.proj.weight", "h.0.attn.proj.bias", "h.0.ln_2.weight", "h.0.ln_2.bias", "h.0.mlp.fc.weight",
      "h.0.mlp.fc.bias", "h.0.mlp.proj.weight", "h.0.mlp.proj.bias", "h.1.ln_1.weight"};
  BuiltModel first = build_model("gpt-tiny", {});
  BuiltModel second = build_model("gpt-tiny", {});
  const auto& params = first.model->parameters();
  ASSERT_EQ(params.size(), 2u + 2u * 12u + 2u);
  for (size_t i = 0; i < expected_prefix.size(); ++i) EXPECT_EQ(params[i]->name(), expected_prefix[i]) << i;
  EXPECT_EQ(params.back()->name(), "ln_f.bias");
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i]->id(), static_cast<int64_t>(i));
    EXPECT_EQ(second.model->parameters()[i]->name(), params[i]->name());
  }
}

TEST(Gpt, InitialLossIsCloseToUniformOverTheVocab) {
  BuiltModel built = build_model("gpt-tiny", {.seed = 5, .data_file = ""});
  built.model->initialize(5);
  Context ctx(cpu_kernels());
  const float loss = built.model->loss(ctx, built.data->batch(0, 0, 0, 1, 4)).value().item();
  EXPECT_NEAR(loss, std::log(64.0), 0.1);
}

TEST(Gpt, GradientsOfTheLossMatchFiniteDifferences) {
  GptModel model(GptConfig{.vocab = 5, .context = 3, .layers = 1, .heads = 2, .width = 4});
  // Away from GPT-2's small initialisation so that every gradient is well above the tolerance.
  for (Parameter* param : model.parameters()) param->data = seeded_normal(param->shape(), 100 + param->id(), 0.5f);
  const Batch batch{Tensor::from_values({2, 3}, {0, 4, 2, 3, 3, 1}), Tensor::from_values({2, 3}, {4, 2, 1, 3, 1, 0})};
  const auto result = module_gradcheck([&](Context& ctx, const std::vector<Var>&) { return model.loss(ctx, batch); },
                                       {}, model.parameters());
  EXPECT_TRUE(result.ok) << result.report;
}

TEST(Gpt, SequencesLongerThanTheContextAreRejected) {
  GptModel model(GptConfig{.vocab = 5, .context = 3, .layers = 1, .heads = 1, .width = 2});
  model.initialize(1);
  Context ctx(cpu_kernels());
  EXPECT_THROW(model.gpt().forward(ctx, Tensor::zeros({1, 4})), ShapeError);
}

}  // namespace
}  // namespace zero3
