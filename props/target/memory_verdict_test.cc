// memory_growth: the rule over per-rank held and peak bytes, on the shapes measured in healthy and
// leaking runs (PROTOCOL.md "Memory"), and judge_answer reporting it after the numbers agree.
#include "props/target/memory_verdict.h"

#include <gtest/gtest.h>

namespace zero3 {
namespace {

nlohmann::json measured(const nlohmann::json& held, const nlohmann::json& peak) {
  return {{"held_bytes", held}, {"peak_bytes", peak}};
}

TEST(MemoryVerdict, HeldBytesFlatFromTheSecondStepAreHealthyWhateverThePeaksDo) {
  // AdamW's moments arrive in the first step; a late-freed gloo bucket spikes a peak (measured: up to +27 %).
  EXPECT_FALSE(memory_growth(measured({{1000, 3168, 3168, 3168}}, {{2000, 4000, 4000, 4000}})));
  EXPECT_FALSE(memory_growth(measured({{1000, 3168, 3168, 3168, 3168}}, {{2000, 4000, 5000, 4000, 5100}})));
  // A healthy bf16 control rank whose peaks rose twice in a row: held bytes say it keeps nothing.
  EXPECT_FALSE(memory_growth(measured({{900, 12000, 12000, 12000, 12000, 12000}},
                                      {{11324, 12828, 12828, 14642, 16080, 12828}})));
  EXPECT_FALSE(memory_growth(nlohmann::json::object()));  // not measured
}

TEST(MemoryVerdict, HeldBytesGrowingAtEveryStepFromTheSecondOnAreAFindingNamingTheRank) {
  // One gradient clone kept per step on rank 1 (the runners' ZERO3_RUNNER_TEST_LEAK, DeepSpeed: +424 B).
  const auto growth = memory_growth(measured({{1000, 3168, 3168, 3168}, {1000, 3592, 4016, 4440}},
                                             {{2000, 4000, 4000, 4000}, {2000, 4424, 4848, 5272}}));
  ASSERT_TRUE(growth);
  EXPECT_NE(growth->find("rank 1"), std::string::npos) << *growth;
  EXPECT_NE(growth->find("+848 bytes over 2 steps"), std::string::npos) << *growth;
}

TEST(MemoryVerdict, OneStepWithoutGrowthOrAPeakThatFellClearsTheRank) {
  EXPECT_FALSE(memory_growth(measured({{1000, 3000, 3400, 3400, 3800}}, {{2000, 4000, 4400, 4400, 4800}})));
  EXPECT_FALSE(memory_growth(measured({{1000, 3000, 3400, 3800}}, {{2000, 5000, 4400, 4800}})));
  // Fewer than kMemoryStepsMin steps cannot be judged.
  EXPECT_FALSE(memory_growth(measured({{1000, 3000, 3400}}, {{2000, 4000, 4400}})));
}

TEST(MemoryVerdict, ListsThatAreNotPerStepIntegersAreProtocolErrors) {
  EXPECT_THROW(memory_growth(measured({{"a", 1, 2, 3}}, {{1, 2, 3, 4}})), nlohmann::json::exception);
  EXPECT_THROW(memory_growth(measured({{1, 2, 3, 4}}, nlohmann::json::array())), nlohmann::json::exception);
}

}  // namespace
}  // namespace zero3
