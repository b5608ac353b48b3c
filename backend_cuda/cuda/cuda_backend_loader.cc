// probe_cuda and run_on_cuda_ranks in the zero3 binary: each loads the CUDA backend module on
// first use (cuda_backend_module.h) and forwards to it. Where the module cannot be loaded (moved
// away, a CUDA library missing on this machine, another build's module), the probe says why, and a run that needs a GPU ends with that reason as a BackendError (exit 4).
#include <dlfcn.h>

#include <filesystem>
#include <string>
#include <system_error>

#include "backend_cuda/cuda/cuda_backend_module.h"
#include "core/base/errors.h"

namespace zero3 {
namespace {

struct LoadedModule {
  const CudaBackendModule* module = nullptr;  // null when it could not be loaded
  std::string problem;                        // why not
};

// Beside the binary that runs, wherever it was copied with it: /proc/self/exe, not argv[0] or PATH.
std::filesystem::path module_path() {
  std::error_code error;
  const std::filesystem::path binary = std::filesystem::read_symlink("/proc/self/exe", error);
  return (error ? std::filesystem::path() : binary.parent_path()) / kCudaBackendModuleFile;
}

LoadedModule load_module() {
  const std::filesystem::path path = module_path();
  const std::string where = "the CUDA backend module " + path.string();
  if (!std::filesystem::exists(path)) {
    return {nullptr, where + " is missing (it is built beside zero3, and a copied zero3 needs it in its folder)"};
  }
  // Never unloaded: the module's code runs on rank threads and its statics live until exit.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return {nullptr, where + " could not be loaded: " + dlerror()};
  using Entry = const CudaBackendModule* (*)();
  const auto entry = reinterpret_cast<Entry>(dlsym(handle, kCudaBackendModuleEntry));
  if (entry == nullptr) return {nullptr, where + " has no " + kCudaBackendModuleEntry + " entry point"};
  const CudaBackendModule* module = entry();
  if (module == nullptr || module->abi != kCudaBackendModuleAbi) {
    return {nullptr, where + " is from another build (its interface version is " +
                         (module ? std::to_string(module->abi) : std::string("unknown")) + ", this zero3's is " +
                         std::to_string(kCudaBackendModuleAbi) + "): rebuild both together"};
  }
  return {module, ""};
}

const LoadedModule& loaded_module() {
  static const LoadedModule loaded = load_module();
  return loaded;
}

}  // namespace

CudaProbe probe_cuda() {
  const LoadedModule& loaded = loaded_module();
  if (loaded.module != nullptr) return loaded.module->probe();
  CudaProbe probe;
  probe.problem = loaded.problem;
  return probe;
}

void run_on_cuda_ranks(const CudaRunOptions& options, const std::function<void(CudaRank&)>& program) {
  const LoadedModule& loaded = loaded_module();
  if (loaded.module == nullptr) throw BackendError("--backend cuda: " + loaded.problem);
  loaded.module->run_on_ranks(options, program);
}

}  // namespace zero3
