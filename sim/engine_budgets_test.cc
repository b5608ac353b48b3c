// The engine's budgets do what the config asks, asserted on its counters rather than inferred from
// equal results: a prefetch bucket that holds whole modules prefetches, none prefetches nothing; a
// persistence threshold above every parameter gathers each once, one below them gathers every use;
// a reuse distance that hits keeps parameters gathered. Equality with DDP holds in every case (an
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

}  // namespace
}  // namespace zero3
