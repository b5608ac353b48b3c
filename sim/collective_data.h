// The data movement of one matched collective over the ranks' buffers, in NCCL's layout:
// all-gather puts rank i's block at i * count of every output; reduce-scatter gives rank i the
// reduction of block i; reductions run in rank order (rank 0 op rank 1 op ...), rounding to bf16
// after each step for bf16 buffers, so every result is a deterministic function of the inputs.
// Blocks move with memcpy; reductions are one pass per rank over contiguous blocks.
#pragma once
#include <cstdint>
#include <span>

#include "core/sharding/communicator.h"

namespace zero3 {

// inputs[r] / outputs[r]: rank r's input and output elements, null where the op has none
// (broadcast: only the root has an input and every other rank an output; barrier: none).
// Inputs must not overlap outputs.
void move_collective_data(const CollectiveSignature& signature, std::span<const float* const> inputs,
                          std::span<float* const> outputs);

// Fills `count` elements with a quiet NaN (all bits set), with memset's speed.
void poison(float* data, int64_t count);

}  // namespace zero3
