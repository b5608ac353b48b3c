// CudaContext (cuda_context.h): one GPU's streams, cuBLAS handle and workspace, the host's watched
// wait for the compute stream, and the process-wide table from a device index to its context.
#include "backend_cuda/cuda/cuda_context.h"

#include <array>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <utility>
#include <vector>

#include "backend_cuda/cuda/host_wait.h"
#include "core/base/errors.h"

namespace zero3 {

namespace {

// cuBLAS's workspace, allocated once: large enough for its split-K and stream-K GEMM paths on
// current GPUs, so that no GEMM allocates (or synchronizes to allocate) on the hot path.
constexpr int64_t kCublasWorkspaceBytes = int64_t{32} << 20;
// More devices than any one machine has. The table is fixed-size so that a lookup (every device
// allocation makes one) reads an atomic and takes no lock.
constexpr int kMaxDevices = 64;

struct ContextTable {
  std::mutex registration_mutex;  // serializes registration; lookups read the slots without it
  std::array<std::atomic<CudaContext*>, kMaxDevices> contexts{};
};

// Built on first use, never at static initialisation: test discovery on a machine without a GPU
// must not touch CUDA.
ContextTable& context_table() {
  static ContextTable table;
  return table;
}

void check_device_index(int device_index) {
  if (device_index < 0 || device_index >= kMaxDevices) {
    throw BackendError("cuda:" + std::to_string(device_index) + " is not a device index this backend supports (0 to " +
                       std::to_string(kMaxDevices - 1) + ")");
  }
}

void register_context(int device_index, CudaContext* context) {
  check_device_index(device_index);
  ContextTable& table = context_table();
  const std::lock_guard lock(table.registration_mutex);
  std::atomic<CudaContext*>& slot = table.contexts[static_cast<size_t>(device_index)];
  if (slot.load() != nullptr) {
    throw BackendError("a CudaContext for cuda:" + std::to_string(device_index) +
                       " already exists in this process; there is one per device, because its compute stream "
                       "orders every allocation and free of that device's memory");
  }
  slot.store(context, std::memory_order_release);
}

void unregister_context(int device_index, const CudaContext* context) {
  ContextTable& table = context_table();
  const std::lock_guard lock(table.registration_mutex);
  std::atomic<CudaContext*>& slot = table.contexts[static_cast<size_t>(device_index)];
  if (slot.load() == context) slot.store(nullptr, std::memory_order_release);
}

// A destructor cannot throw; a failure while releasing (a device already in an error state) is
// said on stderr instead of being dropped.
void report_release_failure(cudaError_t status, const char* call, int device_index) {
  if (status == cudaSuccess) return;
  std::fprintf(stderr, "zero3: releasing cuda:%d: %s failed: %s (%s)\n", device_index, call, cudaGetErrorName(status),
               cudaGetErrorString(status));
}

// What a context creates, in creation order; released in the reverse order.
struct ContextResources {
  int device_index = 0;
  cudaStream_t compute_stream = nullptr;
  cudaStream_t comm_stream = nullptr;
  cudaEvent_t host_wait_event = nullptr;
  cublasHandle_t cublas = nullptr;
  void* cublas_workspace = nullptr;
};

void release_resources(const ContextResources& resources) noexcept {
  const int device = resources.device_index;
  report_release_failure(cudaSetDevice(device), "cudaSetDevice", device);
  // Whatever is still queued (frees, a last kernel) finishes before its streams and workspace go.
  // Blocking calls are safe here, unlike on the hot path: the rank's NcclCommunicator has gone
  // first, aborting its communicator if a collective was still pending, and an aborted NCCL
  // kernel exits, so neither stream waits for a collective that never ends.
  if (resources.compute_stream != nullptr) {
    report_release_failure(cudaStreamSynchronize(resources.compute_stream), "cudaStreamSynchronize (compute)", device);
  }
  if (resources.comm_stream != nullptr) {
    report_release_failure(cudaStreamSynchronize(resources.comm_stream), "cudaStreamSynchronize (comm)", device);
  }
  if (resources.cublas != nullptr) {
    const cublasStatus_t status = cublasDestroy(resources.cublas);
    if (status != CUBLAS_STATUS_SUCCESS) {
      std::fprintf(stderr, "zero3: releasing cuda:%d: cublasDestroy failed: %s\n", device, cublasGetStatusName(status));
    }
  }
  if (resources.cublas_workspace != nullptr) {
    report_release_failure(cudaFree(resources.cublas_workspace), "cudaFree (cuBLAS workspace)", device);
  }
  if (resources.host_wait_event != nullptr) {
    report_release_failure(cudaEventDestroy(resources.host_wait_event), "cudaEventDestroy (host wait)", device);
  }
  if (resources.comm_stream != nullptr) {
    report_release_failure(cudaStreamDestroy(resources.comm_stream), "cudaStreamDestroy (comm)", device);
  }
  if (resources.compute_stream != nullptr) {
    report_release_failure(cudaStreamDestroy(resources.compute_stream), "cudaStreamDestroy (compute)", device);
  }
}

void configure_cublas(ContextResources& resources) {
  check_cublas(cublasCreate(&resources.cublas), "cublasCreate");
  check_cublas(cublasSetStream(resources.cublas, resources.compute_stream), "cublasSetStream (compute stream)");
  // After cublasSetStream, which resets the handle to cuBLAS's own workspace pool.
  check_cublas(
      cublasSetWorkspace(resources.cublas, resources.cublas_workspace, static_cast<size_t>(kCublasWorkspaceBytes)),
      "cublasSetWorkspace");
  // f32 GEMMs stay f32. The CUDA kernels are checked against the CPU reference kernels, which
  // multiply full f32 values, with a tolerance sized for f32 summation-order differences; TF32
  // (10 mantissa bits, CUBLAS_TF32_TENSOR_OP_MATH) or BF16x9 emulation would round the inputs and
  // break it. CUBLAS_DEFAULT_MATH allows neither. Disallowing reduced-precision reductions keeps
  // the split-K sums of bf16-output GEMMs in the f32 accumulator, as the CPU reference sums.
  const auto math = static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
  check_cublas(cublasSetMathMode(resources.cublas, math), "cublasSetMathMode");
}

// Everything a context owns, or nothing: a failure part way releases what was made.
ContextResources create_resources(int device_index) {
  ContextResources resources{.device_index = device_index};
  try {
    int device_count = 0;
    check_cuda(cudaGetDeviceCount(&device_count), "cudaGetDeviceCount");
    if (device_index >= device_count) {
      throw BackendError("cuda:" + std::to_string(device_index) + " does not exist: " + std::to_string(device_count) +
                         " CUDA device(s) are visible");
    }
    check_cuda(cudaSetDevice(device_index), "cudaSetDevice");
    int least_priority = 0;
    int greatest_priority = 0;
    check_cuda(cudaDeviceGetStreamPriorityRange(&least_priority, &greatest_priority),
               "cudaDeviceGetStreamPriorityRange");
    // Non-blocking streams: neither waits implicitly for the legacy default stream, which a
    // library may use behind our back.
    check_cuda(cudaStreamCreateWithPriority(&resources.compute_stream, cudaStreamNonBlocking, least_priority),
               "cudaStreamCreateWithPriority (compute stream)");
    // The comm stream gets the higher priority: a collective's few blocks are scheduled ahead of
    // queued compute blocks, so communication overlaps compute instead of waiting behind it.
    check_cuda(cudaStreamCreateWithPriority(&resources.comm_stream, cudaStreamNonBlocking, greatest_priority),
               "cudaStreamCreateWithPriority (comm stream)");
    check_cuda(cudaEventCreateWithFlags(&resources.host_wait_event, cudaEventDisableTiming),
               "cudaEventCreateWithFlags (host wait)");
    check_cuda(cudaMalloc(&resources.cublas_workspace, static_cast<size_t>(kCublasWorkspaceBytes)),
               "cudaMalloc (cuBLAS workspace)");
    configure_cublas(resources);
  } catch (...) {
    release_resources(resources);
    throw;
  }
  return resources;
}

}  // namespace

bool cuda_not_ready(cudaError_t status) {
  if (status != cudaErrorNotReady) return false;
  if (cudaPeekAtLastError() == cudaErrorNotReady) static_cast<void>(cudaGetLastError());
  return true;
}

void check_cuda(cudaError_t status, const char* call) {
  if (status == cudaSuccess) return;
  // Clears the runtime's last-error slot: the failure is reported here, and a later
  // cudaGetLastError (a kernel launch check) must not report it a second time as its own.
  static_cast<void>(cudaGetLastError());
  int device = -1;
  const std::string where = cudaGetDevice(&device) == cudaSuccess ? " on cuda:" + std::to_string(device) : "";
  throw BackendError(std::string(call) + where + " failed: " + cudaGetErrorName(status) + " (" +
                     cudaGetErrorString(status) + ")");
}

void check_cublas(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  int device = -1;
  const std::string where = cudaGetDevice(&device) == cudaSuccess ? " on cuda:" + std::to_string(device) : "";
  throw BackendError(std::string(call) + where + " failed: " + cublasGetStatusName(status) + " (" +
                     cublasGetStatusString(status) + ")");
}

CudaContext::CudaContext(int device_index) : device_index_(device_index) {
  register_context(device_index_, this);
  try {
    const ContextResources resources = create_resources(device_index_);
    compute_stream_ = resources.compute_stream;
    comm_stream_ = resources.comm_stream;
    host_wait_event_ = resources.host_wait_event;
    cublas_ = resources.cublas;
    cublas_workspace_ = resources.cublas_workspace;
    cublas_workspace_bytes_ = kCublasWorkspaceBytes;
  } catch (...) {
    unregister_context(device_index_, this);
    throw;
  }
}

CudaContext::~CudaContext() {
  release_resources({device_index_, compute_stream_, comm_stream_, host_wait_event_, cublas_, cublas_workspace_});
  unregister_context(device_index_, this);
}

void CudaContext::make_current() const { check_cuda(cudaSetDevice(device_index_), "cudaSetDevice"); }

std::string CudaContext::description() const {
  cudaDeviceProp properties{};
  check_cuda(cudaGetDeviceProperties(&properties, device_index_), "cudaGetDeviceProperties");
  char text[320];
  std::snprintf(text, sizeof(text), "%s (sm_%d%d, %.1f GiB)", properties.name, properties.major, properties.minor,
                static_cast<double>(properties.totalGlobalMem) / static_cast<double>(int64_t{1} << 30));
  return text;
}

void CudaContext::wait_for_compute_stream(const char* why) {
  // An event marks how far the wait goes: work that other threads enqueue on the compute stream
  // afterwards (frees of tensors they drop) is not waited for.
  check_cuda(cudaEventRecord(host_wait_event_, compute_stream_), "cudaEventRecord (host wait, compute)");
  std::vector<OwnedWatchdog> watchdogs;
  {
    const std::lock_guard lock(watchdogs_mutex_);
    watchdogs = watchdogs_;
  }
  // Polled rather than cudaEventSynchronize: a blocking call sleeps inside the driver, where no
  // watchdog runs, and the compute stream may be waiting for a collective that never completes.
  const auto is_ready = [&] {
    return cuda_query_done(cudaEventQuery(host_wait_event_),
                           [&] { return "cudaEventQuery (host wait: " + std::string(why) + ")"; });
  };
  const auto watch = [&] {
    for (const OwnedWatchdog& entry : watchdogs) entry.watchdog(why);
  };
  poll_until_ready(is_ready, watch);
}

void CudaContext::add_host_wait_watchdog(const void* owner, HostWaitWatchdog watchdog) {
  ZERO3_CHECK(owner != nullptr && watchdog, "a host-wait watchdog needs an owner and a function");
  const std::lock_guard lock(watchdogs_mutex_);
  for (const OwnedWatchdog& entry : watchdogs_) {
    ZERO3_CHECK(entry.owner != owner, "one host-wait watchdog per owner on " + device_name(device()));
  }
  watchdogs_.push_back({owner, std::move(watchdog)});
}

void CudaContext::remove_host_wait_watchdog(const void* owner) {
  const std::lock_guard lock(watchdogs_mutex_);
  std::erase_if(watchdogs_, [owner](const OwnedWatchdog& entry) { return entry.owner == owner; });
}

CudaContext& cuda_context_of(int device_index) {
  check_device_index(device_index);
  CudaContext* context = context_table().contexts[static_cast<size_t>(device_index)].load(std::memory_order_acquire);
  if (context == nullptr) {
    throw BackendError("no CudaContext owns cuda:" + std::to_string(device_index) +
                       " in this process: the CUDA backend makes one per GPU before any tensor lives there");
  }
  return *context;
}

}  // namespace zero3
