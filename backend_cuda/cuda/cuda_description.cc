// describe_cuda_backend (cuda_world.h), the same in every build: it reads probe_cuda, which the
// loader (cuda_backend_loader.cc) or the absent stand-in (cuda_device_absent.cc) provides.
#include "backend_cuda/cuda/cuda_device.h"
#include "backend_cuda/cuda/cuda_world.h"

namespace zero3 {

std::string describe_cuda_backend() {
  const CudaProbe probe = probe_cuda();
  if (probe.device_count == 0) return probe.problem;
  return probe.runtime + ", " + std::to_string(probe.device_count) + " device(s)";
}

}  // namespace zero3
