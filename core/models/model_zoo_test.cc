// The built-in models: each builds, runs and backpropagates; the zero-sized and broadcast-trap
// models show the failure classes they exist for; a spec's module names mirror its JSON paths.
#include "core/models/model_zoo.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "core/nn/access_recorder.h"
#include "core/tensor/kernels.h"
#include "core/nn/linear.h"

namespace zero3 {
namespace {

struct StepResult {
  float loss;
  std::unique_ptr<Context> ctx;  // holds the parameter gradients
};

StepResult run_step(BuiltModel& built, ModuleHooks* hooks = nullptr, int64_t batch_size = 4) {
  StepResult run{0.0f, std::make_unique<Context>(cpu_kernels(), hooks)};
  const Var loss = built.model->loss(*run.ctx, built.data->batch(0, 0, 0, 1, batch_size));
  run.loss = loss.value().item();
  backward(*run.ctx, loss);
  return run;
}

TEST(ModelZoo, EverySmallBuiltinBuildsRunsAndBackpropagates) {
  for (const std::string& name : builtin_model_names()) {
    if (name == "gpt2-124m") continue;  // its shapes are checked in gpt_model_test without data
    BuiltModel built = build_model(name, {.seed = 1, .data_file = ""});
    built.model->initialize(1);
    const StepResult run = run_step(built);
    EXPECT_TRUE(std::isfinite(run.loss)) << name;
    int64_t with_grad = 0;
    for (const Parameter* param : built.model->parameters()) with_grad += run.ctx->param_grad(*param).defined();
    EXPECT_GT(with_grad, 0) << name;
    EXPECT_EQ(built.spec["name"], name);
  }
}

TEST(ModelZoo, BuiltinParameterCountsAreTheDocumentedOnes) {
  // Counted by hand from the layer widths (MODEL_SPEC.md lists the same numbers).
  const std::map<std::string, int64_t> expected = {
      {"mlp-tiny", 1476}, {"classifier-tiny", 517}, {"gpt-tiny", 28032}, {"moe-tiny", 2456},
      {"zero-sized", 212}, {"broadcast-trap", 45}, {"repeat-tiny", 484}, {"tied-tiny", 180},
      {"unused-tiny", 484}, {"kitchen-sink", 1865}, {"transformer-tiny", 2720},
      {"gpt-bytes", 118528}, {"gpt2-124m", 124439808}};
  std::vector<std::string> names;
  for (const auto& [name, count] : expected) {
    EXPECT_EQ(build_model(name, {}).model->parameter_count(), count) << name;
    names.push_back(name);
  }
  std::vector<std::string> builtins = builtin_model_names();
  std::sort(builtins.begin(), builtins.end());
  EXPECT_EQ(builtins, names);
}

TEST(ModelZoo, ZeroSizedModelsLinearEightToZeroIsOnTheLossPathWithAZeroSizedGradient) {
  BuiltModel built = build_model("zero-sized", {.seed = 2, .data_file = ""});
  built.model->initialize(2);
  Parameter& weight = built.model->parameter("layers.0.layers.0.weight");
  EXPECT_EQ(weight.shape(), (Shape{0, 8}));
  EXPECT_EQ(built.model->parameter("layers.0.layers.0.bias").shape(), (Shape{0}));
  AccessRecorder recorder;
  const StepResult run = run_step(built, &recorder);
  bool accessed = false;
  for (const auto& access : recorder.accesses) accessed = accessed || access.param == &weight;
  EXPECT_TRUE(accessed);
  // A gradient entry exists only for parameters on the loss's path, however small they are.
  const Tensor grad = run.ctx->param_grad(weight);
  ASSERT_TRUE(grad.defined());
  EXPECT_EQ(grad.shape(), (Shape{0, 8}));
}

// Raw handles show a fixed placeholder, as an engine does while the parameter is partitioned.
class PlaceholderHooks : public ModuleHooks {
 public:
  explicit PlaceholderHooks(Tensor placeholder) : placeholder_(std::move(placeholder)) {}
  Tensor raw_access(Context&, Parameter&) override { return placeholder_; }

