// The ranks this process drives on GPUs, and the seams each one trains over: its CUDA kernels and
// its NCCL communicator. Two launch modes (cuda_launch.h decides which):
//   - no launcher variables: this process drives `gpus` local GPUs (default all visible), one
//     host thread per GPU, their communicators made together by ncclCommInitAll;
//   - under torchrun, srun or mpirun: this process is one rank on GPU LOCAL_RANK, and rank 0
//     hands the ncclUniqueId to the others over TCP (nccl_id_exchange.h).
// The header names no CUDA type, so tools/ includes it in every build. The zero3 binary links
// cuda_backend_loader.cc, which loads the backend from its module on the first call
// (cuda_backend_module.h); a build without the toolkit links cuda_world_absent.cc. Both answer
// with BackendError (exit 4) and the reason where there is no backend to run.
//
//   run_on_cuda_ranks({.gpus = 2}, [&](CudaRank& rank) {
//     run_rank_program({.comm = &rank.comm, .allocator = memory, .kernels = rank.kernels}, built, options);
//   });
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backend_cuda/cuda/gemm_shape.h"
#include "core/sharding/communicator.h"
#include "core/tensor/kernels.h"

namespace zero3 {

struct CudaRunOptions {
  std::optional<int> gpus;             // single-process mode: how many local GPUs (default all)
  double collective_timeout_s = 600.0; // the NCCL watchdog: a collective pending longer ends the run (exit 3)
  double id_exchange_timeout_s = 120.0;  // process-per-GPU mode: how long ranks wait for rank 0's id
  bool bf16 = false;                   // the compute dtype, for the peak FLOPs MFU is measured against
};

// The caching pool's own figures for one GPU, beside what the Allocator seam counts.
struct CudaPoolFigures {
  int64_t reserved_bytes = 0;       // held by the pool now (freed blocks stay reserved for reuse)
  int64_t used_bytes = 0;           // handed out to tensors now
  int64_t peak_reserved_bytes = 0;  // the most the pool ever held
};

// What one rank's program gets. The references stay valid for the program's call only.
struct CudaRank {
  int rank = 0;
  int world = 1;
  int device_index = 0;
  std::string launcher;            // "" in single-process mode, else "torchrun", "mpirun", "srun"
  std::string device_description;  // e.g. "NVIDIA H200 (sm_90, 139.8 GiB)"
  double peak_flops = 0.0;         // dense peak of this GPU in the run's compute dtype; 0 where unknown
  Communicator& comm;
  Kernels& kernels;
  std::function<CudaPoolFigures()> pool_figures;
  // Every matmul of `kernels` is offered to this log, which keeps those made while it records.
  GemmShapeLog& gemm_shapes;
  // Seconds of one pass over `gemms` alone on this GPU, through `kernels` on fresh tensors of the
  // same shapes and dtypes, the fastest of `repetitions` passes timed by CUDA events on the compute
  // stream (cuda_gemm_timing.h). Call it with no collective pending (after comm.synchronize()).
  std::function<double(const std::vector<GemmShape>& gemms, int repetitions)> time_gemms_seconds;
};

// Runs `program` for every rank this process drives, in parallel (one thread per GPU), and
// returns when all have finished. The first failure aborts every communicator of this process so
// that no rank stays waiting in a collective, and is rethrown after every thread has ended.
// BackendError (exit 4) when there is no usable GPU, naming CUDA's reason.
void run_on_cuda_ranks(const CudaRunOptions& options, const std::function<void(CudaRank&)>& program);

// "CUDA runtime 13.0, NCCL 2.27.3, 1 device(s)", or why the backend cannot run here.
std::string describe_cuda_backend();

}  // namespace zero3
