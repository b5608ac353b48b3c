// InFlightBuffers: which storages one rank has handed to collectives that have not completed yet,
// and in which role (read by the collective, or written by it). HazardCheckingKernels and the
// simulated communicator consult it to catch reads of buffers still in flight.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/sharding/communicator.h"
#include "core/tensor/tensor.h"

namespace zero3 {

struct InFlightUse {
  int64_t sequence = -1;
  CollectiveOp op = CollectiveOp::barrier;
  CallSite site;
  bool written = false;  // true: the collective's output (poisoned until it completes)
};
// "the output of all_gather #3 (module 'h.0' forward step 1)"
std::string describe(const InFlightUse& use);

class InFlightBuffers {
 public:
  // Registers the storage of `tensor` (nothing for meta or undefined tensors).
  void add(const Tensor& tensor, const InFlightUse& use);
  // Forgets every storage of collective `sequence` (it completed or the run was aborted).
  void remove(int64_t sequence);
  // The in-flight collective with the lowest sequence that writes `storage`, or null.
  const InFlightUse* writer_of(const void* storage) const;
  // The in-flight collective with the lowest sequence that reads or writes `storage`, or null.
  const InFlightUse* user_of(const void* storage) const;
  bool empty() const { return by_storage_.empty(); }

 private:
  // Keyed by storage identity for lookups only; never iterated, so addresses cannot leak into
  // behaviour.
  std::map<const void*, std::vector<InFlightUse>> by_storage_;
  std::map<int64_t, std::vector<const void*>> storages_by_sequence_;
};

}  // namespace zero3