 private:
  Tensor placeholder_;
};

TEST(ModelZoo, BroadcastTrapLossChangesSilentlyUnderEmptyAndScalarPlaceholders) {
  BuiltModel built = build_model("broadcast-trap", {.seed = 3, .data_file = ""});
  built.model->initialize(3);
  const float reference = run_step(built).loss;
  PlaceholderHooks empty(Tensor::zeros({0}));
  PlaceholderHooks scalar(Tensor::from_values({1}, {1.0f}));
  const float with_empty = run_step(built, &empty).loss;
  const float with_scalar = run_step(built, &scalar).loss;
  EXPECT_TRUE(std::isfinite(with_empty) && std::isfinite(with_scalar));
  EXPECT_NE(with_empty, reference);
  EXPECT_NE(with_scalar, reference);
}

TEST(ModelZoo, KitchenSinkTiesUnusesAndRawUsesTheParametersItNames) {
  BuiltModel built = build_model("kitchen-sink", {.seed = 4, .data_file = ""});
  built.model->initialize(4);
  AccessRecorder recorder;
  const StepResult run = run_step(built, &recorder);
  Parameter& shared = built.model->parameter("layers.0.weight");
  int users = 0;
  for (const auto& access : recorder.accesses) users += access.param == &shared;
  EXPECT_EQ(users, 2);  // its own Linear and the tied_linear at layers.6
  EXPECT_FALSE(run.ctx->param_grad(built.model->parameter("layers.7.weight")).defined());  // unused_linear
  EXPECT_FALSE(run.ctx->param_grad(built.model->parameter("layers.9.layers.0.scale")).defined());  // raw use
  EXPECT_TRUE(run.ctx->param_grad(built.model->parameter("layers.5.layers.0.weight")).defined());  // Linear(16, 0)
}

TEST(ModelZoo, MlpTinyLearnsItsTeacher) {
  BuiltModel built = build_model("mlp-tiny", {.seed = 5, .data_file = ""});
  built.model->initialize(5);
  const auto step_loss = [&](int64_t step, bool update) {
    Context ctx(cpu_kernels());
    const Var loss = built.model->loss(ctx, built.data->batch(step, 0, 0, 1, 32));
    backward(ctx, loss);
    for (Parameter* param : built.model->parameters()) {
      const Tensor grad = ctx.param_grad(*param);
      for (int64_t i = 0; update && i < param->numel(); ++i) param->data.data()[i] -= 0.05f * grad.data()[i];
    }
    return loss.value().item();
  };
  const float before = step_loss(1000, false);
  for (int64_t step = 0; step < 300; ++step) step_loss(step, true);
  const float after = step_loss(1000, false);
  EXPECT_LT(after, 0.5f * before) << "held-out loss " << before << " -> " << after;
}

TEST(ModelZoo, MoeTinyRoutesDifferentBatchesToDifferentExpertSets) {
  BuiltModel built = build_model("moe-tiny", {.seed = 9, .data_file = ""});
  built.model->initialize(9);
  std::set<std::set<std::string>> expert_sets;
  for (int64_t step = 0; step < 16; ++step) {
    Context ctx(cpu_kernels());
    built.model->loss(ctx, built.data->batch(step, 0, 0, 1, 1));
    std::set<std::string> experts;
    for (const TapeEntry& entry : ctx.tape().entries()) {
      if (!entry.is_marker || entry.marker.kind != MarkerKind::module_enter) continue;
      const std::string& name = entry.marker.module->name();
      if (name.find(".experts.") != std::string::npos && name.ends_with(".fc")) experts.insert(name);
    }
    EXPECT_EQ(experts.size(), 1u) << "one row runs exactly one expert";
    expert_sets.insert(experts);
  }
  EXPECT_GE(expert_sets.size(), 2u);
}

}  // namespace
}  // namespace zero3
