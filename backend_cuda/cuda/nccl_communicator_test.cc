// NcclCommunicator and the CUDA memory pool on one GPU (world 1, ncclCommInitAll over cuda:0):
// every collective at counts 0, 1, 7 and 64 Mi, f32 and bf16, values from (rank, index) checked
// exactly with a #wrong count per case as nccl-tests prints it; barrier, synchronize and abort; host
// waits (a download) ended by the watchdog on a stream that does not finish; the pool's figures in
// the steady state. Without a GPU every test skips and says why; nothing touches CUDA before a
// test runs, so test discovery works anywhere.
#include "backend_cuda/cuda/nccl_communicator.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "backend_cuda/cuda/cuda_context.h"
#include "backend_cuda/cuda/cuda_kernels.h"
#include "backend_cuda/cuda/cuda_memory.h"
#include "core/base/errors.h"
#include "core/tensor/dtype.h"

namespace zero3 {
namespace {

constexpr int64_t kLargeCount = int64_t{64} << 20;  // 64 Mi elements: 256 MiB of f32

// Why the GPU tests cannot run here, or "" when they can.
std::string missing_gpu_reason() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) return std::string("no usable CUDA device: ") + cudaGetErrorString(status);
  if (count == 0) return "no CUDA device is visible";
  return "";
}

// Rank r's element j: a small integer, so exact in bf16 (|value| <= 99) and in sums of a few ranks.
float input_value(int rank, int64_t index) { return static_cast<float>((index * 37 + rank * 11) % 199 - 99); }

CallSite site(const std::string& what) { return {.module = "nccl_test", .params = {what}, .step = 0, .phase = "test"}; }

// Host values into a device tensor, on the compute stream: the collective after it must wait for
// the compute stream to see them, which is one of the handoffs under test.
void upload(const std::vector<float>& values, Tensor& tensor, cudaStream_t stream) {
  if (values.empty()) return;
  const Tensor host = Tensor::from_values({static_cast<int64_t>(values.size())}, values, tensor.dtype());
  // From pageable memory the call returns once the source is staged, so `host` may go right after.
  check_cuda(cudaMemcpyAsync(tensor.device_bytes(), host.device_bytes(), static_cast<size_t>(tensor.bytes()),
                             cudaMemcpyHostToDevice, stream),
             "cudaMemcpyAsync (upload)");
}

// Every byte 0xFF (a NaN in f32 and in bf16), so that an output the collective did not write shows.
void poison(Tensor& tensor, cudaStream_t stream) {
  if (tensor.bytes() == 0) return;
  check_cuda(cudaMemsetAsync(tensor.device_bytes(), 0xFF, static_cast<size_t>(tensor.bytes()), stream),
             "cudaMemsetAsync (poison)");
}

// The tensor's values, read on the compute stream after everything issued there.
std::vector<float> download(const Tensor& tensor, cudaStream_t stream) {
  Tensor host = Tensor::zeros(tensor.shape(), tensor.dtype());
  if (tensor.bytes() > 0) {
    check_cuda(cudaMemcpyAsync(host.device_bytes(), tensor.device_bytes(), static_cast<size_t>(tensor.bytes()),
                               cudaMemcpyDeviceToHost, stream),
               "cudaMemcpyAsync (download)");
  }
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (download)");
  return host.to_floats();
}

