// How a flat parameter of `numel` elements is split over `world` ranks: every rank holds
// ps = ceil(numel / world) elements; rank r owns [r*ps, (r+1)*ps) ∩ [0, numel) and the rest of its
// shard is zero padding. numel == 0 and numel < world are ordinary cases: some ranks then own
// nothing but padding (or, for numel == 0, hold empty shards).
#pragma once
#include <cstdint>

namespace zero3 {

struct ShardRange {
  int64_t begin = 0;  // first owned element of the flat parameter
  int64_t end = 0;    // one past the last owned element; end - begin may be 0
  int64_t owned() const { return end - begin; }
};

int64_t shard_numel(int64_t numel, int world);                   // ceil(numel / world)
ShardRange shard_range(int64_t numel, int world, int rank);      // owned elements, clamped to numel

}  // namespace zero3
