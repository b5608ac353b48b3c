// Process groups in the simulator (Communicator::split): group rank order by (key, parent rank),
// collectives matched per group (disjoint groups run different collectives at once), results in
// group-rank order, and mismatches and deadlocks inside a group reported naming the group and its
// world ranks.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sim/observed_communicator.h"
#include "sim/sim_world.h"
#include "sim/test_support.h"

namespace zero3 {
namespace {

constexpr uint64_t kSeed = 23;

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "missing '" << part << "' in:\n" << text;
}

// World rank r's element i. Ranks at group position 0 (world ranks 0 and 1 when color = rank % 2)
// hold large values, so that a different order of additions rounds differently: a wrong
// reduction order shows in the bits, not only a wrong sum.
float value(int world_rank, int64_t index) {
  const float scale = world_rank / 2 == 0 ? 1.0e8f : (world_rank / 2 == 1 ? 1.0f : 0.25f);
  return scale * test_value(kSeed, world_rank, index);
}

Tensor values(int world_rank, int64_t count) {
  std::vector<float> data;
  for (int64_t i = 0; i < count; ++i) data.push_back(value(world_rank, i));
  return Tensor::from_values({count}, data);
}

// The sum of element `index` over `members` (world ranks) in the order given.
float sum_in_order(const std::vector<int>& members, int64_t index) {
  float total = value(members[0], index);
  for (size_t i = 1; i < members.size(); ++i) total += value(members[i], index);
  return total;
}

// color = rank % 2; key reversed for color 1 (group rank order 5,3,1), ascending for color 0.
int color_of(int rank) { return rank % 2; }
int key_of(int rank) { return rank % 2 == 1 ? 100 - rank : rank; }
std::vector<int> members_of(int color) { return color == 0 ? std::vector<int>{0, 2, 4} : std::vector<int>{5, 3, 1}; }

TEST(SimGroups, SplitOrdersByKeyThenParentRankAndNamesTheGroupByItsWorldRanks) {
  std::vector<std::string> names(6);
  std::vector<int> group_ranks(6, -1), group_worlds(6, -1);
  const SimResult result = SimWorld(SimOptions{.world = 6, .seed = kSeed}).run([&](SimRank& sim) {
    const auto rank = static_cast<size_t>(sim.rank());
    EXPECT_EQ(sim.comm().group_name(), "world");
    std::unique_ptr<Communicator> group = sim.comm().split(color_of(sim.rank()), key_of(sim.rank()), call_site("split"));
    names[rank] = group->group_name();
    group_ranks[rank] = group->rank();
    group_worlds[rank] = group->world();
    // Equal keys: parent rank order breaks the tie, and a nested split names world ranks.
    std::unique_ptr<Communicator> pair = group->split(group->rank() == 0 ? 0 : 1, 0, call_site("split.nested"));
    if (sim.rank() == 3) {
      EXPECT_EQ(pair->group_name(), "group 1 (ranks 3,1)");
      EXPECT_EQ(pair->rank(), 0);
    }
    if (sim.rank() == 5) {
      EXPECT_EQ(pair->group_name(), "group 0 (rank 5)");
    }
  });
  ASSERT_TRUE(result.all_ok()) << result.summary();
  EXPECT_EQ(group_ranks, (std::vector<int>{0, 2, 1, 1, 2, 0}));
  EXPECT_EQ(group_worlds, (std::vector<int>(6, 3)));
  EXPECT_EQ(names[0], "group 0 (ranks 0,2,4)");
  EXPECT_EQ(names[1], "group 1 (ranks 5,3,1)");
}

TEST(SimGroups, GroupCollectivesMoveAndReduceInGroupRankOrder) {
  constexpr int64_t kCount = 41;
  std::vector<std::vector<float>> gathered(6), scattered(6), reduced(6);
  const SimResult result = SimWorld(SimOptions{.world = 6, .seed = kSeed}).run([&](SimRank& sim) {
    std::unique_ptr<Communicator> group = sim.comm().split(color_of(sim.rank()), key_of(sim.rank()), call_site("split"));
    Tensor send = values(sim.rank(), kCount);
    Tensor all = Tensor::zeros({kCount * group->world()});
    group->all_gather(send, all, call_site("gather"));
    // reduce_scatter's input: this rank's values repeated per block, so block b sums element j of
    // every member; shifted by the block so blocks differ.
    std::vector<float> blocks;
    for (int block = 0; block < group->world(); ++block) {
      for (int64_t j = 0; j < kCount; ++j) blocks.push_back(value(sim.rank(), j + block));
    }
    Tensor scatter_in = Tensor::from_values({kCount * group->world()}, blocks);
    Tensor scatter_out = Tensor::zeros({kCount});
    auto scatter = group->reduce_scatter_async(scatter_in, scatter_out, ReduceOp::sum, call_site("scatter"));
    Tensor buffer = values(sim.rank(), kCount);
    auto reduce = group->all_reduce_async(buffer, ReduceOp::sum, call_site("reduce"));
    reduce->wait();
    scatter->wait();
    const auto rank = static_cast<size_t>(sim.rank());
    gathered[rank].assign(all.data(), all.data() + all.numel());
    scattered[rank].assign(scatter_out.data(), scatter_out.data() + kCount);
    reduced[rank].assign(buffer.data(), buffer.data() + kCount);
  });
  ASSERT_TRUE(result.all_ok()) << result.summary();
  bool order_shows = false;
  for (int rank = 0; rank < 6; ++rank) {
    const std::vector<int> members = members_of(color_of(rank));
    const int group_rank = static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
    std::vector<int> ascending = members;
    std::sort(ascending.begin(), ascending.end());
    for (int64_t j = 0; j < kCount; ++j) {
      for (size_t block = 0; block < members.size(); ++block) {
        EXPECT_EQ(gathered[rank][block * kCount + j], value(members[block], j))
            << "rank " << rank << " gathered block " << block << " element " << j;
      }
      EXPECT_EQ(reduced[rank][j], sum_in_order(members, j)) << "rank " << rank << " all_reduce element " << j;
      float scatter_expected = value(members[0], j + group_rank);
      for (size_t i = 1; i < members.size(); ++i) scatter_expected += value(members[i], j + group_rank);
      EXPECT_EQ(scattered[rank][j], scatter_expected) << "rank " << rank << " reduce_scatter element " << j;
      order_shows = order_shows || sum_in_order(members, j) != sum_in_order(ascending, j);
    }
  }
  // The reversed group's rank order must round differently from world-rank order somewhere, or
  // this test could not tell the two orders apart.
  EXPECT_TRUE(order_shows);
}

TEST(SimGroups, DisjointGroupsRunDifferentCollectivesAtTheSameTimeWithoutAMismatch) {
  std::vector<float> results(4, 0.0f);
  const SimResult result = SimWorld(SimOptions{.world = 4, .seed = kSeed}).run([&](SimRank& sim) {
    std::unique_ptr<Communicator> group = sim.comm().split(sim.rank() % 2, sim.rank(), call_site("split"));
    if (sim.rank() % 2 == 0) {
      // Group {0,2}: an all-reduce then a barrier, while the other group gathers and scatters.
      Tensor buffer = Tensor::from_values({3}, {1.0f, 2.0f, static_cast<float>(sim.rank())});
      auto work = group->all_reduce_async(buffer, ReduceOp::sum, call_site("even.reduce"));
      work->wait();
      group->barrier(call_site("even.barrier"));
      results[static_cast<size_t>(sim.rank())] = buffer.data()[2];
    } else {
      Tensor send = Tensor::from_values({1}, {static_cast<float>(sim.rank())});
      Tensor all = Tensor::zeros({2});
      auto work = group->all_gather_async(send, all, call_site("odd.gather"));
      work->wait();
      Tensor out = Tensor::zeros({1});
      group->reduce_scatter(all, out, ReduceOp::max, call_site("odd.scatter"));
      results[static_cast<size_t>(sim.rank())] = out.data()[0];
    }
    // The world is still matched on its own: one more world collective after the groups'.
    sim.comm().barrier(call_site("world.barrier"));
  });
  ASSERT_TRUE(result.all_ok()) << result.summary();
  EXPECT_EQ(results, (std::vector<float>{2.0f, 1.0f, 2.0f, 3.0f}));
}

TEST(SimGroups, AMismatchInsideAGroupNamesTheGroupAndItsRanksOnly) {
  const SimResult result = SimWorld(SimOptions{.world = 4, .seed = kSeed}).run([&](SimRank& sim) {
    std::unique_ptr<Communicator> group = sim.comm().split(sim.rank() % 2, sim.rank(), call_site("split"));
    if (sim.rank() == 2) {
      Tensor send = Tensor::zeros({8});
      Tensor recv = Tensor::zeros({4});
      group->reduce_scatter(send, recv, ReduceOp::sum, call_site("h.0.mlp", 1));
    } else {
      Tensor send = Tensor::zeros({4});
      Tensor recv = Tensor::zeros({8});
      group->all_gather(send, recv, call_site("h.0.attn", 1));
    }
    sim.comm().barrier(call_site("end"));
  });
  ASSERT_FALSE(result.all_ok());
  for (int rank : {0, 2}) {
    const RankOutcome& outcome = result.ranks[static_cast<size_t>(rank)];
    ASSERT_FALSE(outcome.ok) << "rank " << rank;
    EXPECT_THROW(std::rethrow_exception(outcome.exception), CollectiveMismatchError) << outcome.error;
    expect_contains(outcome.error, "collective mismatch in group 0 (ranks 0,2) at #0");
    expect_contains(outcome.error, "rank 0: all_gather f32 count=4 at module 'h.0.attn'");
    expect_contains(outcome.error, "rank 2: reduce_scatter f32 count=4 reduce=sum at module 'h.0.mlp'");
    // The other group matched its all-gather: its ranks are no party to this mismatch.
    EXPECT_EQ(outcome.error.find("rank 1"), std::string::npos) << outcome.error;
    EXPECT_EQ(outcome.error.find("ranks 1,3"), std::string::npos) << outcome.error;
  }
}

TEST(SimGroups, ARankLeavingItsGroupsCollectiveIsADeadlockNamingTheGroup) {
  const SimResult result = SimWorld(SimOptions{.world = 4, .seed = kSeed}).run([&](SimRank& sim) {
    std::unique_ptr<Communicator> group = sim.comm().split(sim.rank() / 2, sim.rank(), call_site("split"));
    if (sim.rank() == 3) return;  // leaves group {2,3} without its all-reduce
    Tensor buffer = Tensor::zeros({5});
    group->all_reduce(buffer, ReduceOp::sum, call_site("h.1.attn", 4));
  });
  ASSERT_FALSE(result.all_ok());
  const RankOutcome& waiting = result.ranks[2];
  ASSERT_FALSE(waiting.ok);
  EXPECT_THROW(std::rethrow_exception(waiting.exception), DeadlockError) << waiting.error;
  expect_contains(waiting.error, "in group 1 (ranks 2,3), rank 3 exited while rank 2 waits in all_reduce #0");
  expect_contains(waiting.error, "module 'h.1.attn' step 4");
  expect_contains(waiting.error, "rank 2: waits in #0 in group 1 (ranks 2,3)");
  // Group {0,1} completed its all-reduce: both ranks ended well.
  EXPECT_TRUE(result.ranks[0].ok) << result.ranks[0].error;
  EXPECT_TRUE(result.ranks[1].ok) << result.ranks[1].error;
}

TEST(SimGroups, ARankSkippingTheSplitIsAMismatchAtTheSplitsExchange) {
  const SimResult result = SimWorld(SimOptions{.world = 3, .seed = kSeed}).run([&](SimRank& sim) {
    if (sim.rank() == 1) {
      sim.comm().barrier(call_site("elsewhere"));
      return;
    }
    sim.comm().split(0, sim.rank(), call_site("split.here"));
  });
  ASSERT_FALSE(result.all_ok());
  expect_contains(result.root_cause(), "collective mismatch at #0");
  expect_contains(result.root_cause(), "params [<split color, key>]");
  expect_contains(result.root_cause(), "rank 1: barrier");
}

TEST(SimGroups, SplitRefusesANegativeColorNamingTheRankAndTheRange) {
  const SimResult result = SimWorld(SimOptions{.world = 2, .seed = kSeed}).run([&](SimRank& sim) {
    EXPECT_THROW(
        {
          try {
            sim.comm().split(-1, 0, call_site("split.bad"));
          } catch (const InputError& error) {
            expect_contains(error.what(), "split on rank " + std::to_string(sim.rank()));
            expect_contains(error.what(), "color -1 is outside the expected range 0..16777215");
            throw;
          }
        },
        InputError);
  });
  EXPECT_TRUE(result.all_ok()) << result.summary();
}

// A split of an observed communicator is observed too: the group's collective holds its buffers
// under comm_buffer until the wait, and the listener hears of it.
TEST(SimGroups, AnObservedCommunicatorsGroupCountsItsBuffers) {
  const SimResult result = SimWorld(SimOptions{.world = 4, .seed = kSeed}).run([&](SimRank& sim) {
    CountingAllocator memory;
    std::vector<std::string> heard;
    ObservedCommunicator observed(sim.comm(), memory, [&](CollectiveOp op, const CallSite& site) {
      heard.push_back(site.module + ":" + collective_op_name(op));
    });
    std::unique_ptr<Communicator> group = observed.split(sim.rank() % 2, sim.rank(), call_site("split"));
    EXPECT_EQ(group->group_name(), sim.rank() % 2 == 0 ? "group 0 (ranks 0,2)" : "group 1 (ranks 1,3)");
    Tensor send = Tensor::zeros({3});
    Tensor recv = Tensor::zeros({6});
    auto work = group->all_gather_async(send, recv, call_site("gather"));
    // send and recv of the group's world of 2: (3 + 6) f32.
    EXPECT_EQ(memory.current_bytes(MemoryCategory::comm_buffer), 9 * 4);
    work->wait();
    EXPECT_EQ(memory.current_bytes(MemoryCategory::comm_buffer), 0);
    EXPECT_EQ(heard, (std::vector<std::string>{"gather:all_gather"}));
  });
  EXPECT_TRUE(result.all_ok()) << result.summary();
}

// The shared argument check sees the group's world: a buffer sized for the parent's world is
// refused, naming the group's size and this rank's group rank.
TEST(SimGroups, TheArgumentCheckUsesTheGroupsRankAndWorld) {
  const SimResult result = SimWorld(SimOptions{.world = 4, .seed = kSeed}).run([&](SimRank& sim) {
    std::unique_ptr<Communicator> group = sim.comm().split(sim.rank() % 2, sim.rank(), call_site("split"));
    Tensor send = Tensor::zeros({3});
    Tensor sized_for_world = Tensor::zeros({3 * 4});
    try {
      group->all_gather_async(send, sized_for_world, call_site("gather"));
      ADD_FAILURE() << "rank " << sim.rank() << ": a world-sized recv passed a group of 2";
    } catch (const ShapeError& error) {
      expect_contains(error.what(), "all_gather on rank " + std::to_string(sim.rank() / 2));
      expect_contains(error.what(), "expected send.numel() * world = 3 * 2 = 6");
    }
    Tensor buffer = Tensor::zeros({2});
    EXPECT_THROW(group->broadcast_async(buffer, 2, call_site("broadcast")), ShapeError);
  });
  EXPECT_TRUE(result.all_ok()) << result.summary();
}

TEST(SimGroups, RunsWithGroupsAreDeterministic) {
  const auto run = [] {
    return SimWorld(SimOptions{.world = 4, .seed = kSeed}).run([](SimRank& sim) {
      std::unique_ptr<Communicator> group = sim.comm().split(sim.rank() % 2, sim.rank(), call_site("split"));
      Tensor buffer = values(sim.rank(), 7);
      auto work = group->all_reduce_async(buffer, ReduceOp::sum, call_site("reduce"));
      sim.comm().barrier(call_site("world"));
      work->wait();
    });
  };
  const SimResult first = run();
  const SimResult second = run();
  ASSERT_TRUE(first.all_ok()) << first.summary();
  EXPECT_EQ(first.event_log_hash, second.event_log_hash);
}

}  // namespace
}  // namespace zero3

