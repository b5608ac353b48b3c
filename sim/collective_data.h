// The data movement of one matched collective over the ranks' buffers, in NCCL's layout:
// all-gather puts rank i's block at i * count of every output; reduce-scatter gives rank i the
// reduction of block i; reductions run in rank order (rank 0 op rank 1 op ...), rounding to bf16
// after each step for bf16 buffers, so every result is a deterministic function of the inputs.
// Blocks move with memcpy of dtype-sized elements (bf16 buffers hold real bf16 bits); reductions
// are one pass per rank over contiguous blocks, in float, rounded back to bf16 for bf16 buffers
// (core/sharding/rank_order_reduction.h, the arithmetic MPI's collectives share).
// These are the simulated device's own collectives: they run where the bytes are, so they read
// device memory directly (Tensor::device_bytes), as NCCL does on a GPU.
#pragma once
#include <cstdint>
#include <span>

#include "core/sharding/communicator.h"

namespace zero3 {

// inputs[r] / outputs[r]: rank r's input and output elements, null where the op has none
// (broadcast: only the root has an input and every other rank an output; barrier: none).
// Inputs must not overlap outputs.
void move_collective_data(const CollectiveSignature& signature, std::span<const void* const> inputs,
                          std::span<void* const> outputs);

// Fills `count` elements of `dtype` with a quiet NaN (all bits set), with memset's speed.
void poison(void* data, int64_t count, DType dtype);

}  // namespace zero3
