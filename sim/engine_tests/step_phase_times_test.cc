// Every trainer's step reports its wall clock per phase (core/training/step_stats.h's PhaseTimes):
// the reference, DDP and ZeRO-3, with and without activation checkpointing and offload. The phases
// are never negative, forward + backward + optimizer add up to the step, recompute is measured only
// where modules are checkpointed and offload only where something is offloaded. TimedCommunicator
// (core/sharding/timed_communicator.h) times the waits on collectives, of the groups split from it
// too, and changes no bit of the run. Under the simulator the wall clock is the fibers' (a rank's
// phase includes its peers' work): the figures are checked for their accounting, not their size.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/models/model_zoo.h"
#include "core/sharding/timed_communicator.h"
#include "core/zero3/rank_program.h"
#include "sim/sim_world.h"

namespace zero3 {
namespace {

constexpr int64_t kSteps = 3;

struct PhaseRun {
  std::vector<StepStats> steps;            // rank 0's
  std::vector<OptimizerSlot> final_state;  // rank 0's
};

TrainConfig config_of(int stage, bool checkpointing, bool offload) {
  TrainConfig config;
  config.zero.stage = stage;
  config.gradient_accumulation_steps = 2;
  if (checkpointing) config.checkpoint_modules = {"transformer_block"};
  if (offload) {
    config.zero.offload_optimizer = OffloadDevice::cpu;
    if (stage == 3) config.zero.offload_param = OffloadDevice::cpu;
  }
  return config;
}

// The single-process reference: no communicator, so no communication wait.
PhaseRun run_reference(const TrainConfig& config) {
  BuiltModel built = build_model("gpt-tiny", {.seed = 1, .micro_steps_per_step = config.gradient_accumulation_steps});
  initialize_model(built, 1);
  CountingAllocator memory;
  const RankProgramResult result =
      run_rank_program({.comm = nullptr, .allocator = memory, .kernels = cpu_kernels()}, built,
                       {.config = config, .seed = 1, .steps = kSteps, .global_ranks = 2});
  return {result.steps, result.final_state};
}

// `world` simulated ranks; with `timed`, each rank's communicator is wrapped in a TimedCommunicator
// whose total feeds communication_wait_s.
PhaseRun run_simulated(const TrainConfig& config, int world, bool timed) {
  SimOptions sim_options{.world = world, .seed = 1};
  sim_options.fiber_stack_bytes = 1 << 20;
  PhaseRun run;
  const SimResult result = SimWorld(sim_options).run([&](SimRank& sim) {
    BuiltModel built =
        build_model("gpt-tiny", {.seed = 1, .micro_steps_per_step = config.gradient_accumulation_steps});
    initialize_model(built, 1);
    TimedCommunicator timed_comm(sim.comm());
    RankSeams seams{.comm = timed ? &timed_comm : &sim.comm(), .allocator = sim.allocator(), .kernels = sim.kernels()};
    if (timed) seams.communication_wait_seconds = [&] { return timed_comm.wait_seconds(); };
    const RankProgramResult program = run_rank_program(seams, built, {.config = config, .seed = 1, .steps = kSteps});
    if (sim.rank() == 0) run = {program.steps, program.final_state};
  });
  EXPECT_TRUE(result.all_ok()) << result.summary();
  return run;
}

std::string describe(const PhaseTimes& phases) {
  return "step " + std::to_string(phases.step_s) + " s: forward " + std::to_string(phases.forward_s) + ", backward " +
         std::to_string(phases.backward_s) + " (recompute " + std::to_string(phases.recompute_s) + "), optimizer " +
         std::to_string(phases.optimizer_s) + ", offload " + std::to_string(phases.offload_s) +
         ", communication wait " + std::to_string(phases.communication_wait_s);
}

// What every step of every run satisfies, whatever the trainer and the levers.
void expect_consistent_phases(const PhaseRun& run, const std::string& name, bool checkpointing, bool offload) {
  ASSERT_EQ(run.steps.size(), static_cast<size_t>(kSteps)) << name;
  for (const StepStats& stats : run.steps) {
    const PhaseTimes& p = stats.phases;
    const std::string where = name + ", step " + std::to_string(stats.step) + ": " + describe(p);
    for (const double seconds : {p.step_s, p.forward_s, p.backward_s, p.recompute_s, p.optimizer_s, p.offload_s,
                                 p.communication_wait_s}) {
      EXPECT_GE(seconds, 0.0) << where;
      EXPECT_TRUE(std::isfinite(seconds)) << where;
    }
    EXPECT_GT(p.step_s, 0.0) << where;
    EXPECT_GT(p.forward_s, 0.0) << where;
    EXPECT_GT(p.backward_s, 0.0) << where;
    EXPECT_GT(p.optimizer_s, 0.0) << where;
    // The three laps cover the step: within 5 % or 1 ms.
    const double laps = p.forward_s + p.backward_s + p.optimizer_s;
    EXPECT_NEAR(laps, p.step_s, std::max(0.05 * p.step_s, 1e-3)) << where;
    EXPECT_LE(laps, p.step_s * (1 + 1e-9)) << where;  // consecutive laps inside the step's own clock
    // The parts: recompute within backward, offload and waits within the step.
    EXPECT_LE(p.recompute_s, p.backward_s) << where;
    EXPECT_LE(p.offload_s, p.step_s) << where;
    EXPECT_LE(p.communication_wait_s, p.step_s) << where;
    if (checkpointing) EXPECT_GT(p.recompute_s, 0.0) << where;
    else EXPECT_EQ(p.recompute_s, 0.0) << where;
    if (offload) EXPECT_GT(p.offload_s, 0.0) << where;
    else EXPECT_EQ(p.offload_s, 0.0) << where;
  }
}

TEST(StepPhaseTimes, TheReferenceMeasuresItsPhasesAndRecomputeOnlyWhenCheckpointing) {
  for (const bool checkpointing : {false, true}) {
    const PhaseRun run = run_reference(config_of(0, checkpointing, false));
    const std::string name = std::string("reference") + (checkpointing ? " checkpointing" : "");
    expect_consistent_phases(run, name, checkpointing, false);
    for (const StepStats& stats : run.steps) EXPECT_EQ(stats.phases.communication_wait_s, 0.0) << name;
  }
}

TEST(StepPhaseTimes, DdpAndZeroStagesMeasureRecomputeAndOffloadOnlyWithTheirLevers) {
  struct Case {
    int stage;
    bool checkpointing;
    bool offload;
  };
  for (const Case& c : {Case{0, false, false}, Case{0, true, false}, Case{1, false, true}, Case{2, true, true},
                        Case{3, false, false}, Case{3, true, false}, Case{3, false, true}, Case{3, true, true}}) {
    const std::string name = "stage " + std::to_string(c.stage) + (c.checkpointing ? " checkpointing" : "") +
                             (c.offload ? " offload" : "");
    const PhaseRun run = run_simulated(config_of(c.stage, c.checkpointing, c.offload), 2, false);
    expect_consistent_phases(run, name, c.checkpointing, c.offload);
    // Without a TimedCommunicator nothing measures the waits.
    for (const StepStats& stats : run.steps) EXPECT_EQ(stats.phases.communication_wait_s, 0.0) << name;
  }
}

TEST(StepPhaseTimes, ATimedCommunicatorMeasuresTheWaitsOfEveryGroupAndChangesNoBit) {
  for (const int shard_group : {0, 2}) {  // flat ZeRO-3, and HSDP's two groups split from the world
    TrainConfig config = config_of(3, true, false);
    config.zero.shard_group_size = shard_group;
    const PhaseRun timed = run_simulated(config, 4, true);
    const PhaseRun plain = run_simulated(config, 4, false);
    const std::string name = "W=4 shard group " + std::to_string(shard_group);
    expect_consistent_phases(timed, name, true, false);
    for (const StepStats& stats : timed.steps) {
      EXPECT_GT(stats.phases.communication_wait_s, 0.0) << name << ": " << describe(stats.phases);
    }
    ASSERT_EQ(timed.steps.size(), plain.steps.size());
    for (size_t i = 0; i < timed.steps.size(); ++i) {
      EXPECT_EQ(timed.steps[i].loss, plain.steps[i].loss) << name;
      EXPECT_EQ(timed.steps[i].grad_norm, plain.steps[i].grad_norm) << name;
    }
    ASSERT_EQ(timed.final_state.size(), plain.final_state.size());
    for (size_t id = 0; id < timed.final_state.size(); ++id) {
      const auto a = timed.final_state[id].master.values();
      const auto b = plain.final_state[id].master.values();
      ASSERT_EQ(a.size(), b.size()) << name << " id " << id;
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size_bytes()), 0) << name << ": parameter " << id << " differs";
    }
  }
}

