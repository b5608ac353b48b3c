// Every collective at W in {1, 2, 3, 7, 16}, blocking and async, counts including 0 and counts not
// divisible by W, against values computed independently from (seed, rank, index).
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/tensor/dtype.h"
#include "sim/sim_world.h"
#include "sim/test_support.h"

namespace zero3 {
namespace {

constexpr uint64_t kSeed = 11;

std::vector<int64_t> counts_for(int world) { return {0, 1, 3, world + 1, 2 * world + 3, 37}; }

// Runs `program` on `world` ranks and returns, per rank, the number of wrong elements it counted.
std::vector<int64_t> run_counting_wrong(int world, const std::function<int64_t(SimRank&)>& program) {
  std::vector<int64_t> wrong(static_cast<size_t>(world), -1);
  const SimResult result = SimWorld(SimOptions{.world = world, .seed = kSeed}).run([&](SimRank& sim) {
    wrong[static_cast<size_t>(sim.rank())] = program(sim);
  });
  EXPECT_TRUE(result.all_ok()) << result.summary();
  return wrong;
}

int64_t wrong_gathered(const Tensor& recv, int world, int64_t count) {
  int64_t wrong = 0;
  for (int block = 0; block < world; ++block) {
    for (int64_t j = 0; j < count; ++j) wrong += recv.data()[block * count + j] != test_value(kSeed, block, j);
  }
  return wrong;
}

// The reduction of block `block` in rank order, as the simulator must compute it.
float expected_reduction(ReduceOp op, int world, int64_t index) {
  float result = test_value(kSeed, 0, index);
  for (int rank = 1; rank < world; ++rank) {
    const float value = test_value(kSeed, rank, index);
    result = op == ReduceOp::sum ? result + value : std::max(result, value);
  }
  return result;
}

class CollectivesAtWorld : public ::testing::TestWithParam<int> {};

TEST_P(CollectivesAtWorld, AllGatherPutsRankIBlockAtITimesCountOnEveryRank) {
  const int world = GetParam();
  for (int64_t count : counts_for(world)) {
    const auto wrong = run_counting_wrong(world, [&](SimRank& sim) {
      Tensor send = test_tensor(kSeed, sim.rank(), count);
      Tensor recv = Tensor::zeros({count * world});
      sim.comm().all_gather(send, recv, call_site("test.gather"));
      return wrong_gathered(recv, world, count);
    });
    for (int rank = 0; rank < world; ++rank) EXPECT_EQ(wrong[rank], 0) << "rank " << rank << " count " << count;
  }
}

TEST_P(CollectivesAtWorld, ReduceScatterGivesRankIItsBlockReducedInRankOrder) {
  const int world = GetParam();
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max}) {
    for (int64_t count : counts_for(world)) {
      const auto wrong = run_counting_wrong(world, [&](SimRank& sim) {
        Tensor send = test_tensor(kSeed, sim.rank(), count * world);
        Tensor recv = Tensor::zeros({count});
        sim.comm().reduce_scatter(send, recv, op, call_site("test.scatter"));
        int64_t errors = 0;
        for (int64_t j = 0; j < count; ++j) {
          errors += recv.data()[j] != expected_reduction(op, world, sim.rank() * count + j);
        }
        return errors;
      });
      for (int rank = 0; rank < world; ++rank) {
        EXPECT_EQ(wrong[rank], 0) << "rank " << rank << " count " << count << " op " << reduce_op_name(op);
      }
    }
  }
}

TEST_P(CollectivesAtWorld, AllReduceGivesEveryRankTheRankOrderedReductionInPlace) {
  const int world = GetParam();
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max}) {
    for (int64_t count : counts_for(world)) {
      const auto wrong = run_counting_wrong(world, [&](SimRank& sim) {
        Tensor buffer = test_tensor(kSeed, sim.rank(), count);
        sim.comm().all_reduce(buffer, op, call_site("test.all_reduce"));
        int64_t errors = 0;
        for (int64_t j = 0; j < count; ++j) errors += buffer.data()[j] != expected_reduction(op, world, j);
        return errors;
      });
      for (int rank = 0; rank < world; ++rank) EXPECT_EQ(wrong[rank], 0) << "rank " << rank << " count " << count;
    }
  }
}

TEST_P(CollectivesAtWorld, BroadcastCopiesTheRootBufferToEveryRank) {
  const int world = GetParam();
  for (int root : {0, world / 2, world - 1}) {
    for (int64_t count : counts_for(world)) {
      const auto wrong = run_counting_wrong(world, [&](SimRank& sim) {
        Tensor buffer = test_tensor(kSeed, sim.rank(), count);
        sim.comm().broadcast(buffer, root, call_site("test.broadcast"));
        int64_t errors = 0;
        for (int64_t j = 0; j < count; ++j) errors += buffer.data()[j] != test_value(kSeed, root, j);
        return errors;
      });
      for (int rank = 0; rank < world; ++rank) EXPECT_EQ(wrong[rank], 0) << "root " << root << " count " << count;
    }
  }
}

