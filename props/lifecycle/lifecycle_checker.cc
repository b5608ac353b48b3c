// Lifecycle invariants checked from outside the engine (see lifecycle_checker.h).
#include "props/lifecycle/lifecycle_checker.h"

#include <algorithm>

#include "core/nn/module.h"

namespace zero3 {

namespace {

constexpr size_t kViolationsKept = 5;

std::string step_text(int64_t step) { return " at step " + std::to_string(step); }

// Budgets under which the engine's rule (zero3_engine.cc prefetch_after) must prefetch something
// once the trace is known: nothing in the configuration can stop it, and there is more than one
// module to gather ahead of.
// The same rule as the engine's: below stage 3 every parameter persists; at stage 3, those of at
// most persistence_threshold elements.
bool persists(const ZeroConfig& zero, int64_t numel) { return zero.stage < 3 || numel <= zero.persistence_threshold; }

bool budgets_allow_prefetch(const ZeroConfig& zero, const ModelFacts& facts) {
  const auto gathering_modules =
      std::count_if(facts.module_largest_param.begin(), facts.module_largest_param.end(),
                    [&](int64_t largest) { return !persists(zero, largest); });
  return zero.overlap_comm && zero.leaf_modules.empty() && zero.prefetch_bucket_elements >= facts.total_elements &&
         zero.max_live_elements >= 2 * facts.total_elements && gathering_modules >= 3;
}

}  // namespace

LifecycleChecker::LifecycleChecker(const TrainConfig& config, const ModelFacts& facts)
    : config_(config),
      fetch_unit_elements_max_(facts.fetch_unit_elements_max),
      budgets_allow_prefetch_(budgets_allow_prefetch(config.zero, facts)) {}

void LifecycleChecker::violation(const std::string& message) {
  if (violations_.size() < kViolationsKept) violations_.push_back(message);
}

void LifecycleChecker::on_transition(const Parameter& param, ParamStatus from, ParamStatus to,
                                     const std::string& module) {
  const auto id = static_cast<size_t>(param.id());
  if (id >= status_.size()) {
    status_.resize(id + 1, ParamStatus::not_available);
    params_.resize(id + 1, nullptr);
  }
  params_[id] = &param;
  const std::string where = "'" + param.name() + "' in module '" + module + "'" + step_text(steps_done_);
  if (from != status_[id]) {
    violation("transition from " + std::string(param_status_name(from)) + " of " + where + ", but it was " +
              param_status_name(status_[id]) + " (a status change without an event)");
  }
  if (!is_legal_transition(from, to)) {
    violation(std::string("illegal transition ") + param_status_name(from) + " -> " + param_status_name(to) + " of " +
              where);
  }
  status_[id] = to;
  if (module != "<gather>") note_inflight_seen_by(module);
  if (to == ParamStatus::inflight) inflight_issuer_[param.id()] = module;
  if (from == ParamStatus::inflight) inflight_issuer_.erase(param.id());
  if (!persists(config_.zero, param.numel())) {
    if (from == ParamStatus::available) gathered_non_persistent_ -= param.numel();
    if (to == ParamStatus::available) gathered_non_persistent_ += param.numel();
    const int64_t bound = config_.zero.max_live_elements + fetch_unit_elements_max_;
    if (to == ParamStatus::available && gathered_non_persistent_ > bound) {
      violation(std::to_string(gathered_non_persistent_) + " non-persistent elements gathered once " + where +
                " became AVAILABLE, above max_live_elements + the largest fetch unit = " + std::to_string(bound));
    }
  }
}

// A parameter still INFLIGHT while `module` acts, and gathered by another module, was gathered
// ahead of the module that will wait for it.
void LifecycleChecker::note_inflight_seen_by(const std::string& module) {
  for (const auto& [id, issuer] : inflight_issuer_) {
    if (issuer != module && ahead_this_step_.insert(id).second) ++gathers_seen_ahead_;
  }
}

void LifecycleChecker::check_prefetch_happened(const Zero3Engine& engine) {
  const int64_t invalidations = engine.counters().trace_invalidations - invalidations_before_step_;
  invalidations_before_step_ = engine.counters().trace_invalidations;
  const bool seen = !ahead_this_step_.empty();
  ahead_this_step_.clear();
  if (steps_done_ == 0 || !budgets_allow_prefetch_ || invalidations > 0 || seen) return;
  violation("no gather was issued ahead of its module" + step_text(steps_done_) +
            " although the trace is complete and overlap_comm, the prefetch bucket (" +
            std::to_string(config_.zero.prefetch_bucket_elements) + ") and the live budget (" +
            std::to_string(config_.zero.max_live_elements) + ") allow prefetching: prefetch is silently off");
}

void LifecycleChecker::check_module_released(const Module& module, const Zero3Engine& engine, const char* hook) {
  const std::vector<std::string>& leaves = config_.zero.leaf_modules;
  if (has_leaf_ancestor(module, leaves)) return;  // the running leaf holds its subtree
  std::vector<Parameter*> params;
  if (is_leaf_module(module, leaves)) {
    params = module.all_parameters();
  } else {
    for (const auto& param : module.parameters()) params.push_back(param.get());
  }
  for (const Parameter* param : params) {
    const ParamStatus status = engine.status(*param);
    const std::string where = std::string(" after the ") + hook + " of '" + module.display_name() + "'" +
                              step_text(steps_done_);
    if (status == ParamStatus::inflight) violation("'" + param->name() + "' is INFLIGHT" + where);
    // Reuse needs a trace, and the first trace exists from step 1 on.
    if (status == ParamStatus::available && !engine.is_persistent(*param) && steps_done_ == 0) {
      violation("'" + param->name() + "' is still AVAILABLE" + where +
                " (not persistent, no running leaf, no trace to justify keeping it for reuse)");
    }
  }
}

void LifecycleChecker::check_statuses_and_live(const Zero3Engine& engine, const std::string& where) {
  int64_t available = 0;
  int64_t available_non_persistent = 0;
  for (size_t id = 0; id < params_.size(); ++id) {
    const Parameter* param = params_[id];
    if (param == nullptr) continue;
    if (engine.status(*param) != status_[id]) {
      violation("'" + param->name() + "' is " + param_status_name(engine.status(*param)) + " " + where +
                " but its last transition event left it " + param_status_name(status_[id]));
    }
    if (status_[id] != ParamStatus::available) continue;
    available += param->numel();
    if (!engine.is_persistent(*param)) available_non_persistent += param->numel();
  }
  if (engine.live_elements() != available) {
    violation("live elements " + std::to_string(engine.live_elements()) + " " + where + ", but " +
              std::to_string(available) + " elements are AVAILABLE");
  }
  const int64_t bound = config_.zero.max_live_elements + fetch_unit_elements_max_;
  if (available_non_persistent > bound) {
    violation(std::to_string(available_non_persistent) + " non-persistent elements gathered " + where +
              ", above max_live_elements + the largest fetch unit = " + std::to_string(bound));
  }
}

void LifecycleChecker::after_post_forward(const Module& module, const Zero3Engine& engine) {
  note_inflight_seen_by(module.display_name());
  check_module_released(module, engine, "post-forward");
  check_statuses_and_live(engine, "after the post-forward of '" + module.display_name() + "'" + step_text(steps_done_));
}

void LifecycleChecker::after_post_backward(const Module& module, const Zero3Engine& engine) {
  note_inflight_seen_by(module.display_name());
  check_module_released(module, engine, "post-backward");
  check_statuses_and_live(engine,
                          "after the post-backward of '" + module.display_name() + "'" + step_text(steps_done_));
}

void LifecycleChecker::after_step(const Zero3Engine& engine) {
  for (const Parameter* param : params_) {
    if (param == nullptr) continue;
    const ParamStatus status = engine.status(*param);
    const bool partitioned = status == ParamStatus::not_available;
    if (status == ParamStatus::inflight || (!partitioned && !engine.is_persistent(*param))) {
      violation("'" + param->name() + "' is " + param_status_name(status) + " after step()" + step_text(steps_done_) +
                "; only persistent parameters may stay gathered");
    }
  }
  check_statuses_and_live(engine, "after step()" + step_text(steps_done_));
  check_prefetch_happened(engine);
  ++steps_done_;
}

}  // namespace zero3
