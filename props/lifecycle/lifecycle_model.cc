// The lifecycle model's rules (see lifecycle_model.h).
#include "props/lifecycle/lifecycle_model.h"

#include <algorithm>
#include <ostream>

namespace zero3 {

namespace {

constexpr size_t kPrefetchEvents = 8;  // how far ahead the engine prefetches along the trace

}  // namespace

void showValue(const LifecycleSettings& settings, std::ostream& os) {
  os << "world=" << settings.world << " prefetch_and_reuse=" << settings.prefetch_and_reuse
     << " persistence_threshold=" << settings.persistence_threshold
     << " placeholder=" << placeholder_policy_name(settings.placeholder);
}

LifecycleModel::LifecycleModel(std::vector<ModelModule> modules, std::vector<int64_t> param_numels,
                               std::vector<int> param_owner, const LifecycleSettings& settings)
    : settings_(settings), modules_(std::move(modules)), numel_(std::move(param_numels)),
      owner_(std::move(param_owner)), status_(numel_.size(), ParamStatus::not_available),
      externals_(modules_.size()) {
  for (int64_t numel : numel_) persistent_.push_back(numel <= settings_.persistence_threshold);
}

int64_t LifecycleModel::live_elements() const {
  int64_t live = 0;
  for (size_t p = 0; p < status_.size(); ++p) {
    if (status_[p] == ParamStatus::available) live += numel_[p];
  }
  return live;
}

bool LifecycleModel::on_stack(int module) const {
  return std::find(stack_.begin(), stack_.end(), module) != stack_.end();
}

std::vector<int> LifecycleModel::params_of(int module) const {
  std::vector<int> params = modules_[static_cast<size_t>(module)].own_params;
  const std::vector<int>& externals = externals_[static_cast<size_t>(module)];
  params.insert(params.end(), externals.begin(), externals.end());
  return params;
}

bool LifecycleModel::in_use_by_running_module(int param) const {
  for (int module : stack_) {
    const std::vector<int> params = params_of(module);
    if (std::find(params.begin(), params.end(), param) != params.end()) return true;
  }
  return false;
}

void LifecycleModel::gather(const std::vector<int>& params) {
  std::vector<int> bucket;
  for (int param : params) {
    if (status(param) != ParamStatus::not_available) continue;
    status_[static_cast<size_t>(param)] = ParamStatus::inflight;
    bucket.push_back(param);
  }
  if (!bucket.empty()) buckets_.push_back(bucket);
}

void LifecycleModel::complete_gather(int param) {
  const auto bucket = std::find_if(buckets_.begin(), buckets_.end(), [&](const std::vector<int>& members) {
    return std::find(members.begin(), members.end(), param) != members.end();
  });
  if (bucket == buckets_.end()) return;  // completed with an earlier member of its bucket
  for (int member : *bucket) status_[static_cast<size_t>(member)] = ParamStatus::available;
  buckets_.erase(bucket);
  if (allocation_fault_armed_) {
    allocation_fault_armed_ = false;
    allocation_failed_ = true;
  }
}

void LifecycleModel::fetch(int module) {
  Event event{.module = module, .params = params_of(module)};
  std::sort(event.params.begin(), event.params.end());
  const size_t position = recording_.size();
  recording_.push_back(event);
  if (following_ && (position >= trace_.size() || !(trace_[position] == event))) invalidate_trace();
  gather(event.params);
  for (int param : event.params) complete_gather(param);
  prefetch();
}

void LifecycleModel::invalidate_trace() {
  following_ = false;
  std::vector<int> in_flight;
  for (const std::vector<int>& bucket : buckets_) in_flight.insert(in_flight.end(), bucket.begin(), bucket.end());
  for (int param : in_flight) complete_gather(param);
  for (int param : in_flight) {
    if (!in_use_by_running_module(param) && !persistent_[static_cast<size_t>(param)]) release(param);
  }
}

void LifecycleModel::prefetch() {
  if (!settings_.prefetch_and_reuse || !following_) return;
  const size_t end = std::min(trace_.size(), recording_.size() + kPrefetchEvents);
  for (size_t i = recording_.size(); i < end; ++i) gather(trace_[i].params);
}

bool LifecycleModel::reused_later(int param) const {
  if (!settings_.prefetch_and_reuse || !following_) return false;
  for (size_t i = recording_.size(); i < trace_.size(); ++i) {
    if (std::binary_search(trace_[i].params.begin(), trace_[i].params.end(), param)) return true;
  }
  return false;
}

void LifecycleModel::finish(int module) {
  stack_.pop_back();
  for (int param : params_of(module)) {
    if (status(param) != ParamStatus::available || persistent_[static_cast<size_t>(param)]) continue;
    if (in_use_by_running_module(param) || reused_later(param)) continue;
    release(param);
  }
}

void LifecycleModel::enter(int module) {
  stack_.push_back(module);
  markers_.push_back({module, false});
  entered_since_backward_ = true;
  fetch(module);
}

void LifecycleModel::exit_top() {
  const int module = stack_.back();
  markers_.push_back({module, true});
  finish(module);
}

void LifecycleModel::use(int param) {
  const int module = stack_.back();
  uses_since_backward_++;
  std::vector<int>& externals = externals_[static_cast<size_t>(module)];
  const bool own = owner_[static_cast<size_t>(param)] == module;
  if (own || std::find(externals.begin(), externals.end(), param) != externals.end()) return;
  externals.push_back(param);
  // The next step expects the parameter in this module's fetch.
  for (auto event = recording_.rbegin(); event != recording_.rend(); ++event) {
    if (event->module != module) continue;
    event->params.insert(std::upper_bound(event->params.begin(), event->params.end(), param), param);
    break;
  }
  gather({param});
  complete_gather(param);
}

void LifecycleModel::backward() {
  // Backward walks the forward's markers in reverse: an exit opens the module's backward
  // (pre-backward fetch), its enter closes it (post-backward release).
  for (auto marker = markers_.rbegin(); marker != markers_.rend(); ++marker) {
    if (marker->second) {
      stack_.push_back(marker->first);
      fetch(marker->first);
    } else {
      finish(marker->first);
    }
  }
  for (int param = 0; param < param_count(); ++param) {
    complete_gather(param);
    if (status(param) == ParamStatus::available && !persistent_[static_cast<size_t>(param)]) release(param);
  }
  markers_.clear();
  stack_.clear();
  uses_since_backward_ = 0;
  entered_since_backward_ = false;
  micro_steps_since_step_++;
}

void LifecycleModel::step() {
  // Gathered persistent parameters are stale after the update: released and gathered again.
  std::vector<int> regathered;
  for (int param = 0; param < param_count(); ++param) {
    if (!persistent_[static_cast<size_t>(param)] || status(param) != ParamStatus::available) continue;
    release(param);
    regathered.push_back(param);
  }
  gather(regathered);
  if (!regathered.empty()) complete_gather(regathered.front());
  if (!recording_.empty()) trace_ = recording_;
  recording_.clear();
  following_ = !trace_.empty();
  micro_steps_since_step_ = 0;
}

}  // namespace zero3
