// Target cases draw the levers only under TargetSpace::levers and bf16 only under ::bf16: without
// them they stay f32 at stage 3 with nothing offloaded, checkpointed or grouped (earlier campaigns'
// seeds give their cases); with them every lever comes up, each valid for the runners, and
// survives its case.json.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "core/base/errors.h"
#include "props/target/memory_verdict.h"
#include "props/target/target_case.h"

namespace zero3 {
namespace {

bool no_lever(const TrainConfig& config) {
  return config.zero.stage == 3 && config.checkpoint_modules.empty() &&
         config.zero.offload_optimizer == OffloadDevice::none && config.zero.offload_param == OffloadDevice::none &&
         !config.zero.hierarchical();
}

RC_GTEST_PROP(TargetCase, DrawsNoLeverOutsideTheLeverSpace, ()) {
  const TrainConfig config = (*gen_target_case({.max_ranks = 4}, {.transformer = true})).run.config;
  RC_ASSERT(no_lever(config));
  RC_ASSERT(!config.bf16);
}

// Measured cases train enough steps for the memory rule, and their measure_memory survives case.json.
RC_GTEST_PROP(TargetCase, MemoryCasesTrainFourStepsOrMoreAndRoundTrip, ()) {
  const TargetCase original = *gen_target_case({.max_ranks = 4}, {.memory = true});
  RC_TAG(original.measure_memory ? "measured" : "unmeasured");
  RC_ASSERT(!original.measure_memory || original.run.steps >= kMemoryStepsMin);
  const std::string text = target_case_json(original).dump();
  RC_ASSERT(target_case_json(target_case_from_json(nlohmann::json::parse(text), "case.json")).dump() == text);
  RC_ASSERT(!(*gen_target_case({.max_ranks = 4}, {})).measure_memory);
}

RC_GTEST_PROP(TargetCase, LeverCasesAreValidForTheRunnersAndRoundTripThroughTheirCaseJson, ()) {
  const TargetCase original =
      *gen_target_case({.max_ranks = 4}, {.transformer = true, .levers = true, .bf16 = true});
  const ZeroConfig& zero = original.run.config.zero;
  RC_TAG(no_lever(original.run.config) ? "no lever" : "levers");
  RC_ASSERT(zero.offload_param == OffloadDevice::none || zero.stage == 3);
  RC_ASSERT(zero.hpz_group_size == 1 || (zero.stage == 3 && zero.hpz_group_size < original.run.world &&
                                         original.run.world % zero.hpz_group_size == 0));
  for (const std::string& type : original.run.config.checkpoint_modules) {
    RC_ASSERT(std::find(kCheckpointableTypes.begin(), kCheckpointableTypes.end(), type) != kCheckpointableTypes.end());
  }
  const nlohmann::json json = target_case_json(original);
  RC_ASSERT(json.at("dtype") == (original.run.config.bf16 ? "bf16" : "f32"));
  const std::string text = json.dump();
  RC_ASSERT(target_case_json(target_case_from_json(nlohmann::json::parse(text), "case.json")).dump() == text);
}

TEST(TargetCase, EveryLeverComesUpAndMostCasesKeepStageThreeWithoutOne) {
  const uint64_t seed = 20261207;
  const int cases = 400;
  int stage[4] = {0, 0, 0, 0};
  int offload_optimizer = 0, offload_param = 0, hpz = 0, checkpointing = 0, bf16 = 0, none = 0;
  for (int index = 0; index < cases; ++index) {
    // Case i from its own seed, as generators_test draws them.
    const TargetCase drawn = gen_target_case({.max_ranks = 4}, {.transformer = true, .levers = true, .bf16 = true})(
                                 rc::Random(seed + static_cast<uint64_t>(index)), index % 100)
                                 .value();
    const TrainConfig& config = drawn.run.config;
    stage[config.zero.stage]++;
    offload_optimizer += config.zero.offload_optimizer == OffloadDevice::cpu;
    offload_param += config.zero.offload_param == OffloadDevice::cpu;
    hpz += config.zero.hpz_group_size > 1;
    checkpointing += !config.checkpoint_modules.empty();
    bf16 += config.bf16;
    none += no_lever(config);
  }
  std::printf("seed=%llu: of %d cases, stage 1 %d, stage 2 %d, stage 3 %d; optimizer offloaded %d, parameters "
              "offloaded %d, hpZ %d, checkpointing %d, bf16 %d; no lever %d\n",
              static_cast<unsigned long long>(seed), cases, stage[1], stage[2], stage[3], offload_optimizer,
              offload_param, hpz, checkpointing, bf16, none);
  EXPECT_GT(stage[1], 0);
  EXPECT_GT(stage[2], 0);
  EXPECT_GT(offload_optimizer, 0);
  EXPECT_GT(offload_param, 0);
  EXPECT_GT(hpz, 0);
  EXPECT_GT(checkpointing, 0);
  EXPECT_GT(bf16, cases / 5);
  EXPECT_LT(bf16, cases / 2) << "f32 stays the common case: its tolerances are a hundred times tighter";
  EXPECT_GT(stage[3], cases / 2) << "stage 3 keeps most of the coverage it had";
  EXPECT_GT(none, cases / 10) << "a lever-free case stays common, so a finding can shrink to one";
}

nlohmann::json small_case_json(int world) {
  TargetCase target_case;
  target_case.run.model_spec = nlohmann::json::parse(
      R"({"zero3_model_spec": 1, "kind": "sequential", "input_width": 4, "loss": "mse",
          "layers": [{"type": "linear", "out": 2}]})");
  target_case.run.world = world;
  return target_case_json(target_case);
}

void expect_refused(const nlohmann::json& json, const std::string& path) {
  try {
    target_case_from_json(json, "case.json");
    ADD_FAILURE() << "read a case whose " << path << " is wrong: " << json.dump();
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find(path), std::string::npos) << error.what();
  }
}

TEST(TargetCase, LeversARunnerCannotRunAreRefusedNamingTheirPath) {
  nlohmann::json json = small_case_json(4);
  json["zero"]["stage"] = 0;
  expect_refused(json, "/zero/stage");
  json = small_case_json(4);
  json["zero"]["stage"] = 2;
  json["zero"]["offload_param"] = "cpu";
  expect_refused(json, "/zero/offload_param");
  json = small_case_json(4);
  json["zero"]["offload_optimizer"] = "nvme";
  expect_refused(json, "/zero/offload_optimizer");
  json = small_case_json(4);
  json["zero"]["hpz_partition_size"] = 3;
  expect_refused(json, "/zero/hpz_partition_size");
  json = small_case_json(4);
  json["zero"]["hpz_partition_size"] = 2;
  json["zero"]["shard_group_size"] = 2;
  expect_refused(json, "/zero/hpz_partition_size");
  json = small_case_json(4);
  json["activation_checkpointing"] = {"relu"};
  expect_refused(json, "/activation_checkpointing/0");
  json = small_case_json(4);
  json["dtype"] = "f16";
  expect_refused(json, "/dtype");
  json = small_case_json(4);
  json["measure_memory"] = "yes";
  expect_refused(json, "/measure_memory");
  json = small_case_json(4);
  json["steps"] = 3;
  json["measure_memory"] = true;
  expect_refused(json, "/measure_memory");
}

}  // namespace
}  // namespace zero3