namespace zero3 {
namespace {

// Hierarchical sharding's groups on a machine of two nodes of four: the block lies in one node and
// rides the intra-node link, the group across blocks spans the nodes and takes the world's link,
// and the event log names each group's kind and level (the world's collectives name neither).
TEST(SimGroups, BlockAndAcrossBlockCollectivesArePricedAndLoggedByTheirLevel) {
  HardwareProfile hardware{.peak_flops = 1e12, .bandwidth_bytes_per_s = 1e9, .latency_s = 1e-6};
  hardware.intra_node_bandwidth_bytes_per_s = 1e10;
  hardware.intra_node_latency_s = 1e-7;
  hardware.ranks_per_node = 4;
  const SimOptions options{.world = 8, .seed = kSeed, .hardware = hardware, .jitter_fraction = 0.0};
  const SimResult result = SimWorld(options).run([&](SimRank& sim) {
    std::unique_ptr<Communicator> block = sim.comm().split_block(4, call_site("block"));
    std::unique_ptr<Communicator> across = sim.comm().split_across_blocks(4, call_site("across"));
    Tensor buffer = Tensor::zeros({1000});
    block->all_reduce(buffer, ReduceOp::sum, call_site("in block"));
    across->all_reduce(buffer, ReduceOp::sum, call_site("across blocks"));
  });
  ASSERT_TRUE(result.all_ok()) << result.summary();
  std::vector<nlohmann::json> groups;
  for (const auto& event : result.event_log().at("ranks").at(5)) {
    if (event.value("type", "") != "collective") continue;
    if (!event.contains("group")) {
      EXPECT_FALSE(event.contains("level")) << event.dump();  // the world's: the splits' exchanges
      continue;
    }
    groups.push_back(event);
  }
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].at("group"), "block");
  EXPECT_EQ(groups[0].at("level"), "intra-node");
  // end - start of absolute times: equal up to the rounding of the subtraction.
  EXPECT_NEAR(groups[0].at("end_s").get<double>() - groups[0].at("start_s").get<double>(),
              group_collective_time_s(hardware, CollectiveOp::all_reduce, 4000, 4, LinkLevel::intra_node), 1e-15);
  EXPECT_EQ(groups[1].at("group"), "across blocks");
  EXPECT_EQ(groups[1].at("level"), "inter-node");
  EXPECT_NEAR(groups[1].at("end_s").get<double>() - groups[1].at("start_s").get<double>(),
              collective_time_s(hardware, CollectiveOp::all_reduce, 4000, 2), 1e-15);
}

}  // namespace
}  // namespace zero3