TEST(StepPhaseTimes, GroupsSplitFromATimedCommunicatorAddToItsTotal) {
  SimOptions sim_options{.world = 4, .seed = 1};
  const SimResult result = SimWorld(sim_options).run([&](SimRank& sim) {
    TimedCommunicator timed(sim.comm());
    const CallSite site{.module = "test", .phase = "groups"};
    std::unique_ptr<Communicator> block = timed.split_block(2, site);
    std::unique_ptr<Communicator> across = timed.split_across_blocks(2, site);
    std::unique_ptr<Communicator> group = timed.split(sim.rank() % 2, sim.rank(), site);
    for (Communicator* split : {block.get(), across.get(), group.get()}) {
      ASSERT_NE(dynamic_cast<TimedCommunicator*>(split), nullptr) << "a split is not timed";
      EXPECT_EQ(split->world(), 2);
    }
    // Each blocking call, wait and synchronize adds to the world's total.
    double before = timed.wait_seconds();
    block->barrier(site);
    EXPECT_GT(timed.wait_seconds(), before);
    before = timed.wait_seconds();
    Tensor buffer = Tensor::from_values({2}, {1.0f, static_cast<float>(sim.rank())});
    across->all_reduce_async(buffer, ReduceOp::sum, site)->wait();
    EXPECT_GT(timed.wait_seconds(), before);
    EXPECT_EQ(buffer.values()[0], 2.0f);  // the group's sum, as without the decorator
    before = timed.wait_seconds();
    std::shared_ptr<Work> work = group->barrier_async(site);
    EXPECT_EQ(timed.wait_seconds(), before);  // issuing is not waiting
    work->wait();
    timed.synchronize();
    EXPECT_GT(timed.wait_seconds(), before);
  });
  EXPECT_TRUE(result.all_ok()) << result.summary();
}

}  // namespace
}  // namespace zero3
