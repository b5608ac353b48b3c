// The fault campaign: on the clean engine every run is a correct result or the specific error of
// a fault that fired (no hang, no silent corruption, no unexplained error), most faulted runs
// train, and each destructive kind shows up as its own error type; with an engine bug that only
// faults expose (an all-gather used before it completes) the campaign is not reliable.
#include "props/fault_campaign.h"

#include <cmath>
#include <functional>

#include <gtest/gtest.h>

namespace zero3 {
namespace {

std::vector<uint64_t> seeds(int n) {
  std::vector<uint64_t> out;
  for (int i = 1; i <= n; ++i) out.push_back(static_cast<uint64_t>(i));
  return out;
}

int64_t count(const FaultCampaign& campaign, FaultOutcome outcome) {
  return campaign.counts[static_cast<size_t>(outcome)];
}

TEST(FaultCampaign, TheCleanEngineGivesACorrectResultOrTheSpecificErrorEveryTime) {
  const FaultCampaign campaign = run_fault_campaign({.fault_seeds = seeds(30)});
  EXPECT_TRUE(campaign.reliable()) << fault_campaign_table(campaign);
  EXPECT_EQ(count(campaign, FaultOutcome::correct) + count(campaign, FaultOutcome::specific_error), 30);
  EXPECT_GE(campaign.runs_with_faults, 25) << "faults fire in nearly every run";
  EXPECT_GT(2 * campaign.faulted_runs_trained, campaign.runs_with_faults)
      << "most faulted runs train\n" << fault_campaign_table(campaign);
}

TEST(FaultCampaign, EachDestructiveKindEndsInItsOwnErrorType) {
  const FaultCampaign crashes = run_fault_campaign({.fault_seeds = seeds(8), .plan = "crash=0.01"});
  const FaultCampaign allocs = run_fault_campaign({.fault_seeds = seeds(8), .plan = "alloc=0.01"});
  EXPECT_TRUE(crashes.reliable() && allocs.reliable());
  EXPECT_EQ(count(crashes, FaultOutcome::specific_error), 8);
  EXPECT_EQ(count(allocs, FaultOutcome::specific_error), 8);
  for (const FaultRunOutcome& run : crashes.runs) EXPECT_EQ(run.error.rfind("RankCrashedError", 0), 0u) << run.error;
  for (const FaultRunOutcome& run : allocs.runs) EXPECT_EQ(run.error.rfind("OutOfMemoryError", 0), 0u) << run.error;
}

// The classifier must hold the whole result, not the losses alone: a fault that corrupts only the
// last update (or one rank's replica, or a moment) trains to the same losses and grad norms.
TEST(FaultCampaign, ACorruptionOnlyInTheFinalParametersOrMomentsIsSilentCorruption) {
  DistributedRunOptions options;
  options.model = "mlp-tiny";
  options.world = 2;
  options.steps = 2;
  const DistributedRunResult fault_free = run_distributed(options);
  ASSERT_TRUE(fault_free.sim.all_ok()) << fault_free.sim.summary();
  EXPECT_EQ(classify_finished_run(fault_free, fault_free).outcome, FaultOutcome::correct);
  const auto corrupted = [&](const std::function<void(DistributedRunResult&)>& corrupt) {
    DistributedRunResult run = fault_free;
    corrupt(run);
    return classify_finished_run(run, fault_free);
  };
  const auto bump = [](const Tensor& values) {
    Tensor copy = values.clone();
    copy.data()[0] = std::nextafter(copy.data()[0], 1e30f);
    return copy;
  };
  const FaultRunOutcome master = corrupted([&](DistributedRunResult& run) {
    run.final_state[0].master = bump(run.final_state[0].master);
    run.final_state_by_rank[0][0].master = run.final_state[0].master;
  });
  EXPECT_EQ(master.outcome, FaultOutcome::silent_corruption);
  EXPECT_NE(master.error.find(fault_free.param_names[0]), std::string::npos) << master.error;
  const FaultRunOutcome moment = corrupted([&](DistributedRunResult& run) {
    run.final_state[1].exp_avg_sq = bump(run.final_state[1].exp_avg_sq);
    run.final_state_by_rank[0][1].exp_avg_sq = run.final_state[1].exp_avg_sq;
  });
  EXPECT_EQ(moment.outcome, FaultOutcome::silent_corruption);
  EXPECT_NE(moment.error.find("exp_avg_sq"), std::string::npos) << moment.error;
  const FaultRunOutcome replica = corrupted([&](DistributedRunResult& run) {
    run.final_state_by_rank[1][0].exp_avg = bump(run.final_state_by_rank[1][0].exp_avg);
  });
  EXPECT_EQ(replica.outcome, FaultOutcome::silent_corruption) << "rank 1's replica differs from rank 0's";
}

TEST(FaultCampaign, ABugOnlyDelaysExposeMakesItUnreliable) {
  const FaultCampaign campaign =
      run_fault_campaign({.fault_seeds = seeds(10), .plan = "late=0.5", .bugs = {"missing-gather-wait"}});
  EXPECT_FALSE(campaign.reliable()) << fault_campaign_table(campaign);
}

}  // namespace
}  // namespace zero3
