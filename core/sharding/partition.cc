// Partition arithmetic shared by the engine, the optimizer and the references.
#include "core/sharding/partition.h"

#include <algorithm>

#include "core/base/errors.h"

namespace zero3 {

int64_t shard_numel(int64_t numel, int world) {
  ZERO3_CHECK(numel >= 0 && world >= 1, "numel " + std::to_string(numel) + " world " + std::to_string(world));
  return (numel + world - 1) / world;
}

ShardRange shard_range(int64_t numel, int world, int rank) {
  ZERO3_CHECK(rank >= 0 && rank < world, "rank " + std::to_string(rank) + " of world " + std::to_string(world));
  const int64_t per_rank = shard_numel(numel, world);
  const int64_t begin = std::min(numel, per_rank * rank);
  const int64_t end = std::min(numel, per_rank * (rank + 1));
  return {begin, end};
}

}  // namespace zero3
