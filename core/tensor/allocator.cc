// Byte accounting per memory category.
#include "core/tensor/allocator.h"

#include <algorithm>

#include "core/base/errors.h"

namespace zero3 {

const char* memory_category_name(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::param_shard: return "param_shard";
    case MemoryCategory::gathered_param: return "gathered_param";
    case MemoryCategory::grad: return "grad";
    case MemoryCategory::grad_shard: return "grad_shard";
    case MemoryCategory::optimizer_state: return "optimizer_state";
    case MemoryCategory::activation: return "activation";
    case MemoryCategory::comm_buffer: return "comm_buffer";
    case MemoryCategory::secondary_param_shard: return "secondary_param_shard";
    case MemoryCategory::host_param_shard: return "host_param_shard";
    case MemoryCategory::host_optimizer_state: return "host_optimizer_state";
  }
  return "unknown";
}

bool is_host_memory(MemoryCategory category) {
  return category == MemoryCategory::host_param_shard || category == MemoryCategory::host_optimizer_state;
}

void CountingAllocator::acquire(MemoryCategory category, int64_t bytes, const std::string& what) {
  ZERO3_CHECK(bytes >= 0, "negative allocation for " + what);
  current_[index(category)] += bytes;
  peak_[index(category)] = std::max(peak_[index(category)], current_[index(category)]);
  if (is_host_memory(category)) return;
  current_total_ += bytes;
  peak_total_ = std::max(peak_total_, current_total_);
}

void CountingAllocator::release(MemoryCategory category, int64_t bytes) {
  ZERO3_CHECK(bytes >= 0 && bytes <= current_[index(category)],
              std::string("release of ") + std::to_string(bytes) + " bytes of " + memory_category_name(category) +
                  " with " + std::to_string(current_[index(category)]) + " held");
  current_[index(category)] -= bytes;
  if (!is_host_memory(category)) current_total_ -= bytes;
}

}  // namespace zero3
