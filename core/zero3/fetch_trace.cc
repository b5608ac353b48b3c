// Recording and following the fetch order (see fetch_trace.h).
#include "core/zero3/fetch_trace.h"

#include <algorithm>

namespace zero3 {

void FetchTrace::begin_step() {
  if (!recording_.empty()) trace_ = std::move(recording_);
  recording_.clear();
  following_ = !trace_.empty();
}

bool FetchTrace::observe(const FetchEvent& event) {
  const size_t position = recording_.size();
  recording_.push_back(event);
  if (!following_) return true;
  if (position >= trace_.size() || !(trace_[position] == event)) {
    following_ = false;
    return false;
  }
  return true;
}

void FetchTrace::amend_last(const Module* module, int64_t param_id) {
  for (auto it = recording_.rbegin(); it != recording_.rend(); ++it) {
    if (it->module != module) continue;
    auto& ids = it->param_ids;
    if (!std::binary_search(ids.begin(), ids.end(), param_id)) ids.insert(std::upper_bound(ids.begin(), ids.end(), param_id), param_id);
    return;
  }
}

std::vector<const FetchEvent*> FetchTrace::upcoming(size_t max_events) const {
  std::vector<const FetchEvent*> out;
  if (!following_) return out;
  for (size_t i = recording_.size(); i < trace_.size() && out.size() < max_events; ++i) out.push_back(&trace_[i]);
  return out;
}

int64_t FetchTrace::reuse_distance(int64_t param_id, const std::vector<int64_t>& numel_by_id) const {
  if (!following_) return -1;
  int64_t distance = 0;
  for (size_t i = recording_.size(); i < trace_.size(); ++i) {
    const auto& ids = trace_[i].param_ids;
    if (std::binary_search(ids.begin(), ids.end(), param_id)) return distance;
    for (int64_t id : ids) distance += numel_by_id[static_cast<size_t>(id)];
  }
  return -1;
}

}  // namespace zero3