// Holds a stream still until release() (or the destructor): a host function enqueued on it waits
// for the flag, standing in for a collective whose peer never arrives. Everything enqueued on the
// stream after it waits too.
class StreamHold {
 public:
  explicit StreamHold(cudaStream_t stream) {
    check_cuda(cudaLaunchHostFunc(stream, &StreamHold::hold, this), "cudaLaunchHostFunc (stream hold)");
  }
  ~StreamHold() {
    release();
    // The host function reads this object: it must have returned before the object goes.
    while (!returned_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  StreamHold(const StreamHold&) = delete;
  StreamHold& operator=(const StreamHold&) = delete;
  void release() { released_.store(true); }

 private:
  static void CUDART_CB hold(void* self) {
    auto* hold = static_cast<StreamHold*>(self);
    while (!hold->released_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    hold->returned_.store(true);
  }

  std::atomic<bool> released_{false};
  std::atomic<bool> returned_{false};
};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

struct CollectiveCase {
  CollectiveOp op;
  ReduceOp reduce;
  DType dtype;
  int64_t count;
};

std::string case_name(const CollectiveCase& c) {
  CollectiveSignature signature;
  signature.op = c.op;
  signature.dtype = c.dtype;
  signature.count = c.count;
  signature.root = 0;
  signature.reduce = c.reduce;
  return describe(signature);
}

// What `rank` holds after the collective when every rank r sent input_value(r, j).
std::vector<float> expected_output(const CollectiveCase& c, int rank, int world) {
  std::vector<float> expected;
  if (c.op == CollectiveOp::all_gather) {
    for (int r = 0; r < world; ++r) {
      for (int64_t j = 0; j < c.count; ++j) expected.push_back(input_value(r, j));
    }
    return expected;
  }
  // reduce_scatter reduces this rank's block of every rank's input; all_reduce the whole input.
  const int64_t offset = c.op == CollectiveOp::reduce_scatter ? rank * c.count : 0;
  for (int64_t j = 0; j < c.count; ++j) {
    float value = input_value(0, offset + j);
    if (c.op != CollectiveOp::broadcast) {
      for (int r = 1; r < world; ++r) {
        const float other = input_value(r, offset + j);
        value = c.reduce == ReduceOp::max ? std::max(value, other) : value + other;
      }
    }
    expected.push_back(value);
  }
  return expected;
}

std::shared_ptr<Work> issue(Communicator& comm, const CollectiveCase& c, const Tensor& send, Tensor& recv) {
  switch (c.op) {
    case CollectiveOp::all_gather: return comm.all_gather_async(send, recv, site(case_name(c)));
    case CollectiveOp::reduce_scatter: return comm.reduce_scatter_async(send, recv, c.reduce, site(case_name(c)));
    case CollectiveOp::all_reduce: return comm.all_reduce_async(recv, c.reduce, site(case_name(c)));
    case CollectiveOp::broadcast: return comm.broadcast_async(recv, 0, site(case_name(c)));
    case CollectiveOp::barrier: break;
  }
  throw std::logic_error("not a data collective: " + case_name(c));
}

// Runs one case through Work::wait() (the compute stream then reads the output) and returns the
// number of wrong output elements.
int64_t run_case(NcclCommunicator& comm, const CudaContext& context, const CollectiveCase& c) {
  const int world = comm.world();
  const bool in_place = c.op == CollectiveOp::all_reduce || c.op == CollectiveOp::broadcast;
  const int64_t send_count = c.op == CollectiveOp::reduce_scatter ? c.count * world : c.count;
  const int64_t recv_count = c.op == CollectiveOp::all_gather ? c.count * world : c.count;
  std::vector<float> input;
  for (int64_t j = 0; j < send_count; ++j) input.push_back(input_value(comm.rank(), j));
  Tensor send = Tensor::uninitialized({send_count}, c.dtype, context.device());
  upload(input, send, context.compute_stream());
  Tensor recv = in_place ? send : Tensor::uninitialized({recv_count}, c.dtype, context.device());
  if (!in_place) poison(recv, context.compute_stream());
  std::shared_ptr<Work> work = issue(comm, c, send, recv);
  if (c.count == 0) {
    EXPECT_TRUE(work->done()) << case_name(c) << ": a zero-count collective is done at once";
  }
  work->wait();
  const std::vector<float> got = download(recv, context.compute_stream());
  const std::vector<float> expected = expected_output(c, comm.rank(), world);
  EXPECT_EQ(got.size(), expected.size()) << case_name(c);
  int64_t wrong = 0;
  for (size_t i = 0; i < got.size() && i < expected.size(); ++i) wrong += got[i] == expected[i] ? 0 : 1;
  return wrong;
}

// One CudaContext and one communicator for the whole suite (a context per device and process).
struct OneGpuWorld {
  CudaContext context{0};
  std::unique_ptr<NcclCommunicator> comm;
};

class NcclOneGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = missing_gpu_reason();
    if (!reason.empty()) GTEST_SKIP() << reason;
    if (world_ == nullptr) {
      // Built whole before it is kept: a failure here fails this test, and the next one tries again.
      auto world = std::make_unique<OneGpuWorld>();
      register_cuda_memory();
      world->comm = std::make_unique<NcclCommunicator>(nccl_init_all(1)[0], 0, 1, world->context, 60.0);
      std::printf("# %s, world %d\n", world->context.description().c_str(), world->comm->world());
      world_ = std::move(world);
    }
  }
  static void TearDownTestSuite() {
    world_.reset();  // the communicator first, then the context (member order)
    register_device_memory(DeviceKind::cuda, nullptr);
  }

  static std::unique_ptr<OneGpuWorld> world_;
};

std::unique_ptr<OneGpuWorld> NcclOneGpu::world_;

TEST_F(NcclOneGpu, EveryCollectiveMovesExactValuesAtCountsZeroOneOddAndLarge) {
  const std::vector<std::pair<CollectiveOp, ReduceOp>> ops = {
      {CollectiveOp::all_gather, ReduceOp::sum}, {CollectiveOp::reduce_scatter, ReduceOp::sum},
      {CollectiveOp::reduce_scatter, ReduceOp::max}, {CollectiveOp::all_reduce, ReduceOp::sum},
      {CollectiveOp::all_reduce, ReduceOp::max}, {CollectiveOp::broadcast, ReduceOp::sum}};
  std::printf("# %-52s %8s\n", "collective", "#wrong");
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{7}, kLargeCount}) {
      for (const auto& [op, reduce] : ops) {
        const CollectiveCase c{op, reduce, dtype, count};
        const int64_t wrong = run_case(*world_->comm, world_->context, c);
        std::printf("  %-52s %8lld\n", case_name(c).c_str(), static_cast<long long>(wrong));
        EXPECT_EQ(wrong, 0) << case_name(c) << " on rank " << world_->comm->rank();
      }
    }
  }
  std::fflush(stdout);
}

