// The memory figures come from real storage: after training, the bytes every rank still holds in
// the opaque arena equal what the ranks' allocators count, in f32 and in bf16 (2 bytes per element
// of parameter shard), so the per-rank model-state figures checked against the analytic count in
// the equivalence grid are the bytes a GPU would hold.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/models/model_zoo.h"
#include "core/zero3/rank_program.h"
#include "sim/opaque_device.h"
#include "sim/sim_world.h"

namespace zero3 {
namespace {

struct ResidentBytes {
  int64_t arena = -1;              // opaque arena bytes held by all ranks together
  std::vector<int64_t> counted{};  // each rank's allocator total
  std::vector<int64_t> param_shard{};
};

ResidentBytes resident_after_training(const std::string& model, int world, bool bf16) {
  SimOptions sim_options{.world = world, .seed = 1};
  sim_options.fiber_stack_bytes = 1 << 20;
  sim_options.kernels = &opaque_kernels();
  ResidentBytes resident;
  resident.counted.assign(static_cast<size_t>(world), -1);
  resident.param_shard.assign(static_cast<size_t>(world), -1);
  const int64_t arena_before = opaque_arena_stats().live_bytes;
  TrainConfig config;
  config.zero.stage = 3;
  config.zero.persistence_threshold = 0;
  config.bf16 = bf16;
  const SimResult result = SimWorld(sim_options).run([&](SimRank& sim) {
    BuiltModel built = build_model(model, {.seed = 1});
    built.model->initialize(1);
    RankProgramOptions program{.config = config, .seed = 1, .steps = 2};
    // Every rank stops here between two barriers, so rank 0 reads the arena while all ranks hold
    // exactly their post-training state.
    program.on_training_done = [&] {
      sim.comm().barrier({.module = "test", .phase = "memory"});
      const size_t rank = static_cast<size_t>(sim.rank());
      resident.counted[rank] = sim.allocator().current_total_bytes();
      resident.param_shard[rank] = sim.allocator().current_bytes(MemoryCategory::param_shard);
      if (sim.rank() == 0) resident.arena = opaque_arena_stats().live_bytes - arena_before;
      sim.comm().barrier({.module = "test", .phase = "memory"});
    };
    run_rank_program({.comm = &sim.comm(), .allocator = sim.allocator(), .kernels = sim.kernels()}, built, program);
  });
  EXPECT_TRUE(result.all_ok()) << result.summary();
  return resident;
}

class ResidentOpaqueBytes : public ::testing::TestWithParam<bool> {};

TEST_P(ResidentOpaqueBytes, EqualTheBytesTheRanksAllocatorsCount) {
  const bool bf16 = GetParam();
  const int world = 3;
  const ResidentBytes resident = resident_after_training("gpt-tiny", world, bf16);
  int64_t counted = 0;
  for (int64_t bytes : resident.counted) counted += bytes;
  EXPECT_GT(counted, 0);
  EXPECT_EQ(resident.arena, counted) << (bf16 ? "bf16" : "f32");
  // bf16 parameter shards hold half the bytes of f32 ones, in the arena as in the count.
  if (bf16) {
    const ResidentBytes f32 = resident_after_training("gpt-tiny", world, false);
    for (int rank = 0; rank < world; ++rank) {
      EXPECT_EQ(2 * resident.param_shard[static_cast<size_t>(rank)], f32.param_shard[static_cast<size_t>(rank)]);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ResidentOpaqueBytes, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& dtype) { return dtype.param ? "bf16" : "f32"; });

}  // namespace
}  // namespace zero3
