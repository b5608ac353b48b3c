// The harness's mutation score: with each injection of props/injections.h switched on, the fuzz
// engine finds a counterexample within a fixed case budget — one that fails with the injection and
// passes without it. Over the same broadcast-trap cases, only the
// `error` placeholder policy never fails silently (the rates are printed).
#include "props/injections.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>

#include "props/fuzzer.h"

namespace zero3 {
namespace {

constexpr int64_t kCasesPerProperty = 500;
constexpr uint64_t kSeed = 20240601;

FuzzReport fuzz_with(const Injection& injection) {
  return run_fuzz({.cases = kCasesPerProperty, .seed = kSeed, .max_ranks = 8, .inject = injection.name,
                   .stop_at_first_failure = true});
}

TEST(Injections, EveryInjectionIsCaughtWithinTheCaseBudget) {
  for (const Injection& injection : all_injections()) {
    const FuzzReport report = fuzz_with(injection);
    const PropertyResult* failure = report.first_failure();
    EXPECT_NE(failure, nullptr) << injection.name << " was not caught in " << report.cases() << " cases";
    if (failure == nullptr) continue;
    const CaseSize size = case_size(failure->counterexample);
    std::printf("%-26s caught by %-20s at case %4lld; shrunk to %lld layers, %lld elements, W=%d (%.1f s)\n",
                injection.name.c_str(), failure->property.c_str(), static_cast<long long>(failure->failing_case),
                static_cast<long long>(size.layers), static_cast<long long>(size.elements),
                failure->counterexample.world, report.seconds);
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
