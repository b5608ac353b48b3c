// memcpy blocks and rank-ordered reductions.
#include "sim/collective_data.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/tensor/dtype.h"
#include "core/base/errors.h"

namespace zero3 {

namespace {

constexpr int64_t kCopyChunkElements = (int64_t{256} << 10) / static_cast<int64_t>(sizeof(float));

size_t block_bytes(int64_t count) { return static_cast<size_t>(count) * sizeof(float); }

// out[j] = out[j] op in[j] for one more rank.
void reduce_step(ReduceOp op, DType dtype, const float* in, float* out, int64_t count) {
  if (op == ReduceOp::max) {
    // NaN wins, as in torch.maximum, so a poisoned input can never hide behind a larger value.
    for (int64_t j = 0; j < count; ++j) out[j] = (in[j] > out[j] || std::isnan(in[j])) ? in[j] : out[j];
    return;
  }
  if (dtype == DType::bf16) {
    for (int64_t j = 0; j < count; ++j) out[j] = round_to_bf16(out[j] + in[j]);
    return;
  }
  for (int64_t j = 0; j < count; ++j) out[j] += in[j];
}

// out = inputs[0][offset..] op inputs[1][offset..] op ... in rank order.
void reduce_block(const CollectiveSignature& signature, std::span<const float* const> inputs, int64_t offset,
                  float* out) {
  const int64_t count = signature.count;
  std::memcpy(out, inputs[0] + offset, block_bytes(count));
  for (size_t rank = 1; rank < inputs.size(); ++rank) {
    reduce_step(signature.reduce, signature.dtype, inputs[rank] + offset, out, count);
  }
}

}  // namespace

void poison(float* data, int64_t count) {
  // All bits set is a quiet NaN in f32, and still NaN when read as bf16.
  if (count > 0) std::memset(data, 0xFF, block_bytes(count));
}

void move_collective_data(const CollectiveSignature& signature, std::span<const float* const> inputs,
                          std::span<float* const> outputs) {
  const size_t world = inputs.size();
  ZERO3_CHECK(outputs.size() == world, "inputs and outputs for " + std::to_string(world) + " ranks");
  const int64_t count = signature.count;
  if (count == 0) return;
  switch (signature.op) {
    case CollectiveOp::all_gather:
      // Block by block, in chunks small enough to stay in cache while they are copied to every
      // rank: each input is read from memory once, not once per rank.
      for (size_t block = 0; block < world; ++block) {
        for (int64_t offset = 0; offset < count; offset += kCopyChunkElements) {
          const int64_t chunk = std::min(kCopyChunkElements, count - offset);
          const int64_t position = static_cast<int64_t>(block) * count + offset;
          for (size_t rank = 0; rank < world; ++rank) {
            std::memcpy(outputs[rank] + position, inputs[block] + offset, block_bytes(chunk));
          }
        }
      }
      return;
    case CollectiveOp::reduce_scatter:
      for (size_t rank = 0; rank < world; ++rank) {
        reduce_block(signature, inputs, static_cast<int64_t>(rank) * count, outputs[rank]);
      }
      return;
    case CollectiveOp::all_reduce:
      // Reduce once into rank 0's output, then copy: every rank gets the same bits.
      reduce_block(signature, inputs, 0, outputs[0]);
      for (size_t rank = 1; rank < world; ++rank) std::memcpy(outputs[rank], outputs[0], block_bytes(count));
      return;
    case CollectiveOp::broadcast: {
      const float* source = inputs[static_cast<size_t>(signature.root)];
      for (size_t rank = 0; rank < world; ++rank) {
        if (outputs[rank] != nullptr) std::memcpy(outputs[rank], source, block_bytes(count));
      }
      return;
    }
    case CollectiveOp::barrier: return;
  }
}

}  // namespace zero3
