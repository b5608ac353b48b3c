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
  EXPECT_FALSE(faults.fire(FaultKind::crash, 1, [] { return std::string("compute"); }));
  EXPECT_TRUE(faults.fire(FaultKind::stall, 2, [] { return std::string("compute"); }));
  ASSERT_EQ(faults.fired().size(), 1u);
  EXPECT_EQ(describe(faults.fired()[0]), "stall on rank 2 at compute");
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

}  // namespace
}  // namespace zero3
