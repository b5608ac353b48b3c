// The probe on a build without the CUDA toolkit or NCCL: it says so.
#include "backend_cuda/cuda/cuda_device.h"

namespace zero3 {

CudaProbe probe_cuda() {
  CudaProbe probe;
  probe.problem = "this zero3 was built without the CUDA toolkit and NCCL (configure with -DZERO3_CUDA=ON where they are)";
  return probe;
}

}  // namespace zero3
