// Partition algebra: every element owned exactly once, shards of ceil(numel / W), for any numel and W.
#include "core/sharding/partition.h"

#include <gtest/gtest.h>

#include <vector>

namespace zero3 {
namespace {

TEST(Partition, EveryElementIsOwnedByExactlyOneRank) {
  for (int64_t numel : {0, 1, 2, 3, 7, 8, 9, 100, 1023}) {
    for (int world : {1, 2, 3, 4, 7, 16, 1024}) {
      std::vector<int> owners(static_cast<size_t>(numel), 0);
      for (int rank = 0; rank < world; ++rank) {
        const ShardRange range = shard_range(numel, world, rank);
        ASSERT_LE(range.owned(), shard_numel(numel, world));
        for (int64_t i = range.begin; i < range.end; ++i) owners[static_cast<size_t>(i)]++;
      }
      for (int count : owners) ASSERT_EQ(count, 1) << "numel " << numel << " world " << world;
    }
  }
}

TEST(Partition, ShardSizeIsCeilingOfNumelOverWorld) {
  EXPECT_EQ(shard_numel(10, 4), 3);
  EXPECT_EQ(shard_numel(0, 4), 0);
  EXPECT_EQ(shard_numel(3, 8), 1);
}

TEST(Partition, TrailingRanksOfASubWorldParameterOwnNothing) {
  // numel 3 over 8 ranks: ranks 0..2 own one element each, ranks 3..7 only padding.
  EXPECT_EQ(shard_range(3, 8, 2).owned(), 1);
  EXPECT_EQ(shard_range(3, 8, 3).owned(), 0);
  EXPECT_EQ(shard_range(3, 8, 7).owned(), 0);
}

}  // namespace
}  // namespace zero3
