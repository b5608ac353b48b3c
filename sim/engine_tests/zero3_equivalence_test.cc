// The ZeRO-3 engine equals the DDP reference bit for bit (losses, grad norms, parameters, AdamW
// moments) across models, world sizes and configurations; DDP at W=1 equals the single-process
// reference; per-rank model-state bytes equal the analytic count.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "core/models/model_zoo.h"
#include "core/nn/module.h"
#include "core/sharding/partition.h"
#include "sim/distributed_training.h"

namespace zero3 {
namespace {

struct EquivalenceCase {
  std::string model;
  int world;
  bool bf16;
  int64_t gas;
  int64_t bucket_elements;  // the reduce bucket
  bool prefetch;            // whole-module prefetch, reuse distance 0; else no prefetch, parameters kept for reuse
};

std::string case_name(const EquivalenceCase& c) {
  std::string name = c.model + "_W" + std::to_string(c.world) + (c.bf16 ? "_bf16" : "_f32") + "_gas" +
                     std::to_string(c.gas) + "_bucket" + std::to_string(c.bucket_elements) +
                     (c.prefetch ? "_prefetch" : "_noprefetch");
  for (char& ch : name) ch = (ch == '-') ? '_' : ch;
  return name;
}

// Names the case in test output instead of dumping its bytes.
void PrintTo(const EquivalenceCase& c, std::ostream* out) { *out << case_name(c); }

DistributedRunOptions run_options(const EquivalenceCase& c, int stage) {
  DistributedRunOptions options;
  options.model = c.model;
  options.seed = 11;
  options.world = c.world;
  options.steps = 3;
  options.config.micro_batch_size = 2;
  options.config.bf16 = c.bf16;
  options.config.gradient_accumulation_steps = c.gas;
  options.config.zero.stage = stage;
  options.config.zero.reduce_bucket_elements = c.bucket_elements;
  // Prefetch cases: a prefetch bucket that holds whole modules (so gathers really run ahead) and
  // reuse distance 0 (every use gathers); the others: no prefetch, and a reuse distance that hits
  // (parameters kept across uses), so both budgets are exercised, not only their off positions.
  options.config.zero.prefetch_bucket_elements = c.prefetch ? int64_t{1} << 20 : 0;
  options.config.zero.overlap_comm = c.prefetch;
  options.config.zero.persistence_threshold = 0;
  options.config.zero.max_reuse_distance = c.prefetch ? 0 : int64_t{1} << 40;
  if (c.model == "moe-tiny") options.config.zero.leaf_modules = {"moe"};
  return options;
}

class ZeroThreeEqualsDdp : public testing::TestWithParam<EquivalenceCase> {};

int64_t moe_layers(const std::string& model) {
  const BuiltModel built = build_model(model, {.seed = 1, .data_file = ""});
  int64_t count = 0;
  std::vector<const Module*> modules = {&built.model->root()};
  for (size_t i = 0; i < modules.size(); ++i) {
    count += modules[i]->type() == "moe";
    for (const auto& child : modules[i]->children()) modules.push_back(child.get());
  }
  return count;
}

// By design a step reads the device twice (the loss, the gradient norm) and once per MoE layer
// per micro-step (the routing); anything more is a host touch that would stall a GPU.
void expect_host_syncs_by_design(const EquivalenceCase& c, const DistributedRunResult& run, const char* which) {
  const int64_t expected = 2 + moe_layers(c.model) * c.gas;
  for (const StepStats& stats : run.steps) {
    EXPECT_EQ(stats.host_syncs, expected) << which << " step " << stats.step;
  }
}

// ZeRO-3 on cpu and on the opaque device (whose memory the host may not read) and DDP on cpu:
// the three agree bit for bit, and the opaque run never touched device memory from the host (a
// touch is a HostAccessError, which fails the run).
TEST_P(ZeroThreeEqualsDdp, LossesParametersAndMomentsAreBitwiseEqual) {
  const EquivalenceCase& c = GetParam();
  const DistributedRunResult zero3 = run_distributed(run_options(c, 3));
  ASSERT_TRUE(zero3.sim.all_ok()) << zero3.sim.summary();
  DistributedRunOptions on_opaque = run_options(c, 3);
  on_opaque.device = Device::opaque;
  const DistributedRunResult zero3_opaque = run_distributed(on_opaque);
  ASSERT_TRUE(zero3_opaque.sim.all_ok()) << zero3_opaque.sim.summary();
  const DistributedRunResult ddp = run_distributed(run_options(c, 0));
  ASSERT_TRUE(ddp.sim.all_ok()) << ddp.sim.summary();
  ASSERT_EQ(zero3.steps.size(), 3u);
  const StateComparison comparison = compare_runs(zero3, ddp);
  EXPECT_TRUE(comparison.bitwise_equal) << "#wrong " << comparison.wrong << " max diff " << comparison.max_abs_diff
                                        << "\n" << comparison.first_differences;
  const StateComparison devices = compare_runs(zero3_opaque, zero3);
  EXPECT_TRUE(devices.bitwise_equal) << "opaque vs cpu: #wrong " << devices.wrong << " max diff "
                                     << devices.max_abs_diff << "\n" << devices.first_differences;
  // The budgets did something: whole-module buckets prefetch once the trace is known (from step 1),
  // a bucket of 0 never does.
  if (c.prefetch) {
    EXPECT_GT(zero3.counters.prefetched_params, 0);
  } else {
    EXPECT_EQ(zero3.counters.prefetched_params, 0);
  }
  expect_host_syncs_by_design(c, zero3, "zero3 cpu");
  expect_host_syncs_by_design(c, zero3_opaque, "zero3 opaque");
  expect_host_syncs_by_design(c, ddp, "ddp");
}

std::vector<EquivalenceCase> equivalence_grid() {
  std::vector<EquivalenceCase> cases;
  for (const char* model : {"gpt-tiny", "moe-tiny", "mlp-tiny", "zero-sized"}) {
    for (int world : {1, 2, 3, 4, 8}) {
      for (bool bf16 : {false, true}) {
        for (int64_t gas : {1, 3}) {
          // Tiny reduce buckets (one element: one collective per parameter) with prefetch, huge ones with
          // parameters kept for reuse instead.
          cases.push_back({model, world, bf16, gas, 1, true});
          cases.push_back({model, world, bf16, gas, int64_t{1} << 40, false});
        }
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Grid, ZeroThreeEqualsDdp, testing::ValuesIn(equivalence_grid()),
                         [](const testing::TestParamInfo<EquivalenceCase>& case_info) { return case_name(case_info.param); });

TEST(DdpReference, AtOneRankEqualsTheSingleProcessTrainerBitForBit) {
  DistributedRunOptions options;
  options.model = "gpt-tiny";
  options.seed = 5;
  options.world = 1;
  options.steps = 4;
  options.config.zero.stage = 0;
  const DistributedRunResult ddp = run_distributed(options);
  ASSERT_TRUE(ddp.sim.all_ok()) << ddp.sim.summary();

  BuiltModel built = build_model("gpt-tiny", {.seed = 5, .data_file = ""});
  built.model->initialize(5);
  ReplicatedTrainer reference(*built.model, options.config, {.global_ranks = 1, .comm = nullptr});
  Context ctx(cpu_kernels());
  for (int64_t step = 0; step < options.steps; ++step) {
    const StepStats stats = reference.train_step(ctx, *built.data, step);
    EXPECT_EQ(stats.loss, ddp.steps[static_cast<size_t>(step)].loss) << "step " << step;
  }
  for (size_t id = 0; id < reference.slots().size(); ++id) {
    const auto a = reference.slots()[id].master.values();
    const auto b = ddp.final_state[id].master.values();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << built.model->parameters()[id]->name() << "[" << i << "]";
  }
}

TEST(ModelStateBytes, EqualTheAnalyticCountPerRankIncludingPadding) {
  // bf16 compute: a 2-byte parameter shard, a 4-byte f32 gradient shard and 12 bytes of f32 master
  // weights and two AdamW moments per shard element; shards are ceil(numel / W) elements.
  for (int world : {1, 3, 4}) {
    DistributedRunOptions options;
    options.model = "gpt-tiny";
    options.world = world;
    options.steps = 1;
    options.config.bf16 = true;
    const DistributedRunResult result = run_distributed(options);
    ASSERT_TRUE(result.sim.all_ok()) << result.sim.summary();
    BuiltModel built = build_model("gpt-tiny", {.seed = 0, .data_file = ""});
    int64_t shard_elements = 0;
    for (const Parameter* param : built.model->parameters()) shard_elements += shard_numel(param->numel(), world);
    for (const RankMemory& memory : result.memory) {
      EXPECT_EQ(memory.peak_bytes[static_cast<size_t>(MemoryCategory::param_shard)], 2 * shard_elements);
      EXPECT_EQ(memory.peak_bytes[static_cast<size_t>(MemoryCategory::grad_shard)], 4 * shard_elements);
      EXPECT_EQ(memory.peak_bytes[static_cast<size_t>(MemoryCategory::optimizer_state)], 12 * shard_elements);
    }
  }
}

int64_t peak(const RankMemory& memory, MemoryCategory category) {
  return memory.peak_bytes[static_cast<size_t>(category)];
}

TEST(FullGradientBytes, AreHeldFromBackwardUntilTheirBucketIsReduced) {
  DistributedRunOptions options;
  options.model = "gpt-tiny";
  options.world = 2;
  options.config.bf16 = true;  // bf16 gradients: 2 bytes per element
  const int64_t elements = build_model("gpt-tiny", {}).model->parameter_count();  // the tied weight once
  // One bucket for the whole model: every full gradient is alive at the end of backward.
  options.config.zero.reduce_bucket_elements = int64_t{1} << 40;
  const DistributedRunResult one_bucket = run_distributed(options);
  ASSERT_TRUE(one_bucket.sim.all_ok()) << one_bucket.sim.summary();
  // A bucket per parameter: each gradient goes as soon as it is ready.
  options.config.zero.reduce_bucket_elements = 1;
  const DistributedRunResult eager = run_distributed(options);
  ASSERT_TRUE(eager.sim.all_ok()) << eager.sim.summary();
  // DDP reduces after the whole backward: every full gradient at once, like the single bucket.
  options.config.zero.stage = 0;
  const DistributedRunResult ddp = run_distributed(options);
  ASSERT_TRUE(ddp.sim.all_ok()) << ddp.sim.summary();
  for (size_t rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(peak(one_bucket.memory[rank], MemoryCategory::grad), 2 * elements) << "rank " << rank;
    EXPECT_EQ(peak(ddp.memory[rank], MemoryCategory::grad), 2 * elements) << "rank " << rank;
    EXPECT_GT(peak(eager.memory[rank], MemoryCategory::grad), 0) << "rank " << rank;
    EXPECT_LT(peak(eager.memory[rank], MemoryCategory::grad), elements) << "rank " << rank << ": under half at once";
  }
}

TEST(ActivationBytes, AreTheSameUnderZero3AndDdpBecauseShardingDoesNotChangeTheForward) {
  DistributedRunOptions options;
  options.model = "kitchen-sink";
  options.world = 3;
  options.steps = 2;
  options.config.zero.leaf_modules = {"moe"};
  const DistributedRunResult zero3 = run_distributed(options);
  options.config.zero.stage = 0;
  const DistributedRunResult ddp = run_distributed(options);
  ASSERT_TRUE(zero3.sim.all_ok() && ddp.sim.all_ok()) << zero3.sim.summary() << ddp.sim.summary();
  for (size_t rank = 0; rank < 3; ++rank) {
    EXPECT_GT(peak(zero3.memory[rank], MemoryCategory::activation), 0);
    EXPECT_EQ(peak(zero3.memory[rank], MemoryCategory::activation), peak(ddp.memory[rank], MemoryCategory::activation))
        << "rank " << rank;
  }
}

}  // namespace
}  // namespace zero3
