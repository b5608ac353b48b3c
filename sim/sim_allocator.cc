// Allocation accounting with injected allocation failures.
#include "sim/sim_allocator.h"

#include "core/base/errors.h"
#include "sim/fault_plan.h"

namespace zero3 {

void SimAllocator::acquire(MemoryCategory category, int64_t bytes, const std::string& what) {
  const auto site = [&] {
    return std::string("acquire ") + memory_category_name(category) + " " + std::to_string(bytes) + " bytes for '" +
           what + "'";
  };
  if (faults_ && faults_->fire(FaultKind::alloc, rank_, site)) {
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
