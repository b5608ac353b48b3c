// The symmetric communicator: the cost model's times, one communication stream, waits that move
// the compute clock, and a loud refusal to fake data movement.
#include <string>

#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "traces/symmetric_communicator.h"

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

// Process groups are not replayed symmetrically yet: split says so, naming the rank and the call
// site, instead of returning a group of a size it cannot know.
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

}  // namespace
}  // namespace zero3
