// LifecycleChecker: an EngineObserver that checks the parameter lifecycle invariants on one rank
// while the engine trains, independently of the engine's own checks:
//   - every transition is legal, and starts from the status the checker saw last (no status
//     changes without an event), and at every hook the engine's status equals the checker's;
//   - after a module's post-forward and post-backward its parameters (a leaf's whole subtree) are
//     released, unless persistent, or inside a running leaf, or kept for reuse — which needs the
//     previous step's trace, so at step 0 the check is exact; they are never left INFLIGHT;
//   - after step() every non-persistent parameter is NOT_AVAILABLE and none is INFLIGHT;
//   - the engine's live elements equal the checker's count of AVAILABLE elements, and the
//     non-persistent ones never exceed max_live_elements + the largest fetch unit (model_facts.h):
//     at every hook, and at every transition to AVAILABLE in between (a bound kept only at hooks
//     would let a prefetch overshoot between them);
//   - once the trace is complete (from step 1), a step in which every budget allows prefetching
//     (overlap_comm, a prefetch bucket and a live budget that hold the whole model, no leaf
//     modules, at least three modules that gather, no trace invalidation that step) issues at
//     least one gather ahead of its module. Seen from outside: a parameter still INFLIGHT when
//     another module's transition or hook happens was gathered before the module that waits for
//     it, since a module's own gathers complete before its pre-hook returns.
//
//   LifecycleChecker checker(config, facts.fetch_unit_elements_max);
//   engine.set_observer(&checker);
//   ... if (!checker.violations().empty()) puts(checker.violations().front().c_str());
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/zero3/zero3_engine.h"
#include "props/model_facts.h"

namespace zero3 {

class LifecycleChecker : public EngineObserver {
 public:
  LifecycleChecker(const TrainConfig& config, const ModelFacts& facts);

  void on_transition(const Parameter& param, ParamStatus from, ParamStatus to, const std::string& module) override;
  void after_post_forward(const Module& module, const Zero3Engine& engine) override;
  void after_post_backward(const Module& module, const Zero3Engine& engine) override;
  void after_step(const Zero3Engine& engine) override;

  const std::vector<std::string>& violations() const { return violations_; }
  // Parameters seen gathered ahead of their module, over all steps (each once per step).
  int64_t gathers_seen_ahead() const { return gathers_seen_ahead_; }

 private:
  void check_module_released(const Module& module, const Zero3Engine& engine, const char* hook);
  void check_statuses_and_live(const Zero3Engine& engine, const std::string& where);
  void violation(const std::string& message);
  void note_inflight_seen_by(const std::string& module);
  void check_prefetch_happened(const Zero3Engine& engine);

  TrainConfig config_;
  int64_t fetch_unit_elements_max_;
  bool budgets_allow_prefetch_;
  int64_t steps_done_ = 0;
  std::vector<const Parameter*> params_;  // by id, as seen in transitions
  std::vector<ParamStatus> status_;       // by id
  int64_t gathered_non_persistent_ = 0;   // AVAILABLE elements of non-persistent parameters, by transitions
  std::map<int64_t, std::string> inflight_issuer_;  // INFLIGHT parameter id -> the module that gathered it
  std::set<int64_t> ahead_this_step_;               // ids seen INFLIGHT by another module this step
  int64_t gathers_seen_ahead_ = 0;
  int64_t invalidations_before_step_ = 0;
  std::vector<std::string> violations_;
};

}  // namespace zero3
