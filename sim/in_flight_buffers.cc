// Registry of storages held by in-flight collectives.
#include "sim/in_flight_buffers.h"

#include <algorithm>

#include "core/base/errors.h"

namespace zero3 {

std::string describe(const InFlightUse& use) {
  ZERO3_CHECK(use.site != nullptr, "in-flight use of #" + std::to_string(use.sequence) + " without a call site");
  return std::string(use.written ? "the output" : "an input") + " of " + collective_op_name(use.op) + " #" +
         std::to_string(use.sequence) + (use.group_name ? " in " + *use.group_name : std::string()) + " (" +
         describe(*use.site) + ")";
}

void InFlightBuffers::add(const Tensor& tensor, InFlightUse use) {
  const void* storage = tensor.storage_id();
  if (storage == nullptr) return;
  ZERO3_CHECK(use.site != nullptr, "in-flight use of #" + std::to_string(use.sequence) + " without a call site");
  uses_.push_back(Entry{storage, std::move(use)});
}

void InFlightBuffers::remove(int64_t sequence, int group) {
  std::erase_if(uses_, [&](const Entry& entry) { return entry.use.sequence == sequence && entry.use.group == group; });
}

const InFlightUse* InFlightBuffers::lowest_use(const void* storage, bool written_only) const {
  if (storage == nullptr) return nullptr;
  // The first of equal sequences wins: an in-place collective's input was registered before its output.
  const InFlightUse* lowest = nullptr;
  for (const Entry& entry : uses_) {
    if (entry.storage != storage || (written_only && !entry.use.written)) continue;
    if (lowest == nullptr || entry.use.sequence < lowest->sequence) lowest = &entry.use;
  }
  return lowest;
}

const InFlightUse* InFlightBuffers::writer_of(const void* storage) const { return lowest_use(storage, true); }

const InFlightUse* InFlightBuffers::user_of(const void* storage) const { return lowest_use(storage, false); }

}  // namespace zero3
