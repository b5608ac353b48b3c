// What the CUDA backend can see on this machine: devices, the CUDA runtime and NCCL versions.
// `zero3 train --backend cuda` starts here, so a machine without a GPU gets a clear error
// (BackendError, exit 4) rather than a crash deep inside a kernel launch.
#pragma once
#include <string>

namespace zero3 {

struct CudaProbe {
  int device_count = 0;
  std::string runtime;       // e.g. "CUDA runtime 13.0, NCCL 2.27.3"
  std::string problem;       // why there is no usable device, when device_count == 0
};

// In the zero3 binary this loads the CUDA backend module first (cuda_backend_loader.cc); where it
// cannot, `problem` says why.
CudaProbe probe_cuda();

}  // namespace zero3
