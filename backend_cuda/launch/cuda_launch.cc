// The launch-mode decision of the CUDA backend (cuda_launch.h).
#include "backend_cuda/launch/cuda_launch.h"

#include "core/base/errors.h"

namespace zero3 {

namespace {

std::string visible_text(int visible_devices) {
  return std::to_string(visible_devices) + (visible_devices == 1 ? " GPU is" : " GPUs are") + " visible";
}

CudaLaunchPlan plan_single_process(int visible_devices, std::optional<int> requested_gpus) {
  if (requested_gpus && *requested_gpus < 1) {
    throw InputError("--gpus " + std::to_string(*requested_gpus) + ": expected at least 1 GPU");
  }
  if (requested_gpus && *requested_gpus > visible_devices) {
    throw BackendError("--gpus " + std::to_string(*requested_gpus) + " asks for more GPUs than this machine has: " +
                       visible_text(visible_devices) + " (CUDA_VISIBLE_DEVICES applied)");
  }
  CudaLaunchPlan plan;
  plan.mode = CudaLaunchPlan::single_process_all_gpus;
  plan.world = requested_gpus.value_or(visible_devices);
  return plan;
}

CudaLaunchPlan plan_process_per_gpu(const LaunchEnvironment& launch, int visible_devices,
                                    std::optional<int> requested_gpus) {
  const LauncherVariableNames* names = launcher_variable_names(launch.launcher);
  ZERO3_CHECK(names != nullptr, "unknown launcher '" + launch.launcher + "'");
  if (requested_gpus) {
    // One process driving several GPUs and one process per GPU cannot mix: which GPUs would the
    // other processes of the job drive?
    throw InputError("--gpus " + std::to_string(*requested_gpus) + " is for one process driving several GPUs; under " +
                     launch.launcher + " every process drives one GPU and the launcher's world counts (" + names->world +
                     "=" + std::to_string(launch.world) + "): leave out --gpus and set the number of processes with " +
                     launch.launcher);
  }
  if (launch.local_rank >= visible_devices) {
    throw InputError(std::string(names->local_rank) + "=" + std::to_string(launch.local_rank) + " has no GPU of its own: " +
                     visible_text(visible_devices) + " to this process. Start at most " +
                     std::to_string(visible_devices) + " processes per node, and let every process see all of its " +
                     "node's GPUs (a CUDA_VISIBLE_DEVICES narrowed per process hides the one its local rank names)");
  }
  CudaLaunchPlan plan;
  plan.mode = CudaLaunchPlan::process_per_gpu;
  plan.world = launch.world;
  plan.rank = launch.rank;
  plan.local_rank = launch.local_rank;
  plan.device_index = launch.local_rank;
  plan.launcher = launch.launcher;
  return plan;
}

}  // namespace

CudaLaunchPlan plan_cuda_launch(const LaunchEnvironment* env_or_null, int visible_devices,
                                std::optional<int> requested_gpus) {
  if (visible_devices < 1) {
    throw BackendError("--backend cuda: no GPU is visible to this process (check nvidia-smi and CUDA_VISIBLE_DEVICES)");
  }
  if (env_or_null == nullptr || env_or_null->launcher.empty()) return plan_single_process(visible_devices, requested_gpus);
  return plan_process_per_gpu(*env_or_null, visible_devices, requested_gpus);
}

}  // namespace zero3