TEST_P(CollectivesAtWorld, AsyncCollectivesIssuedTogetherAllCompleteCorrectlyAfterTheirWaits) {
  const int world = GetParam();
  const int64_t count = world + 2;
  const auto wrong = run_counting_wrong(world, [&](SimRank& sim) {
    Tensor shard = test_tensor(kSeed, sim.rank(), count);
    Tensor gathered = Tensor::zeros({count * world});
    Tensor grads = test_tensor(kSeed, sim.rank(), count * world);
    Tensor grad_shard = Tensor::zeros({count});
    Tensor norm = test_tensor(kSeed, sim.rank(), count);
    Tensor weights = test_tensor(kSeed, sim.rank(), count);
    std::vector<std::shared_ptr<Work>> works = {
        sim.comm().all_gather_async(shard, gathered, call_site("async.gather")),
        sim.comm().reduce_scatter_async(grads, grad_shard, ReduceOp::sum, call_site("async.scatter")),
        sim.comm().all_reduce_async(norm, ReduceOp::sum, call_site("async.all_reduce")),
        sim.comm().broadcast_async(weights, 0, call_site("async.broadcast")),
        sim.comm().barrier_async(call_site("async.barrier")),
    };
    sim.advance_compute(1e6);
    for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->wait();
    for (const auto& work : works) EXPECT_TRUE(work->done());
    int64_t errors = wrong_gathered(gathered, world, count);
    for (int64_t j = 0; j < count; ++j) {
      errors += grad_shard.data()[j] != expected_reduction(ReduceOp::sum, world, sim.rank() * count + j);
      errors += norm.data()[j] != expected_reduction(ReduceOp::sum, world, j);
      errors += weights.data()[j] != test_value(kSeed, 0, j);
    }
    return errors;
  });
  for (int rank = 0; rank < world; ++rank) EXPECT_EQ(wrong[rank], 0) << "rank " << rank;
}

INSTANTIATE_TEST_SUITE_P(Worlds, CollectivesAtWorld, ::testing::Values(1, 2, 3, 7, 16),
                         [](const ::testing::TestParamInfo<int>& world) { return "W" + std::to_string(world.param); });

