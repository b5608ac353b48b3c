// Activation checkpointing (autograd.h, Context::set_checkpointed): a checkpointed module keeps only
// its output in forward and runs again in backward, with its forward hooks, so an engine gathers its
// parameters again. The same ops on the same values: the same bits, with fewer activations held.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <utility>

#include "core/autograd/autograd.h"
#include "core/autograd/context.h"
#include "core/autograd/logged_op_test_support.h"
#include "core/autograd/ops.h"
#include "core/base/errors.h"
#include "core/nn/mlp.h"
#include "core/nn/model.h"
#include "core/nn/sequential.h"
#include "core/tensor/allocator.h"
#include "core/tensor/kernels.h"

namespace zero3 {
namespace {

// Two MLP blocks (types "mlp", names "0" and "1") and a mean as the loss.
class TwoBlocks : public Model {
 public:
  TwoBlocks() : Model(make_root()) {
    finalize();
    initialize(7);
  }
  Var loss(Context& ctx, const Batch& batch) override {
    return mean(ctx, static_cast<Layer&>(root()).forward(ctx, constant(batch.inputs)));
  }

 private:
  static std::unique_ptr<Module> make_root() {
    auto root = std::make_unique<Sequential>();
    root->append(std::make_unique<Mlp>(4, 8, 0.5f, 0.5f));
    root->append(std::make_unique<Mlp>(4, 8, 0.5f, 0.5f));
    return root;
  }
};

Batch inputs() {
  Tensor x = Tensor::zeros({3, 4});
  for (int64_t i = 0; i < x.numel(); ++i) x.data()[i] = 0.1f * static_cast<float>(i) - 0.5f;
  return {x, Tensor()};
}

struct StepResult {
  float loss = 0.0f;
  std::vector<std::vector<float>> grads;  // by parameter id
  int64_t activation_peak = 0;
};

StepResult run_step(const std::vector<std::string>& checkpointed, ModuleHooks* hooks = nullptr) {
  TwoBlocks model;
  CountingAllocator memory;
  Context ctx(cpu_kernels(), hooks);
  ctx.tape().count_activations(&memory);
  ctx.set_checkpointed(select_modules(model, checkpointed, "test"));
  const Var loss = model.loss(ctx, inputs());
  StepResult result{.loss = loss.value().item(), .grads = {}, .activation_peak = 0};
  backward(ctx, loss);
  for (const Parameter* param : model.parameters()) {
    const Tensor grad = ctx.param_grad(*param);
    result.grads.emplace_back(grad.data(), grad.data() + grad.numel());
  }
  result.activation_peak = memory.peak_bytes(MemoryCategory::activation);
  EXPECT_EQ(memory.current_bytes(MemoryCategory::activation), 0) << "every activation released after backward";
  return result;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(ActivationCheckpointing, GivesTheSameLossAndGradientsBitForBitWithFewerActivationsHeld) {
  const StepResult plain = run_step({});
  const StepResult checkpointed = run_step({"mlp"});
  EXPECT_EQ(std::memcmp(&plain.loss, &checkpointed.loss, sizeof(float)), 0);
  ASSERT_EQ(plain.grads.size(), checkpointed.grads.size());
  for (size_t id = 0; id < plain.grads.size(); ++id) {
    EXPECT_FALSE(plain.grads[id].empty());
    EXPECT_TRUE(same_bits(plain.grads[id], checkpointed.grads[id])) << "parameter " << id;
  }
  EXPECT_LT(checkpointed.activation_peak, plain.activation_peak);
}

TEST(ActivationCheckpointing, CheckpointingOneBlockByNameLowersThePeakAndBothNoLess) {
  // The peak comes at the last block's forward (or its recompute, one block's activations either
  // way), so checkpointing the first block already takes what there is to take here.
  const StepResult both = run_step({"mlp"});
  const StepResult first = run_step({"0"});
  const StepResult plain = run_step({});
  EXPECT_LE(both.activation_peak, first.activation_peak);
  EXPECT_LT(first.activation_peak, plain.activation_peak);
  EXPECT_TRUE(same_bits(first.grads[0], plain.grads[0]));
}

class RecordingHooks : public ModuleHooks {
 public:
  void pre_forward(Context&, Module& m) override { log.push_back("pre_forward " + m.display_name()); }
  void post_forward(Context&, Module& m) override { log.push_back("post_forward " + m.display_name()); }
  void pre_backward(Context&, Module& m) override { log.push_back("pre_backward " + m.display_name()); }
  void post_backward(Context&, Module& m) override { log.push_back("post_backward " + m.display_name()); }
  std::vector<std::string> log;
};

std::vector<std::string> backward_part(const std::vector<std::string>& log) {
  // Forward ends at the root's post_forward.
  auto it = std::find(log.begin(), log.end(), "post_forward <root>");
  return {it + 1, log.end()};
}

TEST(ActivationCheckpointing, BackwardRunsTheModulesForwardHooksAgainRightAfterItsPreBackward) {
  RecordingHooks hooks;
  run_step({"1"}, &hooks);
  const std::vector<std::string> backward = backward_part(hooks.log);
  const std::vector<std::string> expected_start = {
      "pre_backward <root>", "pre_backward 1", "pre_forward 1.fc", "post_forward 1.fc", "pre_forward 1.gelu",
      "post_forward 1.gelu", "pre_forward 1.proj", "post_forward 1.proj", "pre_backward 1.proj"};
  ASSERT_GE(backward.size(), expected_start.size());
  EXPECT_EQ(std::vector<std::string>(backward.begin(), backward.begin() + expected_start.size()), expected_start);
  // Block 0 is not checkpointed: its backward fires no forward hook.
  EXPECT_EQ(std::count(backward.begin(), backward.end(), "pre_forward 0.fc"), 0);
}

TEST(ActivationCheckpointing, AModuleInsideACheckpointedOneRunsAgainOnlyAsPartOfIt) {
  RecordingHooks hooks;
  run_step({"mlp", "linear"}, &hooks);
  const std::vector<std::string> backward = backward_part(hooks.log);
  EXPECT_EQ(std::count(backward.begin(), backward.end(), "pre_forward 1.fc"), 1);
  EXPECT_EQ(std::count(backward.begin(), backward.end(), "pre_forward 0.fc"), 1);
}

TEST(ActivationCheckpointing, ANameTheModelDoesNotHaveIsAnInputErrorNamingItAndTheTypes) {
  TwoBlocks model;
  try {
    select_modules(model, {"mlp", "block"}, "activation_checkpointing.zero3_modules");
    FAIL() << "no error";
  } catch (const InputError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("activation_checkpointing.zero3_modules: 'block'"), std::string::npos) << message;
    EXPECT_NE(message.find("linear, mlp, sequential"), std::string::npos) << message;
  }
}

// Each exit marker's (output_bytes, kept_bytes), by module display name, after one forward.
std::map<std::string, std::pair<int64_t, int64_t>> exit_output_bytes(const std::vector<std::string>& checkpointed) {
  TwoBlocks model;
  Context ctx(cpu_kernels());
  ctx.set_checkpointed(select_modules(model, checkpointed, "test"));
  model.loss(ctx, inputs());
  std::map<std::string, std::pair<int64_t, int64_t>> bytes;
  for (const TapeEntry& entry : ctx.tape().entries()) {
    if (!entry.is_marker || entry.marker.kind != MarkerKind::module_exit) continue;
    bytes[entry.marker.module->display_name()] = {entry.marker.output_bytes, entry.marker.kept_bytes};
  }
  return bytes;
}

// A recorded trace carries output_bytes, so that a replay checkpointing the module holds what the
// run holds: it must be known on every exit, checkpointed or not.
TEST(ActivationCheckpointing, EveryModuleExitRecordsTheBytesOfItsOutputWhichIsWhatCheckpointingKeeps) {
  // x [3, 4] -> fc [3, 8] -> gelu [3, 8] -> proj [3, 4], in f32, in each block.
  const auto plain = exit_output_bytes({});
  EXPECT_EQ(plain.at("0.fc").first, 3 * 8 * 4);
  EXPECT_EQ(plain.at("0.gelu").first, 3 * 8 * 4);
  EXPECT_EQ(plain.at("1.proj").first, 3 * 4 * 4);
  EXPECT_EQ(plain.at("1").first, 3 * 4 * 4) << "a block's output is made by an op of its last child";
  EXPECT_EQ(plain.at("<root>").first, 3 * 4 * 4);
  EXPECT_EQ(plain.at("1").second, 0) << "not checkpointed: nothing is kept apart from its activations";
  const auto checkpointed = exit_output_bytes({"1"});
  EXPECT_EQ(checkpointed.at("1").first, plain.at("1").first);
  EXPECT_EQ(checkpointed.at("1").second, plain.at("1").first);
}

class Scope : public Module {
 public:
  Scope() : Module("scope") {}
};

TEST(ActivationCheckpointing, AnOpThatCannotRunAgainInsideACheckpointedModuleIsAnError) {
  std::vector<std::string> log;
  Context ctx(cpu_kernels());
  Scope scope;
  ctx.set_checkpointed({&scope});
  const Var x(Tensor::scalar(1.0f), /*requires_grad=*/true);
  try {
    ctx.invoke(scope, [&] { return logged_sum(ctx, "hand_built", {x}, &log); });
    FAIL() << "no error";
  } catch (const CorrectnessError& error) {
    EXPECT_NE(std::string(error.what()).find("op 'hand_built' cannot be run again"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace zero3
