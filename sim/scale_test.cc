// 1024 ranks in one process: shape-only (meta) and zero-count collectives are cheap enough to run
// in a unit test (small lazily committed fiber stacks, no data).
#include <gtest/gtest.h>

#include "sim/sim_world.h"
#include "sim/test_support.h"

namespace zero3 {
namespace {

TEST(SimScale, ThousandTwentyFourRanksCompleteZeroCountAndMetaCollectives) {
  constexpr int kWorld = 1024;
  const int64_t shard_numel = int64_t{1} << 24;  // a 16M-element shard per rank: 64 GiB gathered, as shapes
  const SimResult result = SimWorld(SimOptions{.world = kWorld, .seed = 9}).run([&](SimRank& sim) {
    Tensor empty_shard = Tensor::zeros({0});
    Tensor empty_full = Tensor::zeros({0});
    sim.comm().all_gather(empty_shard, empty_full, call_site("h.0.empty"));
    Tensor shard = Tensor::meta({shard_numel}, DType::bf16);
    Tensor full = Tensor::meta({shard_numel * kWorld}, DType::bf16);
    auto gathered = sim.comm().all_gather_async(shard, full, call_site("h.0", -1, "", {"h.0.w"}));
    sim.advance_compute(1e12);
    gathered->wait();
    sim.comm().reduce_scatter(full, shard, ReduceOp::sum, call_site("h.0", -1, "backward"));
    Tensor norm = Tensor::meta({1});
    sim.comm().all_reduce(norm, ReduceOp::sum, call_site("", -1, "step"));
    sim.comm().barrier(call_site("", -1, "step"));
  });
  ASSERT_TRUE(result.all_ok()) << result.summary();
  EXPECT_EQ(result.event_log()["ranks"].size(), static_cast<size_t>(kWorld));
  // 5 collectives and an exit per rank.
  EXPECT_EQ(result.event_log()["ranks"][kWorld - 1].size(), 6u);
  EXPECT_EQ(result.event_log()["ranks"][kWorld - 1][1]["bytes"], shard_numel * kWorld * 2);
}

}  // namespace
}  // namespace zero3
