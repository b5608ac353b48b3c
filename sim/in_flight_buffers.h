// InFlightBuffers: which storages one rank has handed to collectives that have not completed yet,
// and in which role (read by the collective, or written by it). HazardCheckingKernels and the
// simulated communicator consult it to catch reads of buffers still in flight.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/sharding/communicator.h"
#include "core/tensor/tensor.h"

namespace zero3 {

struct InFlightUse {
  int64_t sequence = -1;
  CollectiveOp op = CollectiveOp::barrier;
  std::shared_ptr<const CallSite> site{};  // the call's own, shared rather than copied per buffer
  bool written = false;  // true: the collective's output (poisoned until it completes)
  int group = 0;         // the matcher's communicator group; sequences count per group
  // The group's name for messages, null for the world; owned by the matcher, which outlives this.
  const std::string* group_name = nullptr;
};
// "the output of all_gather #3 (module 'h.0' forward step 1)", "... #3 in group 1 (ranks 1,3) (...)"
std::string describe(const InFlightUse& use);

class InFlightBuffers {
 public:
  // Registers the storage of `tensor` (nothing for meta or undefined tensors).
  void add(const Tensor& tensor, InFlightUse use);
  // Forgets every storage of collective `sequence` of `group` (it completed or the run was aborted).
  void remove(int64_t sequence, int group = 0);
  // The in-flight collective with the lowest sequence that writes `storage`, or null.
  const InFlightUse* writer_of(const void* storage) const;
  // The in-flight collective with the lowest sequence that reads or writes `storage`, or null.
  const InFlightUse* user_of(const void* storage) const;
  bool empty() const { return uses_.empty(); }

 private:
  struct Entry {
    const void* storage;
    InFlightUse use;
  };
  // A rank has a handful of collectives in flight, so a flat list in registration order beats a
  // map; storage addresses are only compared, never ordered, so they cannot leak into behaviour.
  const InFlightUse* lowest_use(const void* storage, bool written_only) const;

  std::vector<Entry> uses_;
};

}  // namespace zero3
