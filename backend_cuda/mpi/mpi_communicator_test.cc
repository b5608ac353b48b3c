// MpiCommunicator under `mpirun -np 4` (its own main: MPI_Init before the tests, the same tests in
// the same order on every process). Every collective, f32 and bf16, sum and max, counts not
// divisible by W, whole blocks and blocks split into 7-byte chunks, is compared bit for bit with
// the simulator's data movement (sim/collective_data.h) over every rank's input, computed here.
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "backend_cuda/mpi/mpi_world.h"
#include "core/base/errors.h"
#include "core/tensor/dtype.h"
#include "sim/collective_data.h"

namespace zero3 {
namespace {

// Rank r's input element j: distinct per rank and index, signs mixed, not exactly representable
// sums, so a different order of additions shows.
float input_value(int rank, int64_t index) {
  const uint64_t mixed = (static_cast<uint64_t>(rank) * 1000003u + static_cast<uint64_t>(index)) * 0x9E3779B97F4A7C15u;
  return static_cast<float>(static_cast<int64_t>(mixed >> 40) - (int64_t{1} << 23)) / 3.0e5f;
}

Tensor input_tensor(int rank, int64_t count, DType dtype) {
  std::vector<float> values;
  for (int64_t j = 0; j < count; ++j) values.push_back(input_value(rank, j));
  return Tensor::from_values({count}, values, dtype);
}

std::vector<uint8_t> bytes_of(const Tensor& tensor) {
  const auto* data = static_cast<const uint8_t*>(tensor.device_bytes());
  return {data, data + tensor.bytes()};
}

// What the simulator computes for this rank: every rank's input built here, moved by the
// simulator's own code, this rank's output returned as bytes.
std::vector<uint8_t> simulated_output(const CollectiveSignature& signature, int world, int rank, int64_t input_count,
                                      int64_t output_count) {
  std::vector<Tensor> inputs, outputs;
  std::vector<const void*> input_bytes;
  std::vector<void*> output_bytes;
  for (int r = 0; r < world; ++r) {
    inputs.push_back(input_tensor(r, input_count, signature.dtype));
    outputs.push_back(Tensor::zeros({output_count}, signature.dtype));
    input_bytes.push_back(inputs.back().device_bytes());
    output_bytes.push_back(outputs.back().device_bytes());
  }
  if (signature.op == CollectiveOp::broadcast) {
    for (int r = 0; r < world; ++r) {
      if (r != signature.root) input_bytes[static_cast<size_t>(r)] = nullptr;
    }
  }
  move_collective_data(signature, input_bytes, output_bytes);
  if (signature.op == CollectiveOp::broadcast) return bytes_of(inputs[static_cast<size_t>(signature.root)]);
  return bytes_of(outputs[static_cast<size_t>(rank)]);
}

CollectiveSignature signature_of(CollectiveOp op, DType dtype, int64_t count, int root = -1,
                                 ReduceOp reduce = ReduceOp::sum) {
  CollectiveSignature signature;
  signature.op = op;
  signature.dtype = dtype;
  signature.count = count;
  signature.root = root;
  signature.reduce = reduce;
  return signature;
}

CallSite site(const std::string& what) { return {.module = "mpi_test", .params = {what}, .step = 0, .phase = "test"}; }

struct Case {
  DType dtype;
  ReduceOp reduce;
  int64_t max_message_bytes;
};

std::string case_name(const ::testing::TestParamInfo<Case>& param_info) {
  const Case& tested = param_info.param;
  return std::string(dtype_name(tested.dtype)) + "_" + reduce_op_name(tested.reduce) +
         (tested.max_message_bytes == INT_MAX ? "_whole_blocks" : "_7_byte_chunks");
}

class MpiCollectives : public ::testing::TestWithParam<Case> {};

TEST_P(MpiCollectives, EveryCollectiveEqualsTheSimulatorBitForBit) {
  const Case param = GetParam();
  MpiWorld& mpi = MpiWorld::start();
  const int world = mpi.world(), rank = mpi.rank();
  std::unique_ptr<Communicator> comm = mpi.communicator({.max_message_bytes = param.max_message_bytes});
  for (const int64_t count : {int64_t{1}, int64_t{3}, int64_t{world + 1}, int64_t{37}, int64_t{1000}}) {
    const std::string label = std::string(dtype_name(param.dtype)) + " count " + std::to_string(count);
    {
      Tensor send = input_tensor(rank, count, param.dtype);
      Tensor recv = Tensor::zeros({count * world}, param.dtype);
      comm->all_gather(send, recv, site("gather"));
      EXPECT_EQ(bytes_of(recv), simulated_output(signature_of(CollectiveOp::all_gather, param.dtype, count), world, rank, count,
                                                 count * world))
          << "all_gather " << label;
    }
    {
      Tensor send = input_tensor(rank, count * world, param.dtype);
      Tensor recv = Tensor::zeros({count}, param.dtype);
      comm->reduce_scatter(send, recv, param.reduce, site("reduce_scatter"));
      const CollectiveSignature signature =
          signature_of(CollectiveOp::reduce_scatter, param.dtype, count, -1, param.reduce);
      EXPECT_EQ(bytes_of(recv), simulated_output(signature, world, rank, count * world, count))
          << "reduce_scatter " << label;
    }
    {
      Tensor buffer = input_tensor(rank, count, param.dtype);
      comm->all_reduce(buffer, param.reduce, site("all_reduce"));
      const CollectiveSignature signature =
          signature_of(CollectiveOp::all_reduce, param.dtype, count, -1, param.reduce);
      EXPECT_EQ(bytes_of(buffer), simulated_output(signature, world, rank, count, count)) << "all_reduce " << label;
    }
    {
      const int root = static_cast<int>(count % world);
      Tensor buffer = rank == root ? input_tensor(rank, count, param.dtype) : Tensor::zeros({count}, param.dtype);
      comm->broadcast(buffer, root, site("broadcast"));
      EXPECT_EQ(bytes_of(buffer), simulated_output(signature_of(CollectiveOp::broadcast, param.dtype, count, root), world, rank,
                                                   count, count))
          << "broadcast " << label;
    }
  }
  comm->barrier(site("barrier"));
}

INSTANTIATE_TEST_SUITE_P(DtypesReductionsAndChunking, MpiCollectives,
                         ::testing::Values(Case{DType::f32, ReduceOp::sum, INT_MAX},
                                           Case{DType::bf16, ReduceOp::sum, INT_MAX},
                                           Case{DType::f32, ReduceOp::max, INT_MAX},
                                           Case{DType::f32, ReduceOp::sum, 7}, Case{DType::bf16, ReduceOp::sum, 7},
                                           Case{DType::bf16, ReduceOp::max, 7}),
                         case_name);

// Works complete in issue order: waiting for the last first completes the others, and two
// all-reduces waited in reverse order still start their second phases in the same order everywhere.
TEST(MpiCommunicator, WorksWaitedOutOfOrderCompleteInIssueOrder) {
  MpiWorld& mpi = MpiWorld::start();
  const int world = mpi.world(), rank = mpi.rank();
  std::unique_ptr<Communicator> comm = mpi.communicator({});
  Tensor first = input_tensor(rank, 11, DType::f32);
  Tensor second = input_tensor(rank, 5, DType::f32);
  Tensor send = input_tensor(rank, 4, DType::f32);
  Tensor gathered = Tensor::zeros({4 * world});
  auto first_work = comm->all_reduce_async(first, ReduceOp::sum, site("first"));
  auto second_work = comm->all_reduce_async(second, ReduceOp::sum, site("second"));
  auto gather_work = comm->all_gather_async(send, gathered, site("gather"));
  if (rank % 2 == 0) {
    gather_work->wait();
    EXPECT_TRUE(first_work->done());
    EXPECT_TRUE(second_work->done());
  } else {
    second_work->wait();
    first_work->wait();
    gather_work->wait();
  }
  EXPECT_EQ(bytes_of(first), simulated_output(signature_of(CollectiveOp::all_reduce, DType::f32, 11), world, rank, 11, 11));
  EXPECT_EQ(bytes_of(second), simulated_output(signature_of(CollectiveOp::all_reduce, DType::f32, 5), world, rank, 5, 5));
  EXPECT_EQ(bytes_of(gathered), simulated_output(signature_of(CollectiveOp::all_gather, DType::f32, 4), world, rank, 4, 4 * world));
  comm->synchronize();
}

TEST(MpiCommunicator, TheSharedArgumentCheckRefusesWhatTheSimulatorRefuses) {
  MpiWorld& mpi = MpiWorld::start();
  std::unique_ptr<Communicator> comm = mpi.communicator({});
  Tensor send = Tensor::zeros({3});
  Tensor wrong = Tensor::zeros({3 * mpi.world() + 1});
  EXPECT_THROW(comm->all_gather_async(send, wrong, site("gather")), ShapeError);
  Tensor meta = Tensor::meta({3});
  EXPECT_THROW(comm->all_reduce_async(meta, ReduceOp::sum, site("meta")), BackendError);
}

// Rank 0 waits in an all-gather its peers issue only later (an all-gather cannot complete without
// their blocks): it fails with exit 3's error naming the rank, the sequence number, the signature
// and the call site, and completes once they do issue it.
TEST(MpiCommunicator, AWaitPastTheTimeoutIsALivenessErrorNamingTheCollective) {
  MpiWorld& mpi = MpiWorld::start();
  const int world = mpi.world(), rank = mpi.rank();
  std::unique_ptr<Communicator> comm = mpi.communicator({.timeout_seconds = 0.3});
  Tensor send = input_tensor(rank, 2, DType::f32);
  Tensor gathered = Tensor::zeros({2 * world});
  if (rank == 0) {
    auto work = comm->all_gather_async(send, gathered, site("late"));
    try {
      work->wait();
      ADD_FAILURE() << "an all-gather nobody else issued completed";
    } catch (const LivenessError& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find("rank 0 of world: collective #0 (all_gather"), std::string::npos) << message;
      EXPECT_NE(message.find("late"), std::string::npos) << message;
      // The arrival board names every peer that never issued it; their processes wait in a barrier.
      for (int peer = 1; peer < world; ++peer) {
        const std::string named = "rank " + std::to_string(peer) + " (world rank " + std::to_string(peer) +
                                  ") never arrived at #0 (it issued 0 collectives in world), and its process (pid ";
        EXPECT_NE(message.find(named), std::string::npos) << message;
      }
      EXPECT_EQ(message.find("is stopped"), std::string::npos) << message;
      EXPECT_EQ(error.exit_code(), kExitLiveness);
    }
    mpi.barrier();
  } else {
    mpi.barrier();
    comm->all_gather_async(send, gathered, site("late"));
  }
  comm->synchronize();
  EXPECT_EQ(bytes_of(gathered),
            simulated_output(signature_of(CollectiveOp::all_gather, DType::f32, 2), world, rank, 2, 2 * world));
}

// A stopped peer of a split group: world rank 3 stops itself (SIGSTOP) before the group all-gather
// that world rank 2 waits in. Rank 2's timeout names the group, the collective and rank 3 (group
// rank 1) as never arrived and stopped, read from the arrival board; then it continues rank 3.
TEST(MpiCommunicator, ATimeoutNamesTheStoppedPeerThatNeverArrivedAndItsGroup) {
  MpiWorld& mpi = MpiWorld::start();
  const int world = mpi.world(), rank = mpi.rank();
  if (world != 4) GTEST_SKIP() << "needs mpirun -np 4";
  std::unique_ptr<Communicator> comm = mpi.communicator({.timeout_seconds = 0.5});
  // Every rank's pid (below 2^24, so exact in f32), for rank 2 to watch and continue rank 3.
  Tensor pid = Tensor::from_values({1}, {static_cast<float>(::getpid())}, DType::f32);
  Tensor pids = Tensor::zeros({world});
  comm->all_gather(pid, pids, site("pids"));
  const auto pid_of = [&](int peer) { return static_cast<int>(pids.to_floats()[static_cast<size_t>(peer)]); };
  std::unique_ptr<Communicator> group = comm->split(rank / 2, rank, site("halves"));
  Tensor send = input_tensor(rank, 2, DType::f32);
  Tensor gathered = Tensor::zeros({2 * group->world()});
  if (rank == 3) {
    std::raise(SIGSTOP);  // until rank 2 sends SIGCONT
    group->all_gather_async(send, gathered, site("stopped"));
  } else if (rank == 2) {
    // Waits until rank 3 is stopped indeed, so the timeout cannot come first.
    const auto state_of_rank_3 = [&] {
      std::ifstream stat("/proc/" + std::to_string(pid_of(3)) + "/stat");
      std::string line;
      std::getline(stat, line);
      return line.substr(line.rfind(')') + 2, 1);
    };
    for (int tries = 0; tries < 2000 && state_of_rank_3() != "T"; ++tries) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    try {
      group->all_gather_async(send, gathered, site("stopped"))->wait();
      ADD_FAILURE() << "an all-gather a stopped peer never issued completed";
    } catch (const LivenessError& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find("rank 0 of group 1 (ranks 2,3): collective #0 (all_gather"), std::string::npos) << message;
      EXPECT_NE(message.find("rank 1 (world rank 3) never arrived at #0 (it issued 0 collectives in group 1 (ranks "
                             "2,3)), and its process (pid " + std::to_string(pid_of(3)) + ") is stopped (state T"),
                std::string::npos)
          << message;
      EXPECT_NE(message.find("; rank 0 issued it and runs"), std::string::npos) << message;
    }
    ::kill(pid_of(3), SIGCONT);
  }
  group->synchronize();
  if (rank >= 2) {  // the members' blocks in group-rank order
    std::vector<uint8_t> expected = bytes_of(input_tensor(2, 2, DType::f32));
    const std::vector<uint8_t> second = bytes_of(input_tensor(3, 2, DType::f32));
    expected.insert(expected.end(), second.begin(), second.end());
    EXPECT_EQ(bytes_of(gathered), expected);
  }
  mpi.barrier();
}

