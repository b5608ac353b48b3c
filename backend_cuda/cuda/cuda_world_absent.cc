// The CUDA backend in a build without the toolkit or NCCL: every entry point says why (exit 4).
#include "backend_cuda/cuda/cuda_device.h"
#include "backend_cuda/cuda/cuda_world.h"
#include "core/base/errors.h"

namespace zero3 {

void run_on_cuda_ranks(const CudaRunOptions&, const std::function<void(CudaRank&)>&) {
  throw BackendError("--backend cuda: " + probe_cuda().problem);
}

}  // namespace zero3
