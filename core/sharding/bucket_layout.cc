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

void BucketLayout::pack_shards(Kernels& kernels, const std::vector<const Tensor*>& shards, Tensor& block) const {
  ZERO3_CHECK(shards.size() == entries_.size() && block.numel() == block_numel_, "bucket pack shape");
  if (block.is_meta()) return;
  for (size_t i = 0; i < entries_.size(); ++i) {
    kernels.copy_segments(*shards[i], block, {{.from = 0, .to = entries_[i].offset, .count = entries_[i].shard_numel}});
  }
}

void BucketLayout::unpack_full(Kernels& kernels, const Tensor& world_buffer, size_t index, Tensor& full) const {
  const BucketEntry& entry = entries_[index];
  ZERO3_CHECK(full.numel() == entry.numel && world_buffer.numel() == block_numel_ * world_, "bucket unpack shape");
  if (full.is_meta()) return;
  std::vector<CopySegment> owned;
  owned.reserve(static_cast<size_t>(world_));
  for (int rank = 0; rank < world_; ++rank) {
    const ShardRange range = shard_range(entry.numel, world_, rank);
    owned.push_back({.from = rank * block_numel_ + entry.offset, .to = range.begin, .count = range.owned()});
  }
  kernels.copy_segments(world_buffer, full, owned);
}

void BucketLayout::pack_full(Kernels& kernels, const std::vector<Tensor>& fulls, Tensor& world_buffer,
                             float padding_value) const {
  ZERO3_CHECK(fulls.size() == entries_.size() && world_buffer.numel() == block_numel_ * world_, "bucket pack shape");
  if (world_buffer.is_meta()) return;
  kernels.fill(world_buffer, padding_value);
  for (size_t i = 0; i < entries_.size(); ++i) {
    std::vector<CopySegment> owned;
    owned.reserve(static_cast<size_t>(world_));
    for (int rank = 0; rank < world_; ++rank) {
      const ShardRange range = shard_range(entries_[i].numel, world_, rank);
      const int64_t block = rank * block_numel_ + entries_[i].offset;
      // An unused parameter (undefined gradient) contributes zeros.
      if (fulls[i].defined()) owned.push_back({.from = range.begin, .to = block, .count = range.owned()});
      else kernels.fill_range(world_buffer, block, range.owned(), 0.0f);
    }
    if (fulls[i].defined()) kernels.copy_segments(fulls[i], world_buffer, owned);
  }
}

Tensor BucketLayout::shard_of(Kernels& kernels, const Tensor& block, size_t index) const {
  const BucketEntry& entry = entries_[index];
  if (block.is_meta()) return Tensor::meta({entry.shard_numel}, block.dtype());
  Tensor shard = device_zeros(kernels, {entry.shard_numel}, block.dtype());
  kernels.copy_segments(block, shard, {{.from = entry.offset, .to = 0, .count = entry.shard_numel}});
  return shard;
}

Tensor make_shard(Kernels& kernels, const Tensor& full, int world, int rank) {
  const int64_t per_rank = shard_numel(full.numel(), world);
  if (full.is_meta()) return Tensor::meta({per_rank}, full.dtype());
  Tensor shard = device_zeros(kernels, {per_rank}, full.dtype());
  const ShardRange range = shard_range(full.numel(), world, rank);
  kernels.copy_segments(full, shard, {{.from = range.begin, .to = 0, .count = range.owned()}});
  return shard;
}

}  // namespace zero3
