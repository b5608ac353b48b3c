// The harness's mutation score: with each injection of props/injections.h switched on, the fuzz
// engine finds a counterexample within a fixed case budget — one that fails with the injection and
// passes without it — by the property expected to, never by the harness throwing, and no case
// fails without the injection. Over the same broadcast-trap cases, only the
// `error` placeholder policy never fails silently (the rates are printed).
#include "props/injections.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "props/fuzzer.h"
#include "props/injection_table.h"

namespace zero3 {
namespace {

constexpr int64_t kCasesPerProperty = 500;
constexpr uint64_t kSeed = 20240601;

// The property expected to catch each injection (the README's table, from `zero3 fuzz
// --injection-table`): the fuzzer runs the properties in order and stops at the first counterexample,
// so this is the first property whose cases expose the bug. invalidate-without-wait needs a
// rank-divergent case for one seed and an SPMD one for another, so either property may find it.
const std::map<std::string, std::set<std::string>>& expected_catchers() {
  static const std::map<std::string, std::set<std::string>> expected = {
      {"gather-gated-on-numel", {"equivalence"}},
      {"external-not-registered", {"equivalence"}},
      {"bucket-order-by-arrival", {"equivalence"}},
      {"padding-uninitialized", {"equivalence"}},
      {"bucket-exact-size-skipped", {"equivalence"}},
      {"invalidate-without-wait", {"equivalence", "collective-agreement"}},
      {"release-while-in-use", {"equivalence"}},
      {"gas-scale-twice", {"equivalence"}},
      {"unused-params-skipped", {"equivalence"}},
      {"missing-gather-wait", {"equivalence"}},
      {"resume-without-optimizer-state", {"checkpoint-round-trip"}},
      {"placeholder-empty", {"no-silent-failure"}},
      {"placeholder-scalar", {"no-silent-failure"}},
  };
  return expected;
}

TEST(Injections, EveryInjectionIsCaughtByItsPropertyAndNothingFailsWithoutIt) {
  const InjectionTable table = run_injection_table({.seeds = {kSeed}, .cases = kCasesPerProperty, .max_ranks = 8});
  std::printf("%s", injection_table_markdown(table).c_str());
  ASSERT_EQ(table.rows.size(), all_injections().size());
  for (const InjectionRow& row : table.rows) {
    ASSERT_TRUE(expected_catchers().contains(row.injection)) << row.injection << " has no expected property";
    const InjectionSeedResult& result = row.seeds.at(0);
    EXPECT_TRUE(result.caught) << row.injection << " was not caught in " << kCasesPerProperty
                               << " cases per property" << (result.harness_error ? " (only the harness threw)" : "");
    EXPECT_FALSE(result.harness_error) << row.injection << ": " << result.message;
    EXPECT_TRUE(expected_catchers().at(row.injection).contains(result.property))
        << row.injection << " was caught by " << result.property;
    // A case that fails without the injection is a failure of the engine itself, never credited.
    EXPECT_EQ(result.failing_without_injection, 0) << row.injection;
  }
}

TEST(PlaceholderPolicies, OnlyTheErrorPolicyNeverFailsSilently) {
  constexpr int kCases = 200;
  std::map<PlaceholderPolicy, std::map<RunOutcome, int>> outcomes;
  for (int i = 0; i < kCases; ++i) {
    const rc::Random random(kSeed + static_cast<uint64_t>(i));
    const FuzzCase generated = gen_broadcast_trap_case({.max_ranks = 8})(random, i % 100).value();
    for (PlaceholderPolicy policy : {PlaceholderPolicy::error, PlaceholderPolicy::empty, PlaceholderPolicy::scalar}) {
      FuzzCase fuzz_case = generated;
      fuzz_case.config.zero.placeholder = policy;
      outcomes[policy][classify_run(fuzz_case).outcome]++;
    }
  }
  for (auto& [policy, counts] : outcomes) {
    std::printf(
        "placeholder %-6s over %d cases: %3d equal, %3d specific error, %3d silent mismatch (%.1f%%), %d other\n",
        placeholder_policy_name(policy), kCases, counts[RunOutcome::equal], counts[RunOutcome::specific_error],
        counts[RunOutcome::silent_mismatch], 100.0 * counts[RunOutcome::silent_mismatch] / kCases,
        counts[RunOutcome::unspecific_error]);
  }
  EXPECT_EQ(outcomes[PlaceholderPolicy::error][RunOutcome::silent_mismatch], 0);
  EXPECT_GT(outcomes[PlaceholderPolicy::empty][RunOutcome::silent_mismatch], 0);
  EXPECT_GT(outcomes[PlaceholderPolicy::scalar][RunOutcome::silent_mismatch], 0);
}

}  // namespace
}  // namespace zero3
