// The Allocator seam: every byte a rank holds is counted under a category, with a peak per
// category and overall. The simulator's allocator can refuse an allocation (fault injection);
// the engine then gets an OutOfMemoryError naming the category, the size and the rank.
//
//   allocator.acquire(MemoryCategory::gathered_param, bytes, "h.0.attn.qkv.weight");
//   ...
//   allocator.release(MemoryCategory::gathered_param, bytes);
#pragma once
#include <array>
#include <cstdint>
#include <string>

namespace zero3 {

enum class MemoryCategory : uint8_t {
  param_shard,      // this rank's partition of the parameters (compute dtype)
  gathered_param,   // full parameters gathered for a module
  grad,             // full gradients produced by backward before reduce-scatter
  grad_shard,       // this rank's f32 gradient partition (accumulated over micro-steps)
  optimizer_state,  // f32 master weights and AdamW moments
  activation,       // tensors saved for backward, and the step's micro-step losses
  comm_buffer,      // staging buffers of collectives
  secondary_param_shard,  // hpZ: shards of gathered parameters over the rank's block, for backward
  // Host memory (ZeRO-Offload): counted apart, never in a device total.
  host_param_shard,      // offload_param: this rank's parameter partition in host memory
  host_optimizer_state,  // offload_optimizer: f32 master weights and AdamW moments in host memory
};
inline constexpr int kMemoryCategoryCount = 10;
const char* memory_category_name(MemoryCategory category);
bool is_host_memory(MemoryCategory category);

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Throws OutOfMemoryError when the allocation is refused; `what` names it in that error.
  virtual void acquire(MemoryCategory category, int64_t bytes, const std::string& what) = 0;
  virtual void release(MemoryCategory category, int64_t bytes) = 0;
};

// Counts current and peak bytes per category; never refuses.
class CountingAllocator : public Allocator {
 public:
  void acquire(MemoryCategory category, int64_t bytes, const std::string& what) override;
  void release(MemoryCategory category, int64_t bytes) override;

  int64_t current_bytes(MemoryCategory category) const { return current_[index(category)]; }
  int64_t peak_bytes(MemoryCategory category) const { return peak_[index(category)]; }
  // Device memory only: the host categories are not in these totals.
  int64_t current_total_bytes() const { return current_total_; }
  int64_t peak_total_bytes() const { return peak_total_; }

 private:
  static size_t index(MemoryCategory category) { return static_cast<size_t>(category); }
  std::array<int64_t, kMemoryCategoryCount> current_{};
  std::array<int64_t, kMemoryCategoryCount> peak_{};
  int64_t current_total_ = 0;
  int64_t peak_total_ = 0;
};

}  // namespace zero3
