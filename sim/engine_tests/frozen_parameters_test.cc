// Frozen parameters (`"requires_grad": false` in a model spec, as base weights are frozen while
// adapters fine-tune): sharded and gathered like any other, but no gradient, no reduce-scatter and
// no AdamW moments. ZeRO-3 must equal DDP with the same parameters frozen, bit for bit, the frozen
// values must not move, and the model state counts no moments or gradient shard for them.
#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "core/models/model_zoo.h"
#include "core/sharding/partition.h"
#include "sim/distributed_training.h"

namespace zero3 {
namespace {

// A frozen base (a linear, a layer norm, a broadcast scale, a whole MoE and a zero-sized linear)
// between two trained layers: gradients still flow through the frozen layers to the first one.
nlohmann::json frozen_base_spec() {
  return nlohmann::json::parse(R"({
    "zero3_model_spec": 1, "name": "frozen-base", "kind": "sequential", "input_width": 8, "loss": "mse",
    "layers": [
      {"type": "linear", "out": 16},
      {"type": "linear", "out": 16, "requires_grad": false}, {"type": "gelu"},
      {"type": "layer_norm", "requires_grad": false},
      {"type": "scale", "shape": [16], "requires_grad": false},
      {"type": "residual", "layers": [{"type": "moe", "experts": 3, "hidden": 4, "requires_grad": false}]},
      {"type": "concat", "layers": [{"type": "linear", "out": 0, "requires_grad": false}]},
      {"type": "linear", "out": 4}]})");
}

DistributedRunOptions frozen_run(int stage, int world, bool bf16) {
  DistributedRunOptions options;
  options.model_spec = frozen_base_spec();
  options.world = world;
  options.steps = 3;
  options.config.bf16 = bf16;
  options.config.gradient_accumulation_steps = 2;
  options.config.zero.stage = stage;
  options.config.zero.persistence_threshold = 0;  // every parameter sharded
  options.config.zero.leaf_modules = {"moe"};     // routing differs by rank
  return options;
}

TEST(FrozenParameters, Zero3EqualsDdpWithTheSameParametersFrozenBitForBit) {
  for (int world : {1, 3, 4}) {
    for (bool bf16 : {false, true}) {
      const DistributedRunResult zero3 = run_distributed(frozen_run(3, world, bf16));
      const DistributedRunResult ddp = run_distributed(frozen_run(0, world, bf16));
      ASSERT_TRUE(zero3.sim.all_ok()) << zero3.sim.summary();
      ASSERT_TRUE(ddp.sim.all_ok()) << ddp.sim.summary();
      const StateComparison comparison = compare_runs(zero3, ddp);
      EXPECT_TRUE(comparison.bitwise_equal) << "W=" << world << " bf16=" << bf16 << "\n" << comparison.first_differences;
    }
  }
}

TEST(FrozenParameters, KeepTheirInitialValuesAndZeroMomentsWhileTheOthersTrain) {
  const DistributedRunResult zero3 = run_distributed(frozen_run(3, 4, false));
  ASSERT_TRUE(zero3.sim.all_ok()) << zero3.sim.summary();
  BuiltModel built = build_model_from_spec(frozen_base_spec(), "model_spec", {.seed = 1});
  initialize_model(built, 1);
  int frozen = 0;
  int trained = 0;
  for (const Parameter* param : built.model->parameters()) {
    const OptimizerSlot& slot = zero3.final_state[static_cast<size_t>(param->id())];
    const auto initial = param->data.values();
    const auto final_value = slot.master.values();
    ASSERT_EQ(initial.size(), final_value.size()) << param->name();
    const bool unchanged = std::equal(initial.begin(), initial.end(), final_value.begin());
    bool zero_moments = true;
    for (const float moment : slot.exp_avg.values()) zero_moments = zero_moments && moment == 0.0f;
    for (const float moment : slot.exp_avg_sq.values()) zero_moments = zero_moments && moment == 0.0f;
    if (!param->requires_grad()) {
      ++frozen;
      EXPECT_TRUE(unchanged) << param->name() << " is frozen but moved";
      EXPECT_TRUE(zero_moments) << param->name() << " is frozen but has AdamW moments";
    } else if (param->numel() > 0) {
      ++trained;
      EXPECT_FALSE(unchanged) << param->name() << " trains but kept its initial value";
    }
  }
  // linear, layer norm, scale, the MoE's gate and 3 experts' fc and proj, the zero-sized linear
  EXPECT_EQ(frozen, 2 + 2 + 1 + 2 + 3 * 4 + 2);
  EXPECT_EQ(trained, 4);
}

TEST(FrozenParameters, HoldNoGradientShardAndNoMomentsInTheModelState) {
  const int world = 4;
  const DistributedRunResult zero3 = run_distributed(frozen_run(3, world, true));
  ASSERT_TRUE(zero3.sim.all_ok()) << zero3.sim.summary();
  BuiltModel built = build_model_from_spec(frozen_base_spec(), "model_spec", {.seed = 1});
  int64_t trained_elements = 0;
  int64_t frozen_elements = 0;
  for (const Parameter* param : built.model->parameters()) {
    (param->requires_grad() ? trained_elements : frozen_elements) += shard_numel(param->numel(), world);
  }
  ASSERT_GT(frozen_elements, 0);
  for (const RankMemory& memory : zero3.memory) {
    const auto peak = [&](MemoryCategory category) { return memory.peak_bytes[static_cast<size_t>(category)]; };
    EXPECT_EQ(peak(MemoryCategory::param_shard), 2 * (trained_elements + frozen_elements));
    EXPECT_EQ(peak(MemoryCategory::grad_shard), 4 * trained_elements);
    // f32 master and two moments for a trained element; the f32 master alone for a frozen one.
    EXPECT_EQ(peak(MemoryCategory::optimizer_state), 12 * trained_elements + 4 * frozen_elements);
  }
}

TEST(FrozenParameters, ASpecFreezingALayerWithoutParametersOrNotABooleanIsAnInputErrorNamingThePath) {
  const auto error_of = [](const nlohmann::json& layer) -> std::string {
    nlohmann::json spec = {{"zero3_model_spec", 1}, {"kind", "sequential"}, {"input_width", 4}, {"loss", "mse"},
                           {"layers", {{{"type", "linear"}, {"out", 4}}, layer}}};
    try {
      build_model_from_spec(spec, "model_spec", {});
    } catch (const InputError& error) {
      return error.what();
    }
    return "no error";
  };
  const std::string borrowed = error_of({{"type", "raw_scale"}, {"param", "layers.0.bias"}, {"requires_grad", false}});
  EXPECT_NE(borrowed.find("/layers/1/requires_grad"), std::string::npos) << borrowed;
  EXPECT_NE(borrowed.find("owns none"), std::string::npos) << borrowed;
  const std::string activation = error_of({{"type", "gelu"}, {"requires_grad", false}});
  EXPECT_NE(activation.find("unknown key \"requires_grad\""), std::string::npos) << activation;
  const std::string not_boolean = error_of({{"type", "linear"}, {"out", 4}, {"requires_grad", "no"}});
  EXPECT_NE(not_boolean.find("/layers/1/requires_grad"), std::string::npos) << not_boolean;
}

}  // namespace
}  // namespace zero3
