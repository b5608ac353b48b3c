// How `zero3 train --backend cuda` maps processes onto GPUs, decided before any CUDA call so that
// it is tested on every machine. Two modes:
//
//   no launcher   one process drives `--gpus N` GPUs (default: every visible one), one host
//                 thread per GPU, the communicators from ncclCommInitAll
//   a launcher    torchrun, srun or mpirun started one process per GPU; this process is the
//                 launcher's rank and drives the GPU numbered by its local rank among those it
//                 sees; the ncclUniqueId comes from rank 0 over TCP (nccl_id_exchange.h)
//
//   const LaunchEnvironment launch = read_launch_environment();
//   const CudaLaunchPlan plan = plan_cuda_launch(&launch, probe_cuda().device_count, flags.gpus);
//   if (plan.mode == CudaLaunchPlan::process_per_gpu) ... CudaContext context(plan.device_index);
#pragma once
#include <optional>
#include <string>

#include "backend_cuda/launch/launch_environment.h"

namespace zero3 {

struct CudaLaunchPlan {
  enum Mode { single_process_all_gpus, process_per_gpu };
  Mode mode = single_process_all_gpus;
  int world = 1;         // ranks in the job: GPUs driven by this process, or the launcher's world
  int rank = 0;          // this process's rank (0 in the single-process mode, whose ranks are threads)
  int local_rank = 0;    // this process's rank on its node
  int device_index = 0;  // process_per_gpu: the one GPU; single process: the first of world GPUs
  std::string launcher;  // "" for the single-process mode
};

// env_or_null: the launcher's variables, or nullptr (or an environment with no launcher) for one
// process. visible_devices: what CUDA sees (CUDA_VISIBLE_DEVICES applied). requested_gpus: --gpus.
// BackendError (exit 4): no visible device, or --gpus above the visible count, naming both numbers.
// InputError (exit 1): --gpus below 1; under a launcher, --gpus given at all (the launcher's world
// counts) or a local rank without a GPU of its own, naming the launcher's variable.
CudaLaunchPlan plan_cuda_launch(const LaunchEnvironment* env_or_null, int visible_devices,
                                std::optional<int> requested_gpus);

}  // namespace zero3
