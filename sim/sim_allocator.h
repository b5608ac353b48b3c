// SimAllocator: one rank's byte accounting (CountingAllocator: current and peak per category) with
// seeded allocation failures. A refused acquire throws OutOfMemoryError naming the rank, the
// category, the size and what was being allocated, and changes no count.
//
//   SimAllocator allocator(rank, &faults);
//   allocator.acquire(MemoryCategory::gathered_param, 4096, "h.0.attn.qkv.weight");
#pragma once
#include <string>

#include "core/tensor/allocator.h"

namespace zero3 {

class FaultInjector;

class SimAllocator : public CountingAllocator {
 public:
  // `faults` may be null: then no acquire is ever refused.
  SimAllocator(int rank, FaultInjector* faults) : rank_(rank), faults_(faults) {}

  void acquire(MemoryCategory category, int64_t bytes, const std::string& what) override;
  int rank() const { return rank_; }

 private:
  int rank_;
  FaultInjector* faults_;
};

}  // namespace zero3
