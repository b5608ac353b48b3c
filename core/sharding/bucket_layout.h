// Coalescing several parameters into one collective. A bucket lists parameters (ordered by id)
// with their shard size ps and their offset in a rank's block; a rank block is the
// concatenation of the parameters' shards, and the world buffer is `world` blocks, rank r's at
// r * block_numel — NCCL's all-gather / reduce-scatter layout.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor/kernels.h"

namespace zero3 {

struct BucketEntry {
  int64_t param_id = 0;
  int64_t numel = 0;        // of the full parameter
  int64_t shard_numel = 0;  // ps = ceil(numel / world)
  int64_t offset = 0;       // in the rank block
};

class BucketLayout {
 public:
  BucketLayout(std::vector<BucketEntry> entries, int world);

  const std::vector<BucketEntry>& entries() const { return entries_; }
  int64_t block_numel() const { return block_numel_; }
  int world() const { return world_; }

  // Every move below is a segmented copy or fill on the buffers' device (the Kernels seam).
  // Concatenates this rank's shards (one per entry, each of shard_numel) into a block.
  void pack_shards(Kernels& kernels, const std::vector<const Tensor*>& shards, Tensor& block) const;
  // From the gathered world buffer, writes entry `index`'s full parameter (padding dropped).
  void unpack_full(Kernels& kernels, const Tensor& world_buffer, size_t index, Tensor& full) const;
  // Lays full gradients (undefined = zeros) out as a world buffer for reduce-scatter; padding
  // elements get `padding_value` (0 unless a bug injection asks for garbage).
  void pack_full(Kernels& kernels, const std::vector<Tensor>& fulls, Tensor& world_buffer,
                 float padding_value = 0.0f) const;
  // This rank's reduced slice of entry `index` from the reduce-scatter output block (a copy).
  Tensor shard_of(Kernels& kernels, const Tensor& block, size_t index) const;

 private:
  std::vector<BucketEntry> entries_;
  int world_;
  int64_t block_numel_ = 0;
};

// A rank's shard of a full flat value, on the kernels' device: the owned range copied, the
// padding zero-filled.
Tensor make_shard(Kernels& kernels, const Tensor& full, int world, int rank);

}  // namespace zero3