TEST_F(NcclOneGpu, SynchronizeLeavesEveryIssuedCollectiveDone) {
  NcclCommunicator& comm = *world_->comm;
  const Device device = world_->context.device();
  std::vector<Tensor> buffers;
  std::vector<std::shared_ptr<Work>> works;
  for (int64_t count : {int64_t{7}, int64_t{1} << 20, int64_t{3}}) {
    buffers.push_back(Tensor::zeros({count}, DType::f32, device));
    works.push_back(comm.all_reduce_async(buffers.back(), ReduceOp::sum, site("synchronize")));
  }
  comm.synchronize();
  for (const auto& work : works) EXPECT_TRUE(work->done());
}

TEST_F(NcclOneGpu, ABarrierReturnsWithItsWorkDone) {
  std::shared_ptr<Work> work = world_->comm->barrier_async(site("barrier"));
  EXPECT_TRUE(work->done());
  work->wait();
  world_->comm->barrier(site("blocking barrier"));
}

TEST_F(NcclOneGpu, BadArgumentsAreRefusedBeforeAnythingIsEnqueued) {
  NcclCommunicator& comm = *world_->comm;
  const Device device = world_->context.device();
  Tensor send = Tensor::zeros({4}, DType::f32, device);
  Tensor short_recv = Tensor::zeros({3}, DType::f32, device);
  EXPECT_THROW(comm.all_gather_async(send, short_recv, site("short recv")), ShapeError);
  Tensor host = Tensor::zeros({4});
  EXPECT_THROW(comm.all_reduce_async(host, ReduceOp::sum, site("host buffer")), BackendError);
  Tensor meta = Tensor::meta({4});
  EXPECT_THROW(comm.broadcast_async(meta, 0, site("meta buffer")), BackendError);
  EXPECT_THROW(comm.broadcast_async(send, 1, site("root outside the world")), ShapeError);
}

// ncclCommSplit on one GPU: the only split there is, a group of the one rank; it is an
// NcclCommunicator of its own whose collectives move exact values, named by its color and rank.
TEST_F(NcclOneGpu, ASplitIsAGroupWhoseCollectivesMoveExactValues) {
  std::unique_ptr<Communicator> group = world_->comm->split(5, 0, site("split"));
  ASSERT_EQ(group->world(), 1);
  EXPECT_EQ(group->rank(), 0);
  EXPECT_EQ(group->group_name(), "group 5 (1 rank, with world rank 0)");
  auto* nccl_group = dynamic_cast<NcclCommunicator*>(group.get());
  ASSERT_NE(nccl_group, nullptr);
  const CollectiveCase c{CollectiveOp::all_reduce, ReduceOp::sum, DType::f32, 7};
  EXPECT_EQ(run_case(*nccl_group, world_->context, c), 0) << case_name(c) << " on the group";
  nccl_group->synchronize();
}

