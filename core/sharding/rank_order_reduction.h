// The one reduction arithmetic every deterministic communicator uses (the simulator's and MPI's):
// out = blocks[0] op blocks[1] op ... in rank order, in float, rounded back to bf16 after each step
// for bf16 buffers. Sharing it is what makes a run over MPI bit for bit equal to the simulator's:
// the same inputs reach the same additions in the same order, whatever transport carried them.
#pragma once
#include <cstdint>
#include <span>

#include "core/sharding/communicator.h"

namespace zero3 {

// Rank r's `count` elements of `dtype` start `offset` elements into blocks[r] (the simulator
// reduces block i of every rank's buffer in place; MPI passes its staged blocks with offset 0).
// `out` may not overlap any block. For max, NaN wins (as in torch.maximum), so a poisoned input
// can never hide behind a larger value.
void reduce_in_rank_order(ReduceOp op, DType dtype, std::span<const void* const> blocks, int64_t offset, void* out,
                          int64_t count);

}  // namespace zero3
