// Ranks that make the same calls can share a fiber (SimOptions::rank_groups): the run must then
// report what every rank on a fiber of its own reports — clocks, collective logs, and the mismatch
// and deadlock texts that list ranks — while running one program per group.
#include <string>

#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "sim/rank_groups.h"
#include "sim/sim_world.h"
#include "sim/test_support.h"

namespace zero3 {
namespace {

const std::vector<std::vector<int>> kByParity = {{0, 2, 4, 6}, {1, 3, 5, 7}};

// Even and odd ranks compute differently and gather different modules' shapes (meta: no data).
void parity_program(SimRank& sim, bool odd_module_differs) {
  const bool odd = sim.rank() % 2 == 1;
  sim.advance_compute(odd ? 3e12 : 1e12);
  const std::string module = odd && odd_module_differs ? "h.0.expert1" : "h.0.expert0";
  Tensor shard = Tensor::meta({64});
  Tensor full = Tensor::meta({64 * sim.world()});
  sim.comm().all_gather(shard, full, call_site(module, 0, "forward", {module + ".weight"}));
  sim.advance_compute(odd ? 1e12 : 2e12);
  Tensor grads = Tensor::meta({128 * sim.world()});
  Tensor grad_shard = Tensor::meta({128});
  sim.comm().reduce_scatter(grads, grad_shard, ReduceOp::sum, call_site("h.0", 0, "backward"));
}

struct Runs {
  SimResult every_rank;
  SimResult shared;
};

Runs run_both_ways(const std::function<void(SimRank&)>& program, std::vector<double>* shared_clocks = nullptr,
                   std::vector<double>* every_rank_clocks = nullptr) {
  // Without jitter: its draws share the schedule's stream with the tie-breaks, which depend on how
  // many fibers there are, so a jittered shared run is another sample rather than the same one.
  SimOptions options{.world = 8, .seed = 3};
  options.jitter_fraction = 0.0;
  SimWorld every_rank(options);
  SimResult every_rank_result = every_rank.run(program);
  options.rank_groups = kByParity;
  SimWorld shared(options);
  SimResult shared_result = shared.run(program);
  for (int rank = 0; rank < 8; ++rank) {
    if (shared_clocks) shared_clocks->push_back(shared.rank(rank).now_s());
    if (every_rank_clocks) every_rank_clocks->push_back(every_rank.rank(rank).now_s());
  }
  return {std::move(every_rank_result), std::move(shared_result)};
}

TEST(SharedFibers, RankGroupsMustPartitionTheRanksInRankOrder) {
  const RankGroups groups(8, kByParity);
  EXPECT_EQ(groups.tasks(), 2);
  EXPECT_EQ(groups.rank_of(1), 1);
  EXPECT_EQ(groups.task_of(6), 0);
  EXPECT_EQ(groups.by_rank(std::vector<char>{'e', 'o'}), (std::vector<char>{'e', 'o', 'e', 'o', 'e', 'o', 'e', 'o'}));
  EXPECT_TRUE(RankGroups(3).every_rank_alone());
  EXPECT_THROW(RankGroups(4, {{0, 1}, {1, 2, 3}}), InputError);  // rank 1 twice
  EXPECT_THROW(RankGroups(4, {{0, 1}, {2}}), InputError);         // rank 3 in none
  EXPECT_THROW(RankGroups(4, {{1, 3}, {0, 2}}), InputError);      // not by lowest rank
  EXPECT_THROW(RankGroups(4, {{0, 2, 1}, {3}}), InputError);      // not ascending
}

TEST(SharedFibers, ACleanRunHasEveryRanksClockAndCollectivesWithOneFiberPerGroup) {
  std::vector<double> shared_clocks, every_rank_clocks;
  const Runs runs = run_both_ways([](SimRank& sim) { parity_program(sim, false); }, &shared_clocks, &every_rank_clocks);
  ASSERT_TRUE(runs.every_rank.all_ok()) << runs.every_rank.summary();
  ASSERT_TRUE(runs.shared.all_ok()) << runs.shared.summary();
  EXPECT_EQ(runs.shared.ranks.size(), 8u);
  EXPECT_EQ(shared_clocks, every_rank_clocks);
  // One log per fiber; each is the log of the rank the fiber ran as, timed and sized at world 8.
  const nlohmann::json& shared_logs = runs.shared.event_log().at("ranks");
  const nlohmann::json& every_rank_logs = runs.every_rank.event_log().at("ranks");
  ASSERT_EQ(shared_logs.size(), 2u);
  ASSERT_EQ(every_rank_logs.size(), 8u);
  EXPECT_EQ(shared_logs[0], every_rank_logs[0]);
  EXPECT_EQ(shared_logs[1], every_rank_logs[1]);
  EXPECT_EQ(shared_logs[0][0].at("bytes").get<int64_t>(), 64 * 8 * 4);
  // The odd ranks computed longer before the gather: it starts when they issue it.
  EXPECT_GT(shared_logs[1][0].at("issue_s").get<double>(), shared_logs[0][0].at("issue_s").get<double>());
  EXPECT_EQ(shared_logs[0][0].at("start_s"), shared_logs[1][0].at("issue_s"));
}

TEST(SharedFibers, AMismatchListsEveryRankAsWhenEachRanAlone) {
  const Runs runs = run_both_ways([](SimRank& sim) { parity_program(sim, true); });
  ASSERT_FALSE(runs.shared.all_ok());
  EXPECT_EQ(runs.shared.root_cause(), runs.every_rank.root_cause());
  EXPECT_NE(runs.shared.root_cause().find("ranks 1,3,5,7: all_gather f32 count=64 meta at module 'h.0.expert1'"),
            std::string::npos)
      << runs.shared.root_cause();
  ASSERT_EQ(runs.shared.ranks.size(), 8u);
  for (const RankOutcome& outcome : runs.shared.ranks) {
    EXPECT_THROW(std::rethrow_exception(outcome.exception), CollectiveMismatchError) << outcome.error;
  }
}

TEST(SharedFibers, ADeadlockNamesEveryRankAsWhenEachRanAlone) {
  const Runs runs = run_both_ways([](SimRank& sim) {
    if (sim.rank() % 2 == 1) return;  // the odd ranks exit before the gather the even ones wait in
    parity_program(sim, false);
  });
  ASSERT_FALSE(runs.shared.all_ok());
  EXPECT_EQ(runs.shared.root_cause(), runs.every_rank.root_cause());
  EXPECT_NE(runs.shared.root_cause().find("ranks 1,3,5,7 exited while ranks 0,2,4,6 wait in all_gather #0"),
            std::string::npos)
      << runs.shared.root_cause();
  EXPECT_EQ(runs.shared.exit_code(), kExitLiveness);
}

TEST(SharedFibers, ASharedFiberMayNotMoveDataTheRanksItStandsForDoNotHave) {
  SimOptions options{.world = 4, .seed = 1};
  options.rank_groups = {{0, 1}, {2, 3}};
  const SimResult result = SimWorld(options).run([](SimRank& sim) {
    Tensor shard = Tensor::zeros({4});
    Tensor full = Tensor::zeros({16});
    sim.comm().all_gather(shard, full, call_site("h.0"));
  });
  ASSERT_FALSE(result.all_ok());
  EXPECT_NE(result.root_cause().find("only meta collectives are shared"), std::string::npos) << result.root_cause();
  options.faults = FaultPlan::parse("crash");
  EXPECT_THROW(SimWorld{options}, InputError);
}

}  // namespace
}  // namespace zero3
