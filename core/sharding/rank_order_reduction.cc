// Rank-ordered reductions (rank_order_reduction.h).
#include "core/sharding/rank_order_reduction.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/base/errors.h"
#include "core/tensor/dtype.h"

namespace zero3 {

namespace {

// 16 KiB of f32: the chunk of the output and one rank's chunk of input stay in L1 together.
constexpr int64_t kChunkElements = 4096;

float element(DType dtype, const void* data, int64_t index) {
  if (dtype == DType::bf16) return bf16_value(static_cast<const uint16_t*>(data)[index]);
  return static_cast<const float*>(data)[index];
}

void set_element(DType dtype, void* data, int64_t index, float value) {
  if (dtype == DType::bf16) static_cast<uint16_t*>(data)[index] = bf16_bits(value);
  else static_cast<float*>(data)[index] = value;
}

// out[j] = out[j] op in[j] for one more rank.
void reduce_step(ReduceOp op, DType dtype, const void* in, void* out, int64_t count) {
  if (op == ReduceOp::max) {
    for (int64_t j = 0; j < count; ++j) {
      const float a = element(dtype, in, j), b = element(dtype, out, j);
      set_element(dtype, out, j, (a > b || std::isnan(a)) ? a : b);
    }
    return;
  }
  if (dtype == DType::bf16) {
    for (int64_t j = 0; j < count; ++j) set_element(dtype, out, j, element(dtype, out, j) + element(dtype, in, j));
    return;
  }
  // Never overlapping (reduce_in_rank_order's contract): restrict lets the loop vectorise without
  // a runtime overlap check.
  float* __restrict target = static_cast<float*>(out);
  const float* __restrict source = static_cast<const float*>(in);
  for (int64_t j = 0; j < count; ++j) target[j] += source[j];
}

}  // namespace

void reduce_in_rank_order(ReduceOp op, DType dtype, std::span<const void* const> blocks, int64_t offset, void* out,
                          int64_t count) {
  ZERO3_CHECK(!blocks.empty(), "a reduction needs at least one rank's block");
  if (count == 0) return;
  const int64_t element_bytes = dtype_bytes(dtype);
  // Chunk by chunk, every rank's step on one chunk before the next: the chunk of `out` stays in
  // cache across the W steps, so each input is read once and `out` written once, instead of W
  // passes over all of `out`. Each element still sees the same operations in the same rank order,
  // so the bits are those of the whole-buffer passes.
  for (int64_t start = 0; start < count; start += kChunkElements) {
    const int64_t chunk = std::min(kChunkElements, count - start);
    const int64_t chunk_offset_bytes = (offset + start) * element_bytes;
    const auto block = [&](size_t rank) { return static_cast<const char*>(blocks[rank]) + chunk_offset_bytes; };
    char* chunk_out = static_cast<char*>(out) + start * element_bytes;
    std::memcpy(chunk_out, block(0), static_cast<size_t>(chunk * element_bytes));
    for (size_t rank = 1; rank < blocks.size(); ++rank) reduce_step(op, dtype, block(rank), chunk_out, chunk);
  }
}

}  // namespace zero3
