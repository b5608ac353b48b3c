// The seam between the zero3 binary and the CUDA backend, which lives in its own module
// (libzero3_cuda_backend.so, beside the binary) loaded on the first call that needs a GPU
// (cuda_backend_loader.cc). Only that module needs the CUDA runtime, cuBLAS and NCCL, so every
// other command starts without them: they are ~230 MB of mappings and a fifth of a short
// command's start-up in the dynamic linker.
//
// The module resolves the core's symbols against the binary that loads it (which exports them),
// so there is one copy of the core, its types and its statics in the process. Both sides are built
// together by one compiler from one tree; kCudaBackendModuleAbi catches a module from another build.
#pragma once
#include <cstdint>
#include <functional>
#include "backend_cuda/cuda/cuda_device.h"
#include "backend_cuda/cuda/cuda_world.h"

namespace zero3 {

// Bump when CudaBackendModule, CudaProbe, CudaRunOptions or CudaRank change layout.
inline constexpr uint32_t kCudaBackendModuleAbi = 2;
inline constexpr const char* kCudaBackendModuleFile = "libzero3_cuda_backend.so";
inline constexpr const char* kCudaBackendModuleEntry = "zero3_cuda_backend_module";

struct CudaBackendModule {
  uint32_t abi = kCudaBackendModuleAbi;
  CudaProbe (*probe)() = nullptr;
  void (*run_on_ranks)(const CudaRunOptions& options, const std::function<void(CudaRank&)>& program) = nullptr;
};

// The module's own implementations, named apart from probe_cuda / run_on_cuda_ranks: the binary
// defines those (as the loader) and exports them, and a module symbol of the same name would be
// bound to the binary's, which calls back into the module, forever.
CudaProbe probe_cuda_runtime();
void run_on_cuda_devices(const CudaRunOptions& options, const std::function<void(CudaRank&)>& program);

}  // namespace zero3

// What the loader looks up in the module.
extern "C" const zero3::CudaBackendModule* zero3_cuda_backend_module();
