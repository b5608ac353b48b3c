// Fault plans parse from the CLI's list syntax, reject unknown names with an InputError, and
// switch kinds on per run BUGGIFY-style; the hardware profile parses from JSON.
#include <gtest/gtest.h>

#include "sim/fault_plan.h"
#include "sim/hardware_profile.h"

namespace zero3 {
namespace {

double enabled(const FaultPlan& plan, FaultKind kind) { return plan.enable_probability[static_cast<size_t>(kind)]; }
double fires(const FaultPlan& plan, FaultKind kind) { return plan.fire_probability[static_cast<size_t>(kind)]; }

TEST(FaultPlan, AListSwitchesOnExactlyTheNamedKinds) {
  const FaultPlan plan = FaultPlan::parse("late,crash");
  EXPECT_EQ(enabled(plan, FaultKind::late), 1.0);
  EXPECT_EQ(enabled(plan, FaultKind::crash), 1.0);
  EXPECT_EQ(enabled(plan, FaultKind::reorder), 0.0);
  EXPECT_EQ(enabled(plan, FaultKind::stall), 0.0);
  EXPECT_EQ(enabled(plan, FaultKind::alloc), 0.0);
  EXPECT_TRUE(plan.any());
  EXPECT_FALSE(FaultPlan::parse("none").any());
  EXPECT_FALSE(FaultPlan::parse("").any());
}

TEST(FaultPlan, AllSwitchesOnEveryKindAndProbabilitiesAndBuggifyMarksRoundTrip) {
  const FaultPlan all = FaultPlan::parse("all");
  for (FaultKind kind : {FaultKind::late, FaultKind::reorder, FaultKind::stall, FaultKind::crash, FaultKind::alloc}) {
    EXPECT_EQ(enabled(all, kind), 1.0) << fault_kind_name(kind);
  }
  const FaultPlan plan = FaultPlan::parse("stall?=0.5,alloc=0.125");
  EXPECT_EQ(enabled(plan, FaultKind::stall), 0.5);
  EXPECT_EQ(fires(plan, FaultKind::stall), 0.5);
  EXPECT_EQ(fires(plan, FaultKind::alloc), 0.125);
  EXPECT_EQ(plan.to_string(), "stall?=0.5,alloc=0.125");
  EXPECT_EQ(FaultPlan::parse(plan.to_string()).to_string(), plan.to_string());
}

TEST(FaultPlan, UnknownNamesAndBadProbabilitiesAreInputErrorsNamingTheItem) {
  try {
    FaultPlan::parse("late,lat");
    FAIL() << "an unknown fault was accepted";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("unknown fault 'lat'"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("late, reorder, stall, crash, alloc"), std::string::npos);
  }
  EXPECT_THROW(FaultPlan::parse("crash=2"), InputError);
  EXPECT_THROW(FaultPlan::parse("crash=x"), InputError);
  EXPECT_THROW(FaultPlan::parse("late,,crash"), InputError);
}

TEST(FaultInjector, BuggifySwitchesEachKindOnInSomeRunsAndOffInOthers) {
  const FaultPlan plan = FaultPlan::parse("all?");
  for (FaultKind kind : {FaultKind::late, FaultKind::reorder, FaultKind::stall, FaultKind::crash, FaultKind::alloc}) {
    int on = 0;
    for (uint64_t seed = 0; seed < 64; ++seed) on += FaultInjector(plan, seed, nullptr).enabled(kind);
    EXPECT_GT(on, 0) << fault_kind_name(kind);
    EXPECT_LT(on, 64) << fault_kind_name(kind);
  }
}

TEST(FaultInjector, AFiredFaultIsListedWithKindRankAndSite) {
  FaultInjector faults(FaultPlan::parse("stall=1"), 0, nullptr);
  EXPECT_FALSE(faults.fire(FaultKind::crash, 1, "compute", [] { return std::string("compute"); }));
  EXPECT_TRUE(faults.fire(FaultKind::stall, 2, "compute", [] { return std::string("compute"); }));
  ASSERT_EQ(faults.fired().size(), 1u);
  EXPECT_EQ(describe(faults.fired()[0]), "stall on rank 2 at compute");
}

TEST(FaultPlan, ASiteFilterAimsAKindAtOneClassOfSiteAndRoundTrips) {
  const FaultPlan plan = FaultPlan::parse("crash?@checkpoint=0.5,late");
  EXPECT_EQ(plan.site_filter[static_cast<size_t>(FaultKind::crash)], "checkpoint");
  EXPECT_EQ(plan.site_filter[static_cast<size_t>(FaultKind::late)], "");
  EXPECT_EQ(plan.to_string(), "late=0.25,crash?@checkpoint=0.5");
  EXPECT_EQ(FaultPlan::parse(plan.to_string()).to_string(), plan.to_string());
  // Site classes hold spaces; only the prefix has to match.
  FaultInjector faults(FaultPlan::parse("crash@checkpoint=1"), 0, nullptr);
  EXPECT_FALSE(faults.fire(FaultKind::crash, 0, "gather", [] { return std::string("all_gather #1"); }));
  EXPECT_FALSE(faults.fire(FaultKind::crash, 0, "compute", [] { return std::string("compute"); }));
  EXPECT_TRUE(faults.fire(FaultKind::crash, 1, "checkpoint write", [] { return std::string("rank_00001.bin"); }));
  ASSERT_EQ(faults.fired().size(), 1u);
  EXPECT_EQ(faults.fired()[0].site_class, "checkpoint write");
  try {
    FaultPlan::parse("crash@=0.5");
    FAIL() << "an empty site was accepted";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("empty site after '@' in 'crash@=0.5'"), std::string::npos) << error.what();
  }
}

TEST(HardwareProfile, ParsesKnownKeysAndRejectsUnknownOrNonPositiveOnes) {
  const HardwareProfile profile = HardwareProfile::from_json(nlohmann::json::parse(R"({"latency_s": 2e-6})"));
  EXPECT_EQ(profile.latency_s, 2e-6);
  EXPECT_EQ(profile.peak_flops, HardwareProfile{}.peak_flops);
  EXPECT_THROW(HardwareProfile::from_json(nlohmann::json::parse(R"({"latency": 1})")), InputError);
  EXPECT_THROW(HardwareProfile::from_json(nlohmann::json::parse(R"({"peak_flops": 0})")), InputError);
}

TEST(HardwareProfile, RingCollectivesFollowTheAlphaBetaModel) {
  const HardwareProfile profile{.peak_flops = 1e12, .bandwidth_bytes_per_s = 1e9, .latency_s = 1e-6};
  // 4 ranks, 4000 bytes: 3 steps of latency + 3/4 * 4000 B / 1 GB/s.
  EXPECT_DOUBLE_EQ(collective_time_s(profile, CollectiveOp::all_gather, 4000, 4), 3e-6 + 3e-6);
  EXPECT_DOUBLE_EQ(collective_time_s(profile, CollectiveOp::all_reduce, 4000, 4), 2 * (3e-6 + 3e-6));
  EXPECT_EQ(collective_time_s(profile, CollectiveOp::all_gather, 4000, 1), 0.0);
  EXPECT_DOUBLE_EQ(compute_time_s(profile, 5e11), 0.5);
}

// Two levels: a group inside one node rides the intra-node link, one that spans nodes the world's
// link; the world's own collectives keep the flat price whatever the levels say.
TEST(HardwareProfile, AGroupIsPricedOnTheIntraNodeLinkOnlyWhenAllItsRanksShareANode) {
  HardwareProfile profile{.peak_flops = 1e12, .bandwidth_bytes_per_s = 1e9, .latency_s = 1e-6};
  profile.intra_node_bandwidth_bytes_per_s = 8e9;
  profile.intra_node_latency_s = 1e-7;
  profile.ranks_per_node = 8;
  EXPECT_EQ(block_level(profile, 8), LinkLevel::intra_node);
  EXPECT_EQ(block_level(profile, 4), LinkLevel::intra_node);
  EXPECT_EQ(block_level(profile, 1), LinkLevel::intra_node);
  EXPECT_EQ(block_level(profile, 16), LinkLevel::inter_node);  // larger than a node
  EXPECT_EQ(block_level(profile, 3), LinkLevel::inter_node);   // ranks 6..8 straddle nodes 0 and 1
  EXPECT_EQ(link_level(profile, {8, 9, 15}), LinkLevel::intra_node);
  EXPECT_EQ(link_level(profile, {0, 8}), LinkLevel::inter_node);  // one rank of each node: across blocks
  EXPECT_EQ(world_level(profile, 8), LinkLevel::intra_node);
  EXPECT_EQ(world_level(profile, 16), LinkLevel::inter_node);
  EXPECT_STREQ(link_level_name(LinkLevel::intra_node), "intra-node");
  EXPECT_STREQ(link_level_name(LinkLevel::inter_node), "inter-node");
  // 4 ranks, 4000 bytes: 3 steps of latency + 3/4 of the bytes over the link.
  EXPECT_DOUBLE_EQ(group_collective_time_s(profile, CollectiveOp::all_gather, 4000, 4, LinkLevel::intra_node),
                   3e-7 + 3000 / 8e9);
  EXPECT_DOUBLE_EQ(group_collective_time_s(profile, CollectiveOp::all_gather, 4000, 4, LinkLevel::inter_node),
                   collective_time_s(profile, CollectiveOp::all_gather, 4000, 4));
  EXPECT_DOUBLE_EQ(collective_time_s(profile, CollectiveOp::all_gather, 4000, 4), 3e-6 + 3e-6);
  // The default has one rank per node: every group of two or more is on the one flat link.
  EXPECT_EQ(block_level(HardwareProfile{}, 2), LinkLevel::inter_node);
  const HardwareProfile parsed = HardwareProfile::from_json(
      nlohmann::json::parse(R"({"intra_node_bandwidth_bytes_per_s": 4e11, "ranks_per_node": 8})"));
  EXPECT_EQ(parsed.ranks_per_node, 8);
  EXPECT_EQ(parsed.intra_node_bandwidth_bytes_per_s, 4e11);
  EXPECT_EQ(HardwareProfile::from_json(parsed.to_json()).to_json(), parsed.to_json());
  EXPECT_THROW(HardwareProfile::from_json(nlohmann::json::parse(R"({"ranks_per_node": 2.5})")), InputError);
}

}  // namespace
}  // namespace zero3
