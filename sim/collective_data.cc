// memcpy blocks and rank-ordered reductions.
#include "sim/collective_data.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/sharding/rank_order_reduction.h"
#include "core/tensor/dtype.h"
#include "core/base/errors.h"

namespace zero3 {

namespace {

constexpr int64_t kCopyChunkBytes = int64_t{256} << 10;

const char* at(const void* data, int64_t bytes) { return static_cast<const char*>(data) + bytes; }
char* at(void* data, int64_t bytes) { return static_cast<char*>(data) + bytes; }

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
      // Block by block, in chunks small enough to stay in cache while they are copied to every
      // rank: each input is read from memory once, not once per rank.
      for (size_t block = 0; block < world; ++block) {
        for (int64_t offset = 0; offset < block_bytes; offset += kCopyChunkBytes) {
          const int64_t chunk = std::min(kCopyChunkBytes, block_bytes - offset);
          const int64_t position = static_cast<int64_t>(block) * block_bytes + offset;
          for (size_t rank = 0; rank < world; ++rank) {
            std::memcpy(at(outputs[rank], position), at(inputs[block], offset), static_cast<size_t>(chunk));
          }
        }
      }
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
