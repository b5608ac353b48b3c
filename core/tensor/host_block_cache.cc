// The host block cache (host_block_cache.h): free lists per size class behind one mutex (the
// CUDA backend's per-GPU host threads share it; uncontended it costs tens of nanoseconds).
#include "core/tensor/host_block_cache.h"

#include <bit>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "core/base/errors.h"

namespace zero3 {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCaching = false;
#else
constexpr bool kCaching = true;
#endif

// Class c holds blocks of class_bytes(c): 4 classes per power of two, a size in
// (2^o + q 2^(o-2), 2^o + (q+1) 2^(o-2)] going to class 4 (o - 11) + q. kMinCachedBytes = 2^12
// is class 3, the first one used.
constexpr int kClassesPerOctave = 4;
constexpr size_t kBlockAlignment = 64;
constexpr int kClasses = kClassesPerOctave * 50;

int size_class(int64_t bytes) {
  const auto value = static_cast<uint64_t>(bytes - 1);
  const int octave = 63 - std::countl_zero(value | 1);   // 2^octave <= bytes - 1 < 2^(octave + 1)
  const int quarter = static_cast<int>((value >> (octave - 2)) & 3);
  return (octave - 11) * kClassesPerOctave + quarter;
}

int64_t class_bytes(int size_class_index) {
  const int octave = size_class_index / kClassesPerOctave + 11;
  const int64_t quarter = size_class_index % kClassesPerOctave;
  return (int64_t{4} + quarter + 1) << (octave - 2);
}

struct Cache {
  std::mutex mutex;
  std::vector<void*> free_blocks[kClasses];
  HostBlockCacheStats stats;
};

Cache& cache() {
  // Never destroyed: tensors in static storage free their blocks during exit.
  static Cache* instance = new Cache();
  return *instance;
}

[[noreturn]] void refused(int64_t bytes, Device device) {
  throw OutOfMemoryError(device_name(device) + " allocation of " + std::to_string(bytes) + " bytes failed");
}

}  // namespace

void* host_block_acquire(int64_t bytes, bool zeroed, Device device) {
  if (bytes == 0) return nullptr;
  if (!kCaching || bytes < kMinCachedBytes) {
    // calloc, not aligned_alloc + memset: most tensors are small, and glibc's memalign splits
    // chunks on every call. Large blocks come from mmap already zeroed.
    void* memory = zeroed ? std::calloc(static_cast<size_t>(bytes), 1) : std::malloc(static_cast<size_t>(bytes));
    if (memory == nullptr) refused(bytes, device);
    return memory;
  }
  const int index = size_class(bytes);
  ZERO3_CHECK(index < kClasses, "host block of " + std::to_string(bytes) + " bytes is beyond every size class");
  void* block = nullptr;
  {
    Cache& c = cache();
    const std::lock_guard lock(c.mutex);
    if (!c.free_blocks[index].empty()) {
      block = c.free_blocks[index].back();
      c.free_blocks[index].pop_back();
      c.stats.cached_bytes -= class_bytes(index);
      ++c.stats.hits;
    } else {
      ++c.stats.misses;
    }
  }
  if (block != nullptr) {
    if (zeroed) std::memset(block, 0, static_cast<size_t>(bytes));
    return block;
  }
  // Cache-line aligned: BLAS writes GEMM outputs straight into these blocks, and vector stores
  // that straddle cache lines cost it measurably (class sizes are multiples of 64).
  const auto capacity = static_cast<size_t>(class_bytes(index));
  block = std::aligned_alloc(kBlockAlignment, capacity);
  if (block == nullptr) refused(bytes, device);
  if (zeroed) std::memset(block, 0, static_cast<size_t>(bytes));
  return block;
}

void host_block_release(void* block, int64_t bytes) {
  if (block == nullptr) return;
  if (kCaching && bytes >= kMinCachedBytes) {
    const int index = size_class(bytes);
    Cache& c = cache();
    const std::lock_guard lock(c.mutex);
    if (c.stats.cached_bytes + class_bytes(index) <= kMaxCachedBytes) {
      c.free_blocks[index].push_back(block);
      c.stats.cached_bytes += class_bytes(index);
      return;
    }
  }
  std::free(block);
}

HostBlockCacheStats host_block_cache_stats() {
  Cache& c = cache();
  const std::lock_guard lock(c.mutex);
  return c.stats;
}

}  // namespace zero3