TEST_F(NcclOneGpu, AfterAbortEveryWaitAndCollectiveThrowsPeerFailureNamingThisRank) {
  NcclCommunicator comm(nccl_init_all(1)[0], 0, 1, world_->context, 60.0);
  Tensor buffer = Tensor::zeros({7}, DType::f32, world_->context.device());
  std::shared_ptr<Work> pending = comm.all_reduce_async(buffer, ReduceOp::sum, site("before abort"));
  comm.abort("the test gives up");
  comm.abort("a second abort changes nothing");
  EXPECT_THROW(pending->wait(), PeerFailureError);
  try {
    comm.all_reduce_async(buffer, ReduceOp::sum, site("after abort"));
    ADD_FAILURE() << "a collective after abort() was accepted";
  } catch (const PeerFailureError& error) {
    EXPECT_EQ(error.failed_rank(), 0);
    EXPECT_NE(std::string(error.what()).find("rank 0"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("the test gives up"), std::string::npos) << error.what();
  }
  EXPECT_THROW(comm.synchronize(), PeerFailureError);
  pending.reset();  // a Work goes before its communicator
}

TEST_F(NcclOneGpu, AHostWaitEndsWhenTheWatchdogThrowsThoughTheStreamNeverFinishes) {
  CudaContext& context = world_->context;
  int watchdog_runs = 0;
  int owner = 0;
  context.add_host_wait_watchdog(&owner, [&](const char* why) {
    if (++watchdog_runs == 3) throw LivenessError(std::string("the test gives up on ") + why);
  });
  {
    StreamHold hold(context.compute_stream());
    try {
      context.wait_for_compute_stream("a held stream");
      ADD_FAILURE() << "the wait for a held stream returned";
    } catch (const LivenessError& error) {
      EXPECT_TRUE(contains(error.what(), "the test gives up on a held stream")) << error.what();
    }
    context.remove_host_wait_watchdog(&owner);
  }
  EXPECT_EQ(watchdog_runs, 3);
  context.wait_for_compute_stream("the released stream");  // no watchdog of the test's: it returns
}

TEST_F(NcclOneGpu, AnAbortFromAnotherThreadEndsADownloadWithPeerFailureNamingTheReason) {
  CudaContext& context = world_->context;
  const std::unique_ptr<Kernels> kernels = make_cuda_kernels(context);
  Tensor loss = Tensor::zeros({1}, DType::f32, context.device());
  NcclCommunicator comm(nccl_init_all(1)[0], 0, 1, context, 60.0);
  {
    StreamHold hold(context.compute_stream());
    // As the launcher's FailureLatch does when another rank of the process fails.
    std::jthread other_rank([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      comm.abort("rank 1 failed");
    });
    try {
      kernels->to_host(loss);
      ADD_FAILURE() << "a download on a held stream returned after abort()";
    } catch (const PeerFailureError& error) {
      EXPECT_TRUE(contains(error.what(), "rank 0: download")) << error.what();
      EXPECT_TRUE(contains(error.what(), "rank 1 failed")) << error.what();
    }
    // ncclCommAbort frees NCCL's memory, which may wait for the whole device and so for the held
    // stream: let it go before joining, or the test would wait for itself.
    hold.release();
    other_rank.join();
  }
}

TEST_F(NcclOneGpu, ThePoolKeepsFreedMemoryAndDoesNotGrowInTheSteadyState) {
  const CudaContext& context = world_->context;
  const std::vector<int64_t> counts = {int64_t{1} << 8, int64_t{1} << 18, int64_t{3} << 18, int64_t{16} << 20};
  int64_t round_bytes = 0;
  for (int64_t count : counts) round_bytes += count * 4;
  auto allocation_round = [&] {
    std::vector<Tensor> tensors;
    for (int64_t count : counts) tensors.push_back(Tensor::zeros({count}, DType::f32, context.device()));
    const CudaPoolStats during = cuda_pool_stats(context.device_index());
    EXPECT_GE(during.used_bytes, round_bytes);
    EXPECT_GE(during.reserved_bytes, during.used_bytes);
    tensors.clear();
    check_cuda(cudaStreamSynchronize(context.compute_stream()), "cudaStreamSynchronize (after the frees)");
  };
  allocation_round();
  const CudaPoolStats first = cuda_pool_stats(context.device_index());
  allocation_round();
  const CudaPoolStats second = cuda_pool_stats(context.device_index());
  std::printf("# pool after round 1: reserved %lld used %lld; after round 2: reserved %lld used %lld peak %lld\n",
              static_cast<long long>(first.reserved_bytes), static_cast<long long>(first.used_bytes),
              static_cast<long long>(second.reserved_bytes), static_cast<long long>(second.used_bytes),
              static_cast<long long>(second.peak_reserved_bytes));
  EXPECT_GE(first.reserved_bytes, round_bytes) << "freed memory stays reserved for reuse";
  EXPECT_LE(second.reserved_bytes, first.reserved_bytes) << "an identical second round reserves nothing new";
  EXPECT_EQ(second.used_bytes, first.used_bytes);
  EXPECT_GE(second.peak_reserved_bytes, second.reserved_bytes);
}

TEST_F(NcclOneGpu, ZeroedMemoryIsZeroEvenWhenTheBlockIsReused) {
  const CudaContext& context = world_->context;
  const int64_t count = int64_t{1} << 18;
  {
    Tensor dirty = Tensor::uninitialized({count}, DType::f32, context.device());
    poison(dirty, context.compute_stream());
  }
  const Tensor zeroed = Tensor::zeros({count}, DType::f32, context.device());
  int64_t nonzero = 0;
  for (float value : download(zeroed, context.compute_stream())) nonzero += value == 0.0f ? 0 : 1;
  EXPECT_EQ(nonzero, 0);
}

TEST_F(NcclOneGpu, AnImpossibleAllocationIsAnOutOfMemoryErrorNamingTheDevice) {
  const int64_t one_tebibyte_of_floats = int64_t{1} << 38;
  try {
    const Tensor huge = Tensor::uninitialized({one_tebibyte_of_floats}, DType::f32, world_->context.device());
    ADD_FAILURE() << "1 TiB was allocated";
  } catch (const OutOfMemoryError& error) {
    EXPECT_NE(std::string(error.what()).find("cuda:0"), std::string::npos) << error.what();
  }
}

TEST_F(NcclOneGpu, ThereIsOneContextPerDevice) {
  EXPECT_EQ(&cuda_context_of(0), &world_->context);
  EXPECT_THROW(CudaContext second(0), BackendError);
  EXPECT_NE(world_->context.description().find("sm_"), std::string::npos) << world_->context.description();
}

// Last in the file: the collective held back here runs only after its communicator was aborted.
TEST_F(NcclOneGpu, ACollectivePendingPastTheTimeoutEndsADownloadWithLivenessErrorNamingIt) {
  CudaContext& context = world_->context;
  const std::unique_ptr<Kernels> kernels = make_cuda_kernels(context);
  Tensor buffer = Tensor::zeros({7}, DType::f32, context.device());
  NcclCommunicator comm(nccl_init_all(1)[0], 0, 1, context, 0.2);
  {
    StreamHold hold(context.comm_stream());
    // ncclCommAbort frees NCCL's memory, which may wait for the device and so for this host-side
    // hold (an artificial hang NCCL cannot abort, unlike a hung NCCL kernel): the hold ends after
    // 1 s so that the test cannot hang. The error below is what is checked; a watchdog that never
    // fired would let the download return once the hold ends, which fails the test.
    std::jthread safety_release([&](const std::stop_token& stop) {
      for (int waited_ms = 0; waited_ms < 1000 && !stop.stop_requested(); waited_ms += 10) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      hold.release();
    });
    std::shared_ptr<Work> work = comm.all_reduce_async(buffer, ReduceOp::sum, site("held"));
    work->wait();  // the compute stream now waits for a collective that does not finish
    const auto started = std::chrono::steady_clock::now();
    try {
      kernels->to_host(buffer);
      ADD_FAILURE() << "a download behind a held collective returned";
    } catch (const PeerFailureError& error) {
      ADD_FAILURE() << "a timeout is not a peer failure: " << error.what();
    } catch (const LivenessError& error) {
      const std::string message = error.what();
      EXPECT_TRUE(contains(message, "rank 0: collective #0 (all_reduce")) << message;
      EXPECT_TRUE(contains(message, "did not complete within 0.2 s")) << message;
      EXPECT_TRUE(contains(message, "the NCCL communicator was aborted")) << message;
    }
    const double waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::printf("# the held collective's download ended after %.3f s (timeout 0.2 s)\n", waited_s);
    EXPECT_LT(waited_s, 4.0);
    safety_release.request_stop();
    safety_release.join();
    work.reset();  // a Work goes before its communicator
  }
}

}  // namespace
}  // namespace zero3
