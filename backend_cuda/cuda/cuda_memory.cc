// CudaMemory (cuda_memory.h): cuda tensors' bytes from each GPU's default stream-ordered pool,
// allocated, zeroed and freed on that GPU's compute stream.
//
// Why freeing on the compute stream is safe. cudaFreeAsync(p, compute) hands p back to the pool at
// the point where the compute stream reaches the free; the next allocation on the compute stream
// may get p at once. Kernels run only on the compute stream, so they are ordered with the free.
// The one other stream is the comm stream, where NCCL reads and writes collective buffers, and for
// it the rule is: a buffer that a collective reads or writes is freed only after Work::wait() made
// the compute stream wait for that collective's completion event, so the free comes after the
// collective in stream order. NcclWork holds its buffers until wait() (or, if never waited, makes
// compute wait as it is destroyed), so dropping a tensor early cannot break the rule; and the
// engine releases its gather and reduce-scatter buffers only after wait(). In the other direction
// a new buffer's allocation and zeroing are ordered before a collective that uses it because the
// comm stream waits for the compute stream before every collective (nccl_communicator.cc).
#include "backend_cuda/cuda/cuda_memory.h"

#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <mutex>
#include <string>

#include "backend_cuda/cuda/cuda_context.h"
#include "core/base/errors.h"
#include "core/tensor/device.h"

namespace zero3 {

namespace {

// As in cuda_context.cc: more devices than a machine has, in a table read without a lock.
constexpr int kMaxDevices = 64;

// Makes a device current for one call and restores the previous one afterwards. A tensor is freed
// wherever its last reference drops, which may be a thread that drives another GPU.
class CurrentDeviceScope {
 public:
  explicit CurrentDeviceScope(int device_index) {
    check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ == device_index) {
      previous_ = -1;
    } else {
      check_cuda(cudaSetDevice(device_index), "cudaSetDevice");
    }
  }
  ~CurrentDeviceScope() {
    if (previous_ >= 0) static_cast<void>(cudaSetDevice(previous_));
  }
  CurrentDeviceScope(const CurrentDeviceScope&) = delete;
  CurrentDeviceScope& operator=(const CurrentDeviceScope&) = delete;

 private:
  int previous_ = -1;  // the device to restore, or -1 when it was already current
};

struct PoolTable {
  std::mutex configuration_mutex;  // serializes the first configuration of a device's pool
  std::array<std::atomic<cudaMemPool_t>, kMaxDevices> pools{};
};

PoolTable& pool_table() {
  static PoolTable table;
  return table;
}

cudaMemPool_t configure_default_pool(int device_index) {
  const std::string device = "cuda:" + std::to_string(device_index);
  int supported = 0;
  check_cuda(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device_index),
             "cudaDeviceGetAttribute (cudaDevAttrMemoryPoolsSupported)");
  if (supported == 0) {
    throw BackendError(device + " does not support CUDA's stream-ordered memory pools "
                                "(cudaDevAttrMemoryPoolsSupported is 0), which cuda tensors are allocated from");
  }
  cudaMemPool_t pool = nullptr;
  check_cuda(cudaDeviceGetDefaultMemPool(&pool, device_index), "cudaDeviceGetDefaultMemPool");
  // By default the pool returns its free memory to the OS at every synchronization. With no
  // threshold, freed blocks stay reserved for reuse: a steady-state training step then makes no
  // cudaFree to the OS and no new reservation either (the GPU check asserts both).
  uint64_t release_threshold = UINT64_MAX;
  check_cuda(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &release_threshold),
             "cudaMemPoolSetAttribute (cudaMemPoolAttrReleaseThreshold)");
  return pool;
}

// The device's default pool, configured once for the process.
cudaMemPool_t configured_pool(int device_index) {
  if (device_index < 0 || device_index >= kMaxDevices) {
    throw BackendError("cuda:" + std::to_string(device_index) + " is not a device index this backend supports");
  }
  PoolTable& table = pool_table();
  std::atomic<cudaMemPool_t>& slot = table.pools[static_cast<size_t>(device_index)];
  if (cudaMemPool_t pool = slot.load(std::memory_order_acquire)) return pool;
  const std::lock_guard lock(table.configuration_mutex);
  if (cudaMemPool_t pool = slot.load(std::memory_order_acquire)) return pool;
  const cudaMemPool_t pool = configure_default_pool(device_index);
  slot.store(pool, std::memory_order_release);
  return pool;
}

int64_t pool_attribute(cudaMemPool_t pool, cudaMemPoolAttr attribute, const char* call) {
  uint64_t value = 0;
  check_cuda(cudaMemPoolGetAttribute(pool, attribute, &value), call);
  return static_cast<int64_t>(value);
}

CudaPoolStats read_pool_stats(cudaMemPool_t pool) {
  CudaPoolStats stats;
  stats.reserved_bytes = pool_attribute(pool, cudaMemPoolAttrReservedMemCurrent, "cudaMemPoolGetAttribute (reserved)");
  stats.used_bytes = pool_attribute(pool, cudaMemPoolAttrUsedMemCurrent, "cudaMemPoolGetAttribute (used)");
  stats.peak_reserved_bytes =
      pool_attribute(pool, cudaMemPoolAttrReservedMemHigh, "cudaMemPoolGetAttribute (reserved high)");
  return stats;
}

std::string mebibytes(int64_t bytes) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.1f MiB", static_cast<double>(bytes) / static_cast<double>(1 << 20));
  return text;
}

