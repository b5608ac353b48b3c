// Allocation accounting with injected allocation failures.
#include "sim/sim_allocator.h"

#include <array>

#include "core/base/errors.h"
#include "sim/fault_plan.h"

namespace zero3 {

namespace {

std::string_view memory_site_class(MemoryCategory category) {
  // One fixed string per category, so that a fault that does not fire costs no formatting.
  static const std::array<std::string, kMemoryCategoryCount> classes = [] {
    std::array<std::string, kMemoryCategoryCount> names;
    for (int i = 0; i < kMemoryCategoryCount; ++i) {
      names[static_cast<size_t>(i)] = std::string("memory ") + memory_category_name(static_cast<MemoryCategory>(i));
    }
    return names;
  }();
  return classes[static_cast<size_t>(category)];
}

}  // namespace

void SimAllocator::acquire(MemoryCategory category, int64_t bytes, const std::string& what) {
  const auto site = [&] {
    return std::string("acquire ") + memory_category_name(category) + " " + std::to_string(bytes) + " bytes for '" +
           what + "'";
  };
  // The class names the category: a campaign's table shows which buffers a refusal has hit.
  if (faults_ && faults_->fire(FaultKind::alloc, rank_, memory_site_class(category), site)) {
    throw OutOfMemoryError("out of memory on rank " + std::to_string(rank_) + ": refused " + std::to_string(bytes) +
                           " bytes of " + memory_category_name(category) + " for '" + what +
                           "' (injected allocation failure; holding " + std::to_string(current_total_bytes()) +
                           " bytes, peak " + std::to_string(peak_total_bytes()) + ")");
  }
  const int64_t held_before = current_bytes(category);
  CountingAllocator::acquire(category, bytes, what);
  ZERO3_CHECK(current_bytes(category) == held_before + bytes, "accounting of " + what);
}

}  // namespace zero3
