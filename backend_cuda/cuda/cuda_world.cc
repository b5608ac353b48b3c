// The ranks this process drives on GPUs (cuda_world.h): launch mode, NCCL communicators, one
// host thread per GPU, and the first failure aborting every communicator.
#include "backend_cuda/cuda/cuda_world.h"

#include <nccl.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backend_cuda/cuda/cuda_context.h"
#include "backend_cuda/cuda/cuda_backend_module.h"
#include "backend_cuda/cuda/cuda_gemm_timing.h"
#include "backend_cuda/cuda/cuda_kernels.h"
#include "backend_cuda/launch/cuda_launch.h"
#include "backend_cuda/cuda/cuda_memory.h"
#include "backend_cuda/launch/launch_environment.h"
#include "backend_cuda/cuda/nccl_communicator.h"
#include "backend_cuda/launch/nccl_id_exchange.h"
#include "core/base/errors.h"

namespace zero3 {

namespace {

static_assert(NCCL_UNIQUE_ID_BYTES == 128, "nccl_id_exchange.h carries the id as 128 bytes");

// Dense peak FLOP/s of the GPUs MFU is quoted against (vendor figures, SXM parts; f32 without
// TF32, which the backend keeps off so that f32 GEMMs match the CPU reference). 0: unknown, and
// no MFU is printed rather than one against a guessed peak.
double peak_flops(const std::string& device_name, bool bf16) {
  struct Peak {
    const char* name;
    double bf16_tflops;
    double f32_tflops;
  };
  constexpr Peak kPeaks[] = {{"H200", 989.0, 67.0}, {"H100", 989.0, 67.0}, {"A100", 312.0, 19.5}};
  for (const Peak& peak : kPeaks) {
    if (device_name.find(peak.name) != std::string::npos) return 1e12 * (bf16 ? peak.bf16_tflops : peak.f32_tflops);
  }
  return 0.0;
}

// The first failure among this process's ranks: kept, and every communicator aborted so that the
// other ranks' collectives fail with PeerFailureError instead of waiting forever.
class FailureLatch {
 public:
  void attach(Communicator* comm) {
    const std::lock_guard lock(mutex_);
    comms_.push_back(comm);
    if (first_) comm->abort("an earlier rank of this process failed");
  }
  void detach(Communicator* comm) {
    const std::lock_guard lock(mutex_);
    std::erase(comms_, comm);
  }
  void fail(int rank, std::exception_ptr error) {
    const std::lock_guard lock(mutex_);
    if (first_) return;
    first_ = error;
    for (Communicator* comm : comms_) comm->abort("rank " + std::to_string(rank) + " failed");
  }
  void rethrow() const {
    if (first_) std::rethrow_exception(first_);
  }

