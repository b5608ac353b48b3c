// The engine's budgets do what the config asks, asserted on its counters rather than inferred from
// equal results: a prefetch bucket that holds whole modules prefetches, none prefetches nothing; a
// persistence threshold above every parameter gathers each once, one below them gathers every use;
// a reuse distance that hits keeps parameters gathered; prefetches count in the live peak and the
// live budget bounds them. Equality with DDP holds in every case (an
// engine that ignored a budget would still be equal, which is why the counters are asserted).
#include <gtest/gtest.h>

#include "sim/distributed_training.h"

namespace zero3 {
namespace {

constexpr int64_t kDefault = -1;

// The default ZeRO config with the given budgets (kDefault keeps the default).
ZeroConfig budgets(int64_t prefetch_bucket_elements, int64_t max_live_elements, int64_t persistence_threshold,
                   int64_t max_reuse_distance = kDefault) {
  ZeroConfig zero;
  if (max_reuse_distance != kDefault) zero.max_reuse_distance = max_reuse_distance;
  if (prefetch_bucket_elements != kDefault) zero.prefetch_bucket_elements = prefetch_bucket_elements;
  if (max_live_elements != kDefault) zero.max_live_elements = max_live_elements;
  if (persistence_threshold != kDefault) zero.persistence_threshold = persistence_threshold;
  return zero;
}

DistributedRunOptions gpt_run(const ZeroConfig& zero) {
  DistributedRunOptions options;
  options.model = "gpt-tiny";
  options.world = 4;
  options.steps = 3;
  options.config.zero = zero;
  return options;
}

DistributedRunResult run_equal_to_ddp(const DistributedRunOptions& options) {
  const DistributedRunResult zero3 = run_distributed(options);
  EXPECT_TRUE(zero3.sim.all_ok()) << zero3.sim.summary();
  DistributedRunOptions ddp = options;
  ddp.config.zero.stage = 0;
  const StateComparison comparison = compare_runs(zero3, run_distributed(ddp));
  EXPECT_TRUE(comparison.bitwise_equal) << comparison.first_differences;
  return zero3;
}

TEST(EngineBudgets, APrefetchBucketHoldingWholeModulesPrefetchesAndNoneDoesNot) {
  EXPECT_GT(run_equal_to_ddp(gpt_run(budgets(1 << 20, kDefault, 0))).counters.prefetched_params, 0);
  EXPECT_EQ(run_equal_to_ddp(gpt_run(budgets(0, kDefault, 0))).counters.prefetched_params, 0);
}

TEST(EngineBudgets, PersistenceThresholdsAboveAndBelowTheParametersDecideWhatIsGathered) {
  // Reuse distance 0: a sharded parameter is released after each use and gathered again.
  const DistributedRunResult sharded = run_equal_to_ddp(gpt_run(budgets(kDefault, kDefault, 0, 0)));
  const DistributedRunResult persistent =
      run_equal_to_ddp(gpt_run(budgets(kDefault, kDefault, int64_t{1} << 40, 0)));
  // Persistent parameters are gathered once, when the engine starts, and never released; sharded
  // ones again where they were released (the tied embedding and the modules at the forward's end
  // are reused at once by backward, so not every use gathers).
  EXPECT_GT(sharded.counters.gathered_elements, persistent.counters.gathered_elements)
      << "sharded " << sharded.counters.gathered_elements << " vs persistent "
      << persistent.counters.gathered_elements;
}

TEST(EngineBudgets, AReuseDistanceThatHitsKeepsParametersAndSavesGathers) {
  const DistributedRunResult no_reuse = run_equal_to_ddp(gpt_run(budgets(kDefault, kDefault, 0, 0)));
  const DistributedRunResult reuse = run_equal_to_ddp(gpt_run(budgets(kDefault, kDefault, 0, int64_t{1} << 40)));
  EXPECT_LT(reuse.counters.gathered_elements, no_reuse.counters.gathered_elements)
      << "reuse " << reuse.counters.gathered_elements << " vs none " << no_reuse.counters.gathered_elements;
}

// gpt-tiny's largest fetch unit: h.*.mlp.fc, a 32x128 weight and its 128 biases.
constexpr int64_t kLargestModuleElements = 32 * 128 + 128;

TEST(EngineBudgets, PrefetchedGathersCountInTheLivePeakAndTheLiveBudgetBoundsThem) {
  // Persistence 0, reuse distance 0: every module is gathered for each use and released after it.
  // Without prefetch one module is held at a time, so the peak is the largest one.
  const DistributedRunResult one_at_a_time = run_equal_to_ddp(gpt_run(budgets(kDefault, 1, 0, 0)));
  EXPECT_EQ(one_at_a_time.counters.prefetched_params, 0);
  EXPECT_EQ(one_at_a_time.counters.live_elements_peak, kLargestModuleElements);
  // Prefetch holds the next modules' gathers in flight beside the running one: their buffers are
  // allocated, so the peak counts them (it once counted only completed gathers and read the same
  // 4,224 whatever the budget).
  const DistributedRunResult unbounded = run_equal_to_ddp(gpt_run(budgets(kDefault, kDefault, 0, 0)));
  EXPECT_GT(unbounded.counters.prefetched_params, 0);
  EXPECT_GT(unbounded.counters.live_elements_peak, kLargestModuleElements);
  // A live budget between the two: still prefetching, and the peak below the unbounded one.
  constexpr int64_t kLiveBudget = 12'000;
  const DistributedRunResult bounded = run_equal_to_ddp(gpt_run(budgets(kDefault, kLiveBudget, 0, 0)));
  EXPECT_GT(bounded.counters.prefetched_params, 0);
  EXPECT_LT(bounded.counters.live_elements_peak, unbounded.counters.live_elements_peak);
  EXPECT_LE(bounded.counters.live_elements_peak, kLiveBudget)
      << "peaks: bounded " << bounded.counters.live_elements_peak << ", unbounded "
      << unbounded.counters.live_elements_peak;
}

}  // namespace
}  // namespace zero3