// split(rank % 2, world - rank): two groups (of 2 under -np 4), each in reverse rank order. The
// group's collectives run over its members only, blocks and sums in group-rank order, exactly as
// the simulator's data movement over the members' inputs; the parent stays usable.
TEST(MpiCommunicator, SplitGroupsReduceAndGatherOverTheirMembersInGroupRankOrder) {
  MpiWorld& mpi = MpiWorld::start();
  const int world = mpi.world(), rank = mpi.rank();
  std::unique_ptr<Communicator> comm = mpi.communicator({.max_message_bytes = 7});
  std::unique_ptr<Communicator> group = comm->split(rank % 2, world - rank, site("split"));
  // The members (world ranks) of this rank's color, by descending world rank: the key order.
  std::vector<int> members;
  for (int r = world - 1; r >= 0; --r) {
    if (r % 2 == rank % 2) members.push_back(r);
  }
  ASSERT_EQ(group->world(), static_cast<int>(members.size()));
  EXPECT_EQ(members[static_cast<size_t>(group->rank())], rank);
  std::string expected_name = "group " + std::to_string(rank % 2) + " (rank" + (members.size() == 1 ? " " : "s ");
  for (size_t i = 0; i < members.size(); ++i) expected_name += (i ? "," : "") + std::to_string(members[i]);
  EXPECT_EQ(group->group_name(), expected_name + ")");

  for (const DType dtype : {DType::f32, DType::bf16}) {
    const int64_t count = 13;
    // What the simulator computes over the members' inputs, in group-rank order.
    const auto expected = [&](CollectiveOp op, int64_t output_count) {
      std::vector<Tensor> inputs, outputs;
      std::vector<const void*> input_bytes;
      std::vector<void*> output_bytes;
      for (int member : members) {
        inputs.push_back(input_tensor(member, count, dtype));
        outputs.push_back(Tensor::zeros({output_count}, dtype));
        input_bytes.push_back(inputs.back().device_bytes());
        output_bytes.push_back(outputs.back().device_bytes());
      }
      move_collective_data(signature_of(op, dtype, count), input_bytes, output_bytes);
      return bytes_of(outputs[static_cast<size_t>(group->rank())]);
    };
    Tensor buffer = input_tensor(rank, count, dtype);
    group->all_reduce(buffer, ReduceOp::sum, site("group all_reduce"));
    EXPECT_EQ(bytes_of(buffer), expected(CollectiveOp::all_reduce, count)) << dtype_name(dtype);
    // Not the world's sum: a group that spanned every rank would give that.
    if (members.size() < static_cast<size_t>(world)) {
      EXPECT_NE(bytes_of(buffer), simulated_output(signature_of(CollectiveOp::all_reduce, dtype, count), world, rank,
                                                   count, count));
    }
    Tensor send = input_tensor(rank, count, dtype);
    Tensor gathered = Tensor::zeros({count * group->world()}, dtype);
    group->all_gather(send, gathered, site("group all_gather"));
    EXPECT_EQ(bytes_of(gathered), expected(CollectiveOp::all_gather, count * group->world())) << dtype_name(dtype);
  }
  Tensor whole = input_tensor(rank, 5, DType::f32);
  comm->all_reduce(whole, ReduceOp::sum, site("world after split"));
  EXPECT_EQ(bytes_of(whole), simulated_output(signature_of(CollectiveOp::all_reduce, DType::f32, 5), world, rank, 5, 5));
  group->synchronize();
}

}  // namespace
}  // namespace zero3

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  zero3::MpiWorld::start();
  // Every process reports its own results; mpirun exits non-zero when any process does.
  return RUN_ALL_TESTS();
}