 private:
  std::mutex mutex_;
  std::vector<Communicator*> comms_;
  std::exception_ptr first_;
};

// One rank on its GPU: context, kernels, communicator, the program. The communicator is made
// (and owned) by the caller's NCCL setup; `nccl` is handed over to the NcclCommunicator.
void run_rank(int rank, int world, int device_index, const std::string& launcher, ncclComm_t nccl,
              const CudaRunOptions& options, const std::function<void(CudaRank&)>& program, FailureLatch& latch) {
  try {
    std::unique_ptr<CudaContext> owned_context;
    try {
      owned_context = std::make_unique<CudaContext>(device_index);
    } catch (...) {
      ncclCommAbort(nccl);  // no NcclCommunicator took it over yet: nothing else would release it
      throw;
    }
    CudaContext& context = *owned_context;
    // Destroyed in reverse: the kernels, then the communicator, then the context both use.
    NcclCommunicator comm(nccl, rank, world, context, options.collective_timeout_s);
    GemmShapeLog gemm_shapes;  // outlives the kernels that hold it
    const std::unique_ptr<Kernels> kernels = make_cuda_kernels(context);
    attach_gemm_shape_log(*kernels, &gemm_shapes);
    latch.attach(&comm);
    CudaRank seams{.rank = rank,
                   .world = world,
                   .device_index = device_index,
                   .launcher = launcher,
                   .device_description = context.description(),
                   .peak_flops = peak_flops(context.description(), options.bf16),
                   .comm = comm,
                   .kernels = *kernels,
                   .pool_figures = [device_index] {
                     const CudaPoolStats stats = cuda_pool_stats(device_index);
                     return CudaPoolFigures{.reserved_bytes = stats.reserved_bytes,
                                            .used_bytes = stats.used_bytes,
                                            .peak_reserved_bytes = stats.peak_reserved_bytes};
                   },
                   .gemm_shapes = gemm_shapes,
                   .time_gemms_seconds = [&context, &kernels](const std::vector<GemmShape>& gemms, int repetitions) {
                     return time_gemms_seconds(context, *kernels, gemms, repetitions);
                   }};
    try {
      program(seams);
    } catch (...) {
      latch.detach(&comm);
      // The other ranks hear of it before this rank's cleanup, which may wait on the GPU.
      latch.fail(rank, std::current_exception());
      return;
    }
    latch.detach(&comm);
  } catch (...) {
    latch.fail(rank, std::current_exception());
  }
}

int visible_devices() {
  const CudaProbe probe = probe_cuda_runtime();
  if (probe.device_count == 0) throw BackendError("--backend cuda: " + probe.problem);
  return probe.device_count;
}

// Rank 0 makes the id and serves it; every other rank fetches it.
ncclUniqueId exchange_unique_id(const LaunchEnvironment& launch, const CudaRunOptions& options) {
  const IdExchangeAddress address = id_exchange_address(launch);
  std::array<char, NCCL_UNIQUE_ID_BYTES> bytes{};
  ncclUniqueId id{};
  if (launch.rank == 0) {
    const ncclResult_t status = ncclGetUniqueId(&id);
    if (status != ncclSuccess) throw BackendError(std::string("ncclGetUniqueId: ") + ncclGetErrorString(status));
    std::memcpy(bytes.data(), id.internal, bytes.size());
    serve_nccl_id(bytes, launch.world, address, options.id_exchange_timeout_s);
  } else {
    bytes = fetch_nccl_id(launch.rank, launch.world, address, options.id_exchange_timeout_s);
    std::memcpy(id.internal, bytes.data(), bytes.size());
  }
  return id;
}

}  // namespace

void run_on_cuda_devices(const CudaRunOptions& options, const std::function<void(CudaRank&)>& program) {
  const int visible = visible_devices();
  const LaunchEnvironment launch = read_launch_environment();
  for (const std::string& warning : launch.warnings) std::fprintf(stderr, "warning: %s\n", warning.c_str());
  const CudaLaunchPlan plan = plan_cuda_launch(launch.launcher.empty() ? nullptr : &launch, visible, options.gpus);
  register_cuda_memory();
  FailureLatch latch;
  if (plan.mode == CudaLaunchPlan::process_per_gpu) {
    check_cuda(cudaSetDevice(plan.device_index), "cudaSetDevice");
    const ncclUniqueId id = exchange_unique_id(launch, options);
    ncclComm_t nccl = nccl_init_rank(plan.world, id, plan.rank);
    run_rank(plan.rank, plan.world, plan.device_index, plan.launcher, nccl, options, program, latch);
  } else {
    const std::vector<ncclComm_t> nccl = nccl_init_all(plan.world);
    std::vector<std::thread> threads;
    for (int rank = 0; rank < plan.world; ++rank) {
      threads.emplace_back(run_rank, rank, plan.world, rank, std::string(), nccl[static_cast<size_t>(rank)],
                           std::cref(options), std::cref(program), std::ref(latch));
    }
    for (std::thread& thread : threads) thread.join();
  }
  latch.rethrow();
}

}  // namespace zero3