TEST(SimCollectives, Bf16SumsRoundAfterEveryRankInRankOrder) {
  const int world = 5;
  // 256 + 1 + 1 + ... is 256 in bf16 at every step (the ulp at 256 is 2), but 260 if summed exactly.
  const std::vector<float> per_rank = {256.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  const auto wrong = run_counting_wrong(world, [&](SimRank& sim) {
    Tensor buffer = Tensor::full({3}, per_rank[static_cast<size_t>(sim.rank())], DType::bf16);
    sim.comm().all_reduce(buffer, ReduceOp::sum, call_site("bf16"));
    float expected = per_rank[0];
    for (int rank = 1; rank < world; ++rank) expected = round_to_bf16(expected + per_rank[static_cast<size_t>(rank)]);
    int64_t errors = 0;
    for (float value : buffer.to_floats()) errors += value != expected;
    return errors + (expected != 256.0f);
  });
  for (int rank = 0; rank < world; ++rank) EXPECT_EQ(wrong[rank], 0) << "rank " << rank;
}

TEST(SimCollectives, InPlaceAllGatherAtWorldOneKeepsItsInput) {
  const auto wrong = run_counting_wrong(1, [&](SimRank& sim) {
    Tensor buffer = test_tensor(kSeed, 0, 9);
    sim.comm().all_gather(buffer, buffer, call_site("in_place"));
    return wrong_gathered(buffer, 1, 9);
  });
  EXPECT_EQ(wrong[0], 0);
}

TEST(SimCollectives, MetaCollectivesMoveNoDataButAreMatchedTimedAndRecorded) {
  const int world = 4;
  SimWorld sim_world(SimOptions{.world = world, .seed = kSeed});
  const SimResult result = sim_world.run([&](SimRank& sim) {
    Tensor shard = Tensor::meta({int64_t{1} << 30});
    Tensor full = Tensor::meta({(int64_t{1} << 30) * world});
    sim.comm().all_gather(shard, full, call_site("h.0", 3, "", {"h.0.w"}));
  });
  ASSERT_TRUE(result.all_ok()) << result.summary();
  for (int rank = 0; rank < world; ++rank) {
    const nlohmann::json& event = result.event_log()["ranks"][rank][0];
    EXPECT_EQ(event["op"], "all_gather");
    EXPECT_EQ(event["meta"], true);
    EXPECT_EQ(event["bytes"], (int64_t{1} << 32) * world);
    EXPECT_EQ(event["module"], "h.0");
    EXPECT_EQ(event["params"][0], "h.0.w");
    EXPECT_GT(event["end_s"].get<double>(), event["start_s"].get<double>());
  }
}

TEST(SimCollectives, WrongBufferSizesAreShapeErrorsNamingTheOpAndTheExpectedSize) {
  const SimResult result = SimWorld(SimOptions{.world = 3}).run([&](SimRank& sim) {
    Tensor send = Tensor::zeros({4});
    Tensor recv = Tensor::zeros({sim.rank() == 1 ? 11 : 12});
    sim.comm().all_gather(send, recv, call_site("h.1"));
  });
  ASSERT_FALSE(result.all_ok());
  EXPECT_EQ(result.root_cause_rank, 1);
  EXPECT_NE(result.root_cause().find("all_gather on rank 1"), std::string::npos) << result.root_cause();
  EXPECT_NE(result.root_cause().find("expected send.numel() * world = 4 * 3 = 12"), std::string::npos)
      << result.root_cause();
  EXPECT_THROW(std::rethrow_exception(result.ranks[1].exception), ShapeError);
  for (int rank : {0, 2}) {
    EXPECT_THROW(std::rethrow_exception(result.ranks[static_cast<size_t>(rank)].exception), PeerFailureError);
  }
}

TEST(SimCollectives, SynchronizeWaitsForEveryCollectiveTheRankIssued) {
  const int world = 3;
  std::vector<int64_t> wrong(world, -1);
  std::vector<int> done_after_synchronize(world, -1);
  const SimResult result = SimWorld(SimOptions{.world = world, .seed = kSeed}).run([&](SimRank& sim) {
    Tensor send = test_tensor(kSeed, sim.rank(), 5);
    Tensor first = Tensor::zeros({5 * world});
    Tensor second = Tensor::zeros({5 * world});
    auto first_work = sim.comm().all_gather_async(send, first, call_site("test.first"));
    auto second_work = sim.comm().all_gather_async(send, second, call_site("test.second"));
    sim.comm().synchronize();
    done_after_synchronize[static_cast<size_t>(sim.rank())] = first_work->done() && second_work->done();
    wrong[static_cast<size_t>(sim.rank())] = wrong_gathered(first, world, 5) + wrong_gathered(second, world, 5);
  });
  ASSERT_TRUE(result.all_ok()) << result.summary();
  for (int rank = 0; rank < world; ++rank) {
    EXPECT_EQ(done_after_synchronize[static_cast<size_t>(rank)], 1) << "rank " << rank;
    EXPECT_EQ(wrong[static_cast<size_t>(rank)], 0) << "rank " << rank;
  }
}

TEST(SimCollectives, AbortFailsThePeersWaitingInACollectiveWithAPeerFailureNamingTheAbortingRank) {
  const SimResult result = SimWorld(SimOptions{.world = 3}).run([&](SimRank& sim) {
    Tensor buffer = Tensor::zeros({4});
    if (sim.rank() == 2) {
      sim.comm().abort("its data loader failed");
      return;  // returns normally: only abort() can have stopped the others
    }
    sim.comm().all_reduce(buffer, ReduceOp::sum, call_site("h.0"));
  });
  ASSERT_FALSE(result.all_ok());
  for (int rank : {0, 1}) {
    try {
      std::rethrow_exception(result.ranks[static_cast<size_t>(rank)].exception);
      ADD_FAILURE() << "rank " << rank << " did not fail";
    } catch (const PeerFailureError& error) {
      EXPECT_EQ(error.failed_rank(), 2);
      EXPECT_NE(std::string(error.what()).find("rank 2 aborted the world: its data loader failed"),
                std::string::npos)
          << error.what();
    }
  }
}

TEST(SimClock, ComputeAdvancesByFlopsOverPeakAndACollectiveStartsWhenTheLastRankIssues) {
  SimOptions options{.world = 2, .jitter_fraction = 0.0};
  options.hardware = {.peak_flops = 1e12, .bandwidth_bytes_per_s = 1e9, .latency_s = 1e-6};
  SimWorld sim_world(options);
  const SimResult result = sim_world.run([&](SimRank& sim) {
    sim.advance_compute(sim.rank() == 0 ? 1e9 : 3e9);  // 1 ms and 3 ms
    Tensor shard = Tensor::zeros({250});
    Tensor full = Tensor::zeros({500});
    sim.comm().all_gather(shard, full, call_site("clock"));
  });
  ASSERT_TRUE(result.all_ok()) << result.summary();
  // 2000 bytes over 2 ranks: 1 us latency + 1/2 * 2000 B / 1 GB/s = 2 us, starting at 3 ms.
  const double expected_end_s = 3e-3 + 1e-6 + 1e-6;
  for (int rank = 0; rank < 2; ++rank) {
    const nlohmann::json& event = result.event_log()["ranks"][rank][0];
    EXPECT_DOUBLE_EQ(event["start_s"].get<double>(), 3e-3);
    EXPECT_DOUBLE_EQ(event["end_s"].get<double>(), expected_end_s);
    EXPECT_DOUBLE_EQ(sim_world.rank(rank).now_s(), expected_end_s);
  }
  EXPECT_DOUBLE_EQ(result.event_log()["ranks"][0][0]["issue_s"].get<double>(), 1e-3);
}

}  // namespace
}  // namespace zero3
