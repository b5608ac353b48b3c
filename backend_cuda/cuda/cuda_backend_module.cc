// The CUDA backend module's one exported entry point (cuda_backend_module.h).
#include "backend_cuda/cuda/cuda_backend_module.h"

extern "C" __attribute__((visibility("default"))) const zero3::CudaBackendModule* zero3_cuda_backend_module() {
  static const zero3::CudaBackendModule module{.abi = zero3::kCudaBackendModuleAbi,
                                               .probe = &zero3::probe_cuda_runtime,
                                               .run_on_ranks = &zero3::run_on_cuda_devices};
  return &module;
}
