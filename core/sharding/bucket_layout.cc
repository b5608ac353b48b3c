// Packing and unpacking coalesced collective buffers (see bucket_layout.h).
#include "core/sharding/bucket_layout.h"

#include <algorithm>

#include "core/base/errors.h"
#include "core/sharding/partition.h"

namespace zero3 {

BucketLayout::BucketLayout(std::vector<BucketEntry> entries, int world) : entries_(std::move(entries)), world_(world) {
  for (BucketEntry& entry : entries_) {
    entry.shard_numel = shard_numel(entry.numel, world);
    entry.offset = block_numel_;
    block_numel_ += entry.shard_numel;
  }
}

void BucketLayout::pack_shards(const std::vector<const Tensor*>& shards, Tensor& block) const {
  ZERO3_CHECK(shards.size() == entries_.size() && block.numel() == block_numel_, "bucket pack shape");
  if (block.is_meta()) return;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const auto source = shards[i]->values();
    std::copy(source.begin(), source.end(), block.data() + entries_[i].offset);
  }
}

void BucketLayout::unpack_full(const Tensor& world_buffer, size_t index, Tensor& full) const {
  const BucketEntry& entry = entries_[index];
  ZERO3_CHECK(full.numel() == entry.numel && world_buffer.numel() == block_numel_ * world_, "bucket unpack shape");
  if (full.is_meta()) return;
  const float* source = world_buffer.data();
  float* target = full.data();
  for (int rank = 0; rank < world_; ++rank) {
    const ShardRange range = shard_range(entry.numel, world_, rank);
    std::copy_n(source + rank * block_numel_ + entry.offset, range.owned(), target + range.begin);
  }
}

void BucketLayout::pack_full(const std::vector<Tensor>& fulls, Tensor& world_buffer, float padding_value) const {
  ZERO3_CHECK(fulls.size() == entries_.size() && world_buffer.numel() == block_numel_ * world_, "bucket pack shape");
  if (world_buffer.is_meta()) return;
  float* target = world_buffer.data();
  std::fill_n(target, world_buffer.numel(), padding_value);
  for (size_t i = 0; i < entries_.size(); ++i) {
    for (int rank = 0; rank < world_; ++rank) {
      const ShardRange range = shard_range(entries_[i].numel, world_, rank);
      float* block = target + rank * block_numel_ + entries_[i].offset;
      // An unused parameter (undefined gradient) contributes zeros.
      if (fulls[i].defined()) std::copy_n(fulls[i].data() + range.begin, range.owned(), block);
      else std::fill_n(block, range.owned(), 0.0f);
    }
  }
}

Tensor BucketLayout::shard_of(const Tensor& block, size_t index) const {
  const BucketEntry& entry = entries_[index];
  if (block.is_meta()) return Tensor::meta({entry.shard_numel}, block.dtype());
  std::vector<float> values(block.data() + entry.offset, block.data() + entry.offset + entry.shard_numel);
  return Tensor::from_values({entry.shard_numel}, std::move(values), block.dtype());
}

Tensor make_shard(const Tensor& full, int world, int rank) {
  const int64_t per_rank = shard_numel(full.numel(), world);
  if (full.is_meta()) return Tensor::meta({per_rank}, full.dtype());
  Tensor shard = Tensor::zeros({per_rank}, full.dtype());
  const ShardRange range = shard_range(full.numel(), world, rank);
  std::copy_n(full.data() + range.begin, range.owned(), shard.data());
  return shard;
}

}  // namespace zero3
