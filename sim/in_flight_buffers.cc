// Registry of storages held by in-flight collectives.
#include "sim/in_flight_buffers.h"

#include <algorithm>

#include "core/base/errors.h"

namespace zero3 {

std::string describe(const InFlightUse& use) {
  return std::string(use.written ? "the output" : "an input") + " of " + collective_op_name(use.op) + " #" +
         std::to_string(use.sequence) + " (" + describe(use.site) + ")";
}

void InFlightBuffers::add(const Tensor& tensor, const InFlightUse& use) {
  const void* storage = tensor.storage_id();
  if (storage == nullptr) return;
  by_storage_[storage].push_back(use);
  // An in-place collective registers one storage twice (read and written); list it once.
  std::vector<const void*>& storages = storages_by_sequence_[use.sequence];
  if (std::find(storages.begin(), storages.end(), storage) == storages.end()) storages.push_back(storage);
}

void InFlightBuffers::remove(int64_t sequence) {
  const auto found = storages_by_sequence_.find(sequence);
  if (found == storages_by_sequence_.end()) return;
  for (const void* storage : found->second) {
    auto entry = by_storage_.find(storage);
    ZERO3_CHECK(entry != by_storage_.end(), "in-flight storage of #" + std::to_string(sequence) + " lost");
    std::erase_if(entry->second, [&](const InFlightUse& use) { return use.sequence == sequence; });
    if (entry->second.empty()) by_storage_.erase(entry);
  }
  storages_by_sequence_.erase(found);
}

const InFlightUse* InFlightBuffers::writer_of(const void* storage) const {
  if (storage == nullptr) return nullptr;
  const auto entry = by_storage_.find(storage);
  if (entry == by_storage_.end()) return nullptr;
  const InFlightUse* lowest = nullptr;
  for (const InFlightUse& use : entry->second) {
    if (use.written && (lowest == nullptr || use.sequence < lowest->sequence)) lowest = &use;
  }
  return lowest;
}

const InFlightUse* InFlightBuffers::user_of(const void* storage) const {
  if (storage == nullptr) return nullptr;
  const auto entry = by_storage_.find(storage);
  if (entry == by_storage_.end()) return nullptr;
  const auto by_sequence = [](const InFlightUse& a, const InFlightUse& b) { return a.sequence < b.sequence; };
  const auto lowest = std::min_element(entry->second.begin(), entry->second.end(), by_sequence);
  return lowest == entry->second.end() ? nullptr : &*lowest;
}

}  // namespace zero3
