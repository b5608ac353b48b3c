// Device probing through the CUDA runtime and NCCL (compiled only where both are installed).
#include "backend_cuda/cuda/cuda_backend_module.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

namespace zero3 {

CudaProbe probe_cuda_runtime() {
  CudaProbe probe;
  int runtime_version = 0;
  cudaRuntimeGetVersion(&runtime_version);
  int nccl_version = 0;
  ncclGetVersion(&nccl_version);
  probe.runtime = "CUDA runtime " + std::to_string(runtime_version / 1000) + "." +
                  std::to_string(runtime_version % 1000 / 10) + ", NCCL " + std::to_string(nccl_version / 10000) + "." +
                  std::to_string(nccl_version % 10000 / 100) + "." + std::to_string(nccl_version % 100);
  const cudaError_t status = cudaGetDeviceCount(&probe.device_count);
  if (status != cudaSuccess) {
    probe.device_count = 0;
    probe.problem = std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(status);
  } else if (probe.device_count == 0) {
    probe.problem = "no CUDA device is visible";
  }
  return probe;
}

}  // namespace zero3
