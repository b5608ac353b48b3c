// Ranks with identical event streams share one simulation (traces/replay/replay.h). What a shared replay
// reports must be what every rank on a fiber of its own gives, bit for bit: the report and its
// summary for Mixtral with the leaf policy at 8 and 64 ranks (two routings, so two engines
// instead of 8 or 64), the timeline at 8, and Mixtral's mismatch without the policy.
#include <gtest/gtest.h>

#include "core/training/train_config.h"
#include "traces/replay/replay.h"
#include "traces/replay/replay_report.h"
#include "traces/replay/timeline.h"

namespace zero3 {
namespace {

Trace mixtral() { return load_trace(std::string(ZERO3_TRACES_DIR) + "/models/mixtral-8x7b.json"); }

// As `zero3 replay mixtral-8x7b.json --ranks W [--config configs/mixtral-leaf.json]` sets it up.
ReplayOptions mixtral_options(int world, bool leaf_policy) {
  ReplayOptions options;
  options.world = world;
  if (leaf_policy) {
    std::vector<std::string> warnings;
    options.config = load_train_config(std::string(ZERO3_TRACES_DIR) + "/configs/mixtral-leaf.json", &warnings);
  } else {
    options.config.bf16 = true;  // the trace's dtype
  }
  options.hardware = default_hardware().profile;
  return options;
}

struct BothWays {
  ShapeReplayResult every_rank;
  ShapeReplayResult shared;
};

BothWays replay_both_ways(const Trace& trace, ReplayOptions options) {
  options.share_identical_ranks = false;
  ShapeReplayResult every_rank = replay_trace(trace, options);
  options.share_identical_ranks = true;
  ShapeReplayResult shared = replay_trace(trace, options);
  return {std::move(every_rank), std::move(shared)};
}

nlohmann::json report_of(const Trace& trace, const ReplayOptions& options, const ShapeReplayResult& result) {
  return replay_report(trace, options.config, default_hardware(), result);
}

// Equal as written (doubles to the bit); on a difference, the JSON patch from one to the other.
void expect_same_json(const nlohmann::json& shared, const nlohmann::json& every_rank) {
  EXPECT_TRUE(shared.dump() == every_rank.dump())
      << "shared vs every rank: " << nlohmann::json::diff(every_rank, shared).dump(1).substr(0, 4000);
}

// The shared replay did share: Mixtral's routing alternates, so every rank runs as rank 0 or 1.
void expect_two_simulations(const ShapeReplayResult& result) {
  ASSERT_EQ(result.simulation, "full");
  for (const RankReplay& rank : result.ranks) {
    EXPECT_EQ(rank.simulated_rank, rank.rank % 2) << "rank " << rank.rank;
    EXPECT_EQ(rank.memory.empty(), rank.rank >= 2) << "rank " << rank.rank << ": only simulated ranks hold a timeline";
  }
}

void expect_the_every_rank_report(int world) {
  const Trace trace = mixtral();
  const ReplayOptions options = mixtral_options(world, /*leaf_policy=*/true);
  const BothWays both = replay_both_ways(trace, options);
  ASSERT_FALSE(both.every_rank.failure.has_value()) << both.every_rank.failure->message;
  for (const RankReplay& rank : both.every_rank.ranks) EXPECT_EQ(rank.simulated_rank, rank.rank);
  expect_two_simulations(both.shared);
  const nlohmann::json expected = report_of(trace, options, both.every_rank);
  const nlohmann::json actual = report_of(trace, options, both.shared);
  ASSERT_EQ(actual.at("memory").at("per_rank").size(), static_cast<size_t>(world));
  expect_same_json(actual, expected);
  EXPECT_EQ(replay_summary(actual), replay_summary(expected));
}

TEST(SharedSimulation, MixtralWithTheLeafPolicyAt8RanksReportsWhatEveryRankOnItsOwnFiberDoes) {
  expect_the_every_rank_report(8);
}

TEST(SharedSimulation, MixtralWithTheLeafPolicyAt64RanksReportsWhatEveryRankOnItsOwnFiberDoes) {
  expect_the_every_rank_report(64);
}

TEST(SharedSimulation, TheTimelineHasEveryRanksTracksAsIfEachHadBeenSimulated) {
  const Trace trace = mixtral();
  const BothWays both = replay_both_ways(trace, mixtral_options(8, /*leaf_policy=*/true));
  const nlohmann::json expected = chrome_trace_json(build_timeline(both.every_rank, "mixtral"));
  const nlohmann::json actual = chrome_trace_json(build_timeline(both.shared, "mixtral"));
  EXPECT_TRUE(actual.dump() == expected.dump()) << "the shared replay's timeline differs";
  EXPECT_EQ(check_chrome_trace(actual), "");
}

TEST(SharedSimulation, MixtralsMismatchIsReportedForEveryRankAsBefore) {
  const Trace trace = mixtral();
  const ReplayOptions options = mixtral_options(8, /*leaf_policy=*/false);
  const BothWays both = replay_both_ways(trace, options);
  ASSERT_TRUE(both.every_rank.failure.has_value());
  ASSERT_TRUE(both.shared.failure.has_value());
  expect_two_simulations(both.shared);
  EXPECT_EQ(both.shared.failure->kind, "collective_mismatch");
  EXPECT_EQ(both.shared.failure->message, both.every_rank.failure->message);
  EXPECT_NE(both.shared.failure->message.find("ranks 0,2,4,6: all_gather"), std::string::npos)
      << both.shared.failure->message;
  EXPECT_EQ(both.shared.exit_code(), both.every_rank.exit_code());
  // The engine's counters stop where each rank failed: the last rank to issue the mismatched
  // collective fails in the issue, the others in the wait after it (counted). Which rank is last
  // is up to the schedule, which has 2 fibers instead of 8; everything else is the same.
  nlohmann::json expected = report_of(trace, options, both.every_rank);
  nlohmann::json actual = report_of(trace, options, both.shared);
  expected.erase("engine_counters");
  actual.erase("engine_counters");
  expect_same_json(actual, expected);
}

Trace trace_from(const char* text) { return read_trace(nlohmann::json::parse(text), "test.json"); }

TEST(SharedSimulation, RanksAreGroupedByTheEventsTheyRunNotByTheirListInTheGroup) {
  // Lists 0 and 2 of the group are the same events: ranks 0 and 2 (and 3 and 5 at 6 ranks) run alike.
  const char* text = R"({"zero3_trace": 1, "world": 3, "modules": [["", "Net"], ["a", "Linear"], ["b", "Linear"]],
    "params": [[0, "a.weight", [4, 4]], [1, "b.weight", [4, 4]]],
    "steps": [{"ranks": 3, "events": [{"per_rank": [[["call", "a"]], [["call", "b"]], [["call", "a"]]]},
                                      ["backward"], ["optimizer_step"]]}]})";
  const Trace trace = trace_from(text);
  EXPECT_EQ(ranks_by_event_stream(trace, 3), (std::vector<std::vector<int>>{{0, 2}, {1}}));
  EXPECT_EQ(ranks_by_event_stream(trace, 6), (std::vector<std::vector<int>>{{0, 2, 3, 5}, {1, 4}}));
  EXPECT_EQ(ranks_by_event_stream(mixtral(), 8), (std::vector<std::vector<int>>{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  const Trace spmd = load_trace(std::string(ZERO3_TRACES_DIR) + "/models/gpt2-124m.json");
  EXPECT_EQ(ranks_by_event_stream(spmd, 4), (std::vector<std::vector<int>>{{0, 1, 2, 3}}));
}

}  // namespace
}  // namespace zero3
