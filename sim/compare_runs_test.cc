// compare_runs, the bitwise oracle every equivalence check rests on: losses compare as doubles,
// and every rank's replica is held to rank 0, so neither a sub-float loss difference nor a rank
// that diverged behind an intact rank 0 passes as equal.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sim/distributed_training.h"

namespace zero3 {
namespace {

OptimizerSlot slot(float master) {
  return {Tensor::from_values({2}, {master, 1.0f}), Tensor::zeros({2}), Tensor::zeros({2})};
}

// A run of `world` identical replicas, two steps.
DistributedRunResult replicated_run(int world) {
  DistributedRunResult run;
  run.param_names = {"w"};
  run.steps = {{.step = 0, .loss = 2.5, .grad_norm = 1.0f}, {.step = 1, .loss = 2.25, .grad_norm = 0.5f}};
  run.final_state = {slot(0.75f)};
  for (int rank = 0; rank < world; ++rank) {
    run.steps_by_rank.push_back(run.steps);
    std::vector<OptimizerSlot> state = {slot(0.75f)};
    run.final_state_by_rank.push_back(state);
  }
  return run;
}

TEST(CompareRuns, IdenticalRunsAreBitwiseEqual) {
  const StateComparison comparison = compare_runs(replicated_run(3), replicated_run(3));
  EXPECT_TRUE(comparison.bitwise_equal) << comparison.first_differences;
  EXPECT_EQ(comparison.wrong, 0);
}

TEST(CompareRuns, LossesDifferingBelowFloatPrecisionAreADifference) {
  DistributedRunResult other = replicated_run(1);
  other.steps[1].loss = 2.25 + 1e-12;  // the same float, not the same double
  ASSERT_EQ(static_cast<float>(other.steps[1].loss), 2.25f);
  const StateComparison comparison = compare_runs(replicated_run(1), other);
  EXPECT_FALSE(comparison.bitwise_equal);
  EXPECT_EQ(comparison.wrong, 1);
  EXPECT_NE(comparison.first_differences.find("loss[1]"), std::string::npos) << comparison.first_differences;
}

TEST(CompareRuns, ARankWhoseReplicaDivergedBehindAnIntactRankZeroIsADifference) {
  DistributedRunResult diverged = replicated_run(3);
  diverged.final_state_by_rank[2][0] = slot(0.5f);
  const StateComparison state = compare_runs(replicated_run(3), diverged);
  EXPECT_FALSE(state.bitwise_equal);
  EXPECT_NE(state.first_differences.find("second run rank 2 vs rank 0: w[0]"), std::string::npos)
      << state.first_differences;

  DistributedRunResult loss_diverged = replicated_run(3);
  loss_diverged.steps_by_rank[1][0].loss = 2.0;
  const StateComparison loss = compare_runs(loss_diverged, replicated_run(3));
  EXPECT_FALSE(loss.bitwise_equal);
  EXPECT_NE(loss.first_differences.find("first run rank 1 vs rank 0: loss[0]"), std::string::npos)
      << loss.first_differences;
}

}  // namespace
}  // namespace zero3
