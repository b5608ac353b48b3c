// Host memory for tensors, kept for reuse: a training step allocates the same sizes every step,
// so after the first step its tensors come from blocks freed by the step before instead of from
// fresh pages (each a page fault) or calloc's zeroing. Sizes are rounded up to classes a quarter
// of a power of two apart (at most 25 % slack), a freed block waits on its class's list, and the
// lists together hold at most kMaxCachedBytes (beyond that a free goes back to the system).
// Blocks below kMinCachedBytes go straight to malloc, whose own caches already serve them well.
//
// Under AddressSanitizer every block goes back to the system at once, so a use after free is
// still a report and not a read of some later tensor's bytes.
//
//   void* bytes = host_block_acquire(4096, /*zeroed=*/false, Device::cpu);
//   host_block_release(bytes, 4096);   // the same size it was acquired with
#pragma once
#include <cstdint>

#include "core/tensor/device.h"

namespace zero3 {

inline constexpr int64_t kMinCachedBytes = 4096;
inline constexpr int64_t kMaxCachedBytes = int64_t{1} << 30;

// `bytes` of host memory (null for 0), zero-filled when asked, aligned as malloc aligns; an
// OutOfMemoryError naming `device` when the system refuses.
void* host_block_acquire(int64_t bytes, bool zeroed, Device device);
void host_block_release(void* block, int64_t bytes);

struct HostBlockCacheStats {
  int64_t hits = 0;           // acquisitions served from a freed block
  int64_t misses = 0;         // acquisitions the system served
  int64_t cached_bytes = 0;   // held on the free lists now
};
HostBlockCacheStats host_block_cache_stats();

}  // namespace zero3