[[noreturn]] void throw_out_of_memory(Device device, int64_t bytes, cudaMemPool_t pool) {
  std::string message = device_name(device) + ": cannot allocate " + std::to_string(bytes) + " bytes (" +
                        mebibytes(bytes) + ") from the stream-ordered pool";
  const CudaPoolStats stats = read_pool_stats(pool);
  message += "; the pool holds " + mebibytes(stats.reserved_bytes) + " reserved, " + mebibytes(stats.used_bytes) +
             " in use";
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
    message += "; the device has " + mebibytes(static_cast<int64_t>(free_bytes)) + " free of " +
               mebibytes(static_cast<int64_t>(total_bytes));
  }
  throw OutOfMemoryError(message);
}

void* allocate_from_pool(Device device, int64_t bytes, cudaMemPool_t pool, CudaContext& context) {
  const cudaStream_t stream = context.compute_stream();
  void* memory = nullptr;
  cudaError_t status = cudaMallocFromPoolAsync(&memory, static_cast<size_t>(bytes), pool, stream);
  if (status == cudaErrorMemoryAllocation) {
    // Handled here: a later launch check's cudaGetLastError must not report it as its own.
    static_cast<void>(cudaGetLastError());
    // The slow path, taken only when the device is full: let every queued free complete, give the
    // pool's unused reserve back, and try once more. A request that no reserved block could serve
    // in one piece may fit once those fragments are returned. The wait is the context's watched
    // one: the compute stream may be waiting for a collective that never completes.
    context.wait_for_compute_stream("the queued frees, before retrying an allocation");
    check_cuda(cudaMemPoolTrimTo(pool, 0), "cudaMemPoolTrimTo");
    status = cudaMallocFromPoolAsync(&memory, static_cast<size_t>(bytes), pool, stream);
    if (status == cudaErrorMemoryAllocation) {
      static_cast<void>(cudaGetLastError());
      throw_out_of_memory(device, bytes, pool);
    }
  }
  check_cuda(status, "cudaMallocFromPoolAsync");
  return memory;
}

// The compute stream of the device's context, or null once that context has ended.
cudaStream_t compute_stream_or_null(int device_index) {
  try {
    return cuda_context_of(device_index).compute_stream();
  } catch (const BackendError&) {
    return nullptr;
  }
}

// A free runs in a tensor's destructor, which cannot throw. The first failure is said on stderr;
// the ones after it (a device in an error state fails every call) are not repeated.
void report_free_failure(Device device, int64_t size, const char* what) noexcept {
  static std::atomic<bool> reported{false};
  if (reported.exchange(true)) return;
  std::fprintf(stderr, "zero3: freeing %lld bytes of %s failed (later failures are not repeated): %s\n",
               static_cast<long long>(size), device_name(device).c_str(), what);
}

class CudaMemory final : public DeviceMemory {
 public:
  void* allocate(Device device, int64_t bytes) override { return acquire(device, bytes, true); }
  void* allocate_uninitialized(Device device, int64_t bytes) override { return acquire(device, bytes, false); }
  void free(Device device, void* bytes, int64_t size) override;

 private:
  static void* acquire(Device device, int64_t bytes, bool zeroed);
};

void* CudaMemory::acquire(Device device, int64_t bytes, bool zeroed) {
  ZERO3_CHECK(device.kind == DeviceKind::cuda, "cuda memory asked for " + device_name(device));
  ZERO3_CHECK(bytes >= 0, std::to_string(bytes) + " bytes asked of " + device_name(device));
  if (bytes == 0) return nullptr;
  CudaContext& context = cuda_context_of(device.index);
  const CurrentDeviceScope scope(device.index);
  void* memory = allocate_from_pool(device, bytes, configured_pool(device.index), context);
  ZERO3_CHECK(reinterpret_cast<uintptr_t>(memory) % 16 == 0, "the pool returned a block not aligned to 16 bytes");
  if (zeroed) {
    // In stream order: kernels after it on the compute stream, and collectives (whose comm stream
    // first waits for the compute stream), see the zeros.
    check_cuda(cudaMemsetAsync(memory, 0, static_cast<size_t>(bytes), context.compute_stream()),
               "cudaMemsetAsync (zeroing new memory)");
  }
  return memory;
}

void CudaMemory::free(Device device, void* bytes, int64_t size) {
  if (bytes == nullptr) return;
  try {
    const CurrentDeviceScope scope(device.index);
    const cudaStream_t stream = compute_stream_or_null(device.index);
    // With its context gone, the block is freed at once: the context's destructor synchronized its
    // streams, so nothing can still be using it, which is what cudaFree of pool memory requires.
    const cudaError_t status = stream != nullptr ? cudaFreeAsync(bytes, stream) : cudaFree(bytes);
    // At process exit the runtime may already be unloading; every block goes with it then.
    if (status != cudaErrorCudartUnloading) check_cuda(status, stream != nullptr ? "cudaFreeAsync" : "cudaFree");
  } catch (const std::exception& error) {
    report_free_failure(device, size, error.what());
  }
}

}  // namespace

void register_cuda_memory() {
  static CudaMemory memory;
  register_device_memory(DeviceKind::cuda, &memory);
}

CudaPoolStats cuda_pool_stats(int device_index) { return read_pool_stats(configured_pool(device_index)); }

}  // namespace zero3
