// The symmetric communicator: the cost model's times, one communication stream, waits that move
// the compute clock, and a loud refusal to fake data movement.
#include <string>

#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "traces/replay/symmetric_communicator.h"

namespace zero3 {
namespace {

TEST(SymmetricCommunicator, CollectivesTakeTheRingTimeOneAfterAnotherAndWaitsAdvanceTheClock) {
  const HardwareProfile hardware{.peak_flops = 1e12, .bandwidth_bytes_per_s = 1e9, .latency_s = 1e-6};
  StreamClock clock(hardware);
  SymmetricCommunicator comm(0, 8, clock);
  Tensor shard = Tensor::meta({1000}, DType::bf16);
  Tensor full = Tensor::meta({8000}, DType::bf16);
  auto first = comm.all_gather_async(shard, full, {.module = "a", .params = {}, .step = 0, .phase = "forward"});
  auto second = comm.all_gather_async(shard, full, {.module = "b", .params = {}, .step = 0, .phase = "forward"});
  const double expected_s = collective_time_s(hardware, CollectiveOp::all_gather, 16000, 8);
  ASSERT_EQ(comm.log().size(), 2u);
  EXPECT_DOUBLE_EQ(comm.log()[0].duration_s, expected_s);
  EXPECT_EQ(comm.log()[0].bytes, 16000);
  EXPECT_DOUBLE_EQ(comm.log()[1].start_s, expected_s);  // the stream was busy with the first
  clock.advance_compute(1e6);                           // 1 us of compute overlaps the gathers
  EXPECT_FALSE(second->done());
  second->wait();
  EXPECT_DOUBLE_EQ(clock.now_s(), 2 * expected_s);
  first->wait();                                        // already complete: no time passes
  EXPECT_DOUBLE_EQ(clock.now_s(), 2 * expected_s);
}

TEST(SymmetricCommunicator, RefusesBuffersWithDataAndBuffersOfTheWrongSize) {
  StreamClock clock(HardwareProfile{});
  SymmetricCommunicator comm(0, 4, clock);
  Tensor data = Tensor::zeros({4});
  Tensor gathered = Tensor::zeros({16});
  EXPECT_THROW(comm.all_gather(data, gathered, {}), InputError);
  Tensor shard = Tensor::meta({4});
  Tensor wrong = Tensor::meta({12});
  EXPECT_THROW(comm.all_gather(shard, wrong, {}), ShapeError);
}

TEST(SymmetricCommunicator, SynchronizeWaitsForTheStreamAndAbortFailsLaterCollectives) {
  const HardwareProfile hardware{.peak_flops = 1e12, .bandwidth_bytes_per_s = 1e9, .latency_s = 1e-6};
  StreamClock clock(hardware);
  SymmetricCommunicator comm(0, 4, clock);
  Tensor shard = Tensor::meta({100});
  Tensor full = Tensor::meta({400});
  auto work = comm.all_gather_async(shard, full, {});
  EXPECT_FALSE(work->done());
  comm.synchronize();
  EXPECT_TRUE(work->done());
  EXPECT_DOUBLE_EQ(clock.now_s(), collective_time_s(hardware, CollectiveOp::all_gather, 1600, 4));
  comm.abort("out of memory");
  try {
    comm.all_gather(shard, full, {.module = "h.1"});
    ADD_FAILURE() << "a collective after abort() went through";
  } catch (const PeerFailureError& error) {
    EXPECT_NE(std::string(error.what()).find("aborted the world: out of memory"), std::string::npos) << error.what();
  }
}

// A general split is not replayed symmetrically: it says so, naming the rank and the call site,
// instead of returning a group of a size it cannot know (split_block and split_across_blocks can).
TEST(SymmetricCommunicator, RefusesToSplitSayingGroupsAreNotSupportedYet) {
  StreamClock clock(HardwareProfile{});
  SymmetricCommunicator comm(3, 8, clock);
  try {
    comm.split(1, 0, {.module = "hsdp", .params = {}, .step = 0, .phase = "setup"});
    ADD_FAILURE() << "split returned a group";
  } catch (const InputError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("split on rank 3 (module 'hsdp' setup step 0)"), std::string::npos) << message;
    EXPECT_NE(message.find("does not support process groups yet"), std::string::npos) << message;
  }
  EXPECT_EQ(comm.group_name(), "world");
}

// Hierarchical sharding's groups, 16 ranks on nodes of 8: blocks of 8 lie in a node, blocks of 16
// would not; the group across blocks of 8 takes one rank of each node. Each group has its size and
// this rank's place, shares the rank's one stream and log, and logs its kind and level.
TEST(SymmetricCommunicator, BlocksAndAcrossBlocksHaveTheGroupSizesLevelsAndOneLog) {
  HardwareProfile hardware{.peak_flops = 1e12, .bandwidth_bytes_per_s = 1e9, .latency_s = 1e-6};
  hardware.intra_node_bandwidth_bytes_per_s = 1e10;
  hardware.intra_node_latency_s = 1e-7;
  hardware.ranks_per_node = 8;
  StreamClock clock(hardware);
  SymmetricCommunicator comm(11, 16, clock);
  EXPECT_EQ(comm.level(), LinkLevel::inter_node);
  std::unique_ptr<Communicator> block = comm.split_block(8, {});
  std::unique_ptr<Communicator> across = comm.split_across_blocks(8, {});
  EXPECT_EQ(block->world(), 8);
  EXPECT_EQ(block->rank(), 3);
  EXPECT_EQ(block->group_name(), "block");
  EXPECT_EQ(across->world(), 2);
  EXPECT_EQ(across->rank(), 1);
  EXPECT_EQ(across->group_name(), "across blocks");
  Tensor shard = Tensor::meta({100}, DType::bf16);
  Tensor full = Tensor::meta({800}, DType::bf16);
  Tensor whole = Tensor::meta({1600}, DType::bf16);
  Tensor buffer = Tensor::meta({100});
  block->all_gather(shard, full, {.module = "a", .params = {}, .step = 0, .phase = "backward"});
  across->all_reduce(buffer, ReduceOp::sum, {.module = "", .params = {}, .step = 0, .phase = "backward"});
  comm.all_gather(shard, whole, {.module = "b", .params = {}, .step = 0, .phase = "forward"});
  const std::vector<TraceCollective>& log = comm.log();
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[0].group, "block");
  EXPECT_EQ(log[0].level, "intra-node");
  EXPECT_EQ(log[0].bytes, 1600);
  EXPECT_DOUBLE_EQ(log[0].duration_s,
                   group_collective_time_s(hardware, CollectiveOp::all_gather, 1600, 8, LinkLevel::intra_node));
  EXPECT_EQ(log[1].group, "across blocks");
  EXPECT_EQ(log[1].level, "inter-node");
  EXPECT_DOUBLE_EQ(log[1].duration_s, collective_time_s(hardware, CollectiveOp::all_reduce, 400, 2));
  EXPECT_DOUBLE_EQ(log[1].start_s, log[0].start_s + log[0].duration_s);  // one stream
  EXPECT_EQ(log[2].group, "world");
  EXPECT_EQ(log[2].level, "inter-node");
  EXPECT_EQ(log[2].sequence, 2);
  EXPECT_DOUBLE_EQ(log[2].duration_s, collective_time_s(hardware, CollectiveOp::all_gather, 3200, 16));
  // Blocks of 16 on nodes of 8 span nodes; so does a block of 3 (it does not divide a node).
  SymmetricCommunicator wide(0, 48, clock);
  EXPECT_EQ(static_cast<SymmetricCommunicator&>(*wide.split_block(16, {})).level(), LinkLevel::inter_node);
  EXPECT_EQ(static_cast<SymmetricCommunicator&>(*wide.split_block(3, {})).level(), LinkLevel::inter_node);
  EXPECT_EQ(static_cast<SymmetricCommunicator&>(*wide.split_block(4, {})).level(), LinkLevel::intra_node);
  // Within one node every group is intra-node, the world too.
  SymmetricCommunicator node(0, 8, clock);
  EXPECT_EQ(node.level(), LinkLevel::intra_node);
  EXPECT_EQ(static_cast<SymmetricCommunicator&>(*node.split_across_blocks(2, {})).level(), LinkLevel::intra_node);
  EXPECT_THROW(comm.split_block(5, {}), InputError);  // does not divide 16
  EXPECT_THROW(block->split_block(2, {}), InputError);  // only the world splits
}

}  // namespace
}  // namespace zero3
