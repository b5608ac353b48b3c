// memcpy blocks and rank-ordered reductions.
#include "sim/collective_data.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/sharding/rank_order_reduction.h"
#include "core/tensor/dtype.h"
#include "core/base/errors.h"

namespace zero3 {

namespace {

constexpr int64_t kCopyChunkBytes = int64_t{256} << 10;
// An all-gather writing more than this in all (every rank's whole output) cannot leave its outputs
// in cache for their readers, so it writes past the cache instead of first reading every
// destination line into it: the same choice memcpy makes for one large copy.
constexpr int64_t kStreamingWriteBytesMin = int64_t{64} << 20;

const char* at(const void* data, int64_t bytes) { return static_cast<const char*>(data) + bytes; }
char* at(void* data, int64_t bytes) { return static_cast<char*>(data) + bytes; }

// memcpy with non-temporal stores where the target has them (SSE2: every x86-64), memcpy elsewhere.
void copy_past_cache(void* destination, const void* source, size_t bytes) {
#if defined(__SSE2__)
  auto* to = static_cast<char*>(destination);
  const auto* from = static_cast<const char*>(source);
  // Streaming stores need 16-byte aligned destinations: the unaligned head and the tail go by memcpy.
  const size_t head = std::min(bytes, (16 - reinterpret_cast<uintptr_t>(to) % 16) % 16);
  std::memcpy(to, from, head);
  size_t offset = head;
  for (; offset + 64 <= bytes; offset += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + offset));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + offset + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + offset + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + offset + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + offset), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + offset + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + offset + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + offset + 48), d);
  }
  std::memcpy(to + offset, from + offset, bytes - offset);
#else
  std::memcpy(destination, source, bytes);
#endif
}

// Orders the streaming stores before whatever reads the outputs next.
void finish_copies_past_cache() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

void gather(std::span<const void* const> inputs, std::span<void* const> outputs, int64_t block_bytes) {
  const size_t world = inputs.size();
  const bool streaming = block_bytes * static_cast<int64_t>(world * world) > kStreamingWriteBytesMin;
  // Block by block, in chunks small enough to stay in cache while they are copied to every rank:
  // each input is read from memory once, not once per rank.
  for (size_t block = 0; block < world; ++block) {
    for (int64_t offset = 0; offset < block_bytes; offset += kCopyChunkBytes) {
      const size_t chunk = static_cast<size_t>(std::min(kCopyChunkBytes, block_bytes - offset));
      const int64_t position = static_cast<int64_t>(block) * block_bytes + offset;
      for (size_t rank = 0; rank < world; ++rank) {
        if (streaming) {
          copy_past_cache(at(outputs[rank], position), at(inputs[block], offset), chunk);
        } else {
          std::memcpy(at(outputs[rank], position), at(inputs[block], offset), chunk);
        }
      }
    }
  }
  if (streaming) finish_copies_past_cache();
}

}  // namespace

void poison(void* data, int64_t count, DType dtype) {
  // All bits set is a quiet NaN in f32 and in bf16.
  if (count > 0) std::memset(data, 0xFF, static_cast<size_t>(count * dtype_bytes(dtype)));
}

void move_collective_data(const CollectiveSignature& signature, std::span<const void* const> inputs,
                          std::span<void* const> outputs) {
  const size_t world = inputs.size();
  ZERO3_CHECK(outputs.size() == world, "inputs and outputs for " + std::to_string(world) + " ranks");
  const int64_t count = signature.count;
  const int64_t block_bytes = count * dtype_bytes(signature.dtype);
  if (count == 0) return;
  switch (signature.op) {
    case CollectiveOp::all_gather:
      gather(inputs, outputs, block_bytes);
      return;
    case CollectiveOp::reduce_scatter:
      for (size_t rank = 0; rank < world; ++rank) {
        reduce_in_rank_order(signature.reduce, signature.dtype, inputs, static_cast<int64_t>(rank) * count,
                             outputs[rank], count);
      }
      return;
    case CollectiveOp::all_reduce:
      // Reduce once into rank 0's output, then copy: every rank gets the same bits.
      reduce_in_rank_order(signature.reduce, signature.dtype, inputs, 0, outputs[0], count);
      for (size_t rank = 1; rank < world; ++rank) std::memcpy(outputs[rank], outputs[0], static_cast<size_t>(block_bytes));
      return;
    case CollectiveOp::broadcast: {
      const void* source = inputs[static_cast<size_t>(signature.root)];
      for (size_t rank = 0; rank < world; ++rank) {
        if (outputs[rank] != nullptr) std::memcpy(outputs[rank], source, static_cast<size_t>(block_bytes));
      }
      return;
    }
    case CollectiveOp::barrier: return;
  }
}

}  // namespace zero3
