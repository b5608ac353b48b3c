// Property 8, partition algebra: for every numel and world size, sharding then gathering (through
// make_shard and BucketLayout in NCCL's buffer layout) is the identity, every element is owned by
// exactly one rank, padding is zero, and a reduce-scatter of packed gradients sums each owned
// element over the ranks.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <vector>

#include "core/sharding/bucket_layout.h"
#include "core/sharding/partition.h"
#include "props/generators.h"

namespace zero3 {
namespace {

rc::Gen<int64_t> gen_numel(int world) {
  return rc::gen::weightedOneOf<int64_t>({{3, gen_dimension(world)}, {1, rc::gen::inRange<int64_t>(0, 300)}});
}

// Distinct small integers: exact in f32, so equality is bitwise.
Tensor numbered(int64_t numel, float offset) {
  std::vector<float> values;
  for (int64_t i = 0; i < numel; ++i) values.push_back(offset + static_cast<float>(i + 1));
  return Tensor::from_values({numel}, values);
}

// The all-gather of NCCL's layout: rank r's block at r * block_numel.
Tensor all_gather(const std::vector<Tensor>& blocks) {
  std::vector<float> values;
  for (const Tensor& block : blocks) values.insert(values.end(), block.values().begin(), block.values().end());
  return Tensor::from_values({static_cast<int64_t>(values.size())}, values);
}

RC_GTEST_PROP(PartitionAlgebra, EveryElementIsOwnedExactlyOnceAndPaddingIsZero, ()) {
  const int world = *rc::gen::inRange(1, 40);
  const int64_t numel = *gen_numel(world);
  const Tensor full = numbered(numel, 0.0f);
  std::vector<int> owners(static_cast<size_t>(numel), 0);
  for (int rank = 0; rank < world; ++rank) {
    const Tensor shard = make_shard(cpu_kernels(), full, world, rank);
    const ShardRange range = shard_range(numel, world, rank);
    RC_ASSERT(shard.numel() == shard_numel(numel, world));
    for (int64_t i = 0; i < shard.numel(); ++i) {
      const bool owned = range.begin + i < range.end;
      RC_ASSERT(shard.values()[static_cast<size_t>(i)] ==
                (owned ? full.values()[static_cast<size_t>(range.begin + i)] : 0.0f));
      if (owned) owners[static_cast<size_t>(range.begin + i)]++;
    }
  }
  for (int count : owners) RC_ASSERT(count == 1);
}

RC_GTEST_PROP(PartitionAlgebra, GatheringTheShardsOfABucketGivesBackEveryParameter, ()) {
  const int world = *rc::gen::inRange(1, 20);
  const auto numels = *rc::gen::resize(6, rc::gen::container<std::vector<int64_t>>(gen_numel(world)));
  std::vector<BucketEntry> entries;
  std::vector<Tensor> fulls;
  for (size_t i = 0; i < numels.size(); ++i) {
    entries.push_back({.param_id = static_cast<int64_t>(i), .numel = numels[i]});
    fulls.push_back(numbered(numels[i], 1000.0f * static_cast<float>(i)));
  }
  const BucketLayout layout(entries, world);
  std::vector<Tensor> blocks;
  for (int rank = 0; rank < world; ++rank) {
    std::vector<Tensor> shards;
    for (const Tensor& full : fulls) shards.push_back(make_shard(cpu_kernels(), full, world, rank));
    std::vector<const Tensor*> shard_pointers;
    for (const Tensor& shard : shards) shard_pointers.push_back(&shard);
    Tensor block = Tensor::zeros({layout.block_numel()});
    layout.pack_shards(cpu_kernels(), shard_pointers, block);
    blocks.push_back(block);
  }
  const Tensor world_buffer = all_gather(blocks);
  for (size_t i = 0; i < fulls.size(); ++i) {
    Tensor gathered = Tensor::zeros({numels[i]});
    layout.unpack_full(cpu_kernels(), world_buffer, i, gathered);
    RC_ASSERT(std::vector<float>(gathered.values().begin(), gathered.values().end()) ==
              std::vector<float>(fulls[i].values().begin(), fulls[i].values().end()));
  }
}

RC_GTEST_PROP(PartitionAlgebra, ReduceScatterOfPackedGradientsSumsEachOwnedElementOverRanks, ()) {
  const int world = *rc::gen::inRange(1, 12);
  const auto numels = *rc::gen::resize(5, rc::gen::container<std::vector<int64_t>>(gen_numel(world)));
  std::vector<BucketEntry> entries;
  for (size_t i = 0; i < numels.size(); ++i)
    entries.push_back({.param_id = static_cast<int64_t>(i), .numel = numels[i]});
  const BucketLayout layout(entries, world);
  // Rank r's gradient of parameter i is numbered from 100 * r; the sum over ranks is known exactly.
  std::vector<float> summed(static_cast<size_t>(layout.block_numel() * world), 0.0f);
  for (int rank = 0; rank < world; ++rank) {
    std::vector<Tensor> grads;
    for (int64_t numel : numels) grads.push_back(numbered(numel, 100.0f * static_cast<float>(rank)));
    Tensor buffer = Tensor::zeros({layout.block_numel() * world});
    layout.pack_full(cpu_kernels(), grads, buffer);
    for (size_t k = 0; k < summed.size(); ++k) summed[k] += buffer.values()[k];
  }
  for (int rank = 0; rank < world; ++rank) {
    const auto begin = summed.begin() + rank * layout.block_numel();
    const Tensor block =
        Tensor::from_values({layout.block_numel()}, std::vector<float>(begin, begin + layout.block_numel()));
    for (size_t i = 0; i < numels.size(); ++i) {
      const Tensor shard = layout.shard_of(cpu_kernels(), block, i);
      const ShardRange range = shard_range(numels[i], world, rank);
      for (int64_t k = 0; k < shard.numel(); ++k) {
        const int64_t element = range.begin + k;
        float expected = 0.0f;
        for (int r = 0; r < world && element < range.end; ++r)
          expected += 100.0f * static_cast<float>(r) + static_cast<float>(element + 1);
        RC_ASSERT(shard.values()[static_cast<size_t>(k)] == expected);
      }
    }
  }
}

}  // namespace
}  // namespace zero3
