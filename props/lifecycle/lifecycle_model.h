// A small model of one rank's parameter lifecycle under ZeRO-3, for the stateful test
// (lifecycle_state_test.cc). It follows the README's lifecycle rules ("Design") rather than the engine's code:
//   - entering a module (pre-forward, and pre-backward in reverse order) fetches its parameters —
//     its own and the external ones it registered — gathering what is NOT_AVAILABLE;
//   - the first use of another module's parameter registers it as external and gathers it;
//   - gathers are coalesced: one bucket per fetch, per prefetched fetch and per external
//     registration (budgets are unbounded here), and waiting for one parameter completes its bucket;
//   - when a module finishes, its parameters are released unless persistent, used by a module
//     still running, or fetched again later by the trace (reuse);
//   - the trace is the previous step's fetch order: while the step follows it, prefetch gathers the
//     next fetches ahead; the first fetch that differs invalidates it, and whatever was in flight
//     is completed and released unless a running module uses it;
//   - the end of a micro-step completes what is in flight and releases everything but persistent
//     parameters; the optimizer step re-gathers the persistent ones that were gathered;
//   - an armed allocation fault fires at the next gather that completes (OutOfMemoryError).
// With prefetch_and_reuse off the engine runs with overlap_comm off and max_live_elements 0, which
// turns off both prefetch and reuse; on, every budget is unbounded.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "core/zero3/param_status.h"
#include "core/nn/parameter.h"
#include "core/nn/placeholder_policy.h"

namespace zero3 {

struct LifecycleSettings {
  int world = 1;
  bool prefetch_and_reuse = false;
  int64_t persistence_threshold = 0;
  PlaceholderPolicy placeholder = PlaceholderPolicy::error;
};

// RapidCheck prints generated settings with showValue: "world=2 prefetch_and_reuse=1 ...".
void showValue(const LifecycleSettings& settings, std::ostream& os);

struct ModelModule {
  std::string name;
  std::vector<int> own_params;  // ids
};

class LifecycleModel {
 public:
  LifecycleModel(std::vector<ModelModule> modules, std::vector<int64_t> param_numels, std::vector<int> param_owner,
                 const LifecycleSettings& settings);

  void enter(int module);
  void exit_top();
  void use(int param);  // by the module on top of the stack
  void backward();      // the micro-step's backward and its end
  void step();          // the optimizer step and the start of the next step
  void arm_allocation_fault() { allocation_fault_armed_ = true; }

  const LifecycleSettings& settings() const { return settings_; }
  const std::vector<ModelModule>& modules() const { return modules_; }
  int param_count() const { return static_cast<int>(status_.size()); }
  ParamStatus status(int param) const { return status_[static_cast<size_t>(param)]; }
  int64_t live_elements() const;
  const std::vector<int>& stack() const { return stack_; }
  bool on_stack(int module) const;
  int uses_since_backward() const { return uses_since_backward_; }
  bool entered_since_backward() const { return entered_since_backward_; }
  int micro_steps_since_step() const { return micro_steps_since_step_; }
  bool allocation_fault_armed() const { return allocation_fault_armed_; }
  bool allocation_failed() const { return allocation_failed_; }

 private:
  struct Event {
    int module = 0;
    std::vector<int> params;  // sorted
    bool operator==(const Event&) const = default;
  };

  std::vector<int> params_of(int module) const;
  bool in_use_by_running_module(int param) const;
  void fetch(int module);
  void finish(int module);  // pops it from the stack, then releases what it no longer needs
  void invalidate_trace();
  void prefetch();
  bool reused_later(int param) const;
  void gather(const std::vector<int>& params);  // the NOT_AVAILABLE ones, as one bucket
  void complete_gather(int param);              // and the rest of its bucket
  void release(int param) { status_[static_cast<size_t>(param)] = ParamStatus::not_available; }

  LifecycleSettings settings_;
  std::vector<ModelModule> modules_;
  std::vector<int64_t> numel_;
  std::vector<int> owner_;
  std::vector<bool> persistent_;
  std::vector<ParamStatus> status_;
  std::vector<std::vector<int>> buckets_;    // gathers in flight
  std::vector<std::vector<int>> externals_;  // by module, in registration order
  std::vector<int> stack_;                   // running modules, innermost last
  std::vector<std::pair<int, bool>> markers_;  // this micro-step's forward: (module, is exit)
  std::vector<Event> trace_;
  std::vector<Event> recording_;
  bool following_ = false;
  int uses_since_backward_ = 0;
  bool entered_since_backward_ = false;
  int micro_steps_since_step_ = 0;
  bool allocation_fault_armed_ = false;
  bool allocation_failed_ = false;
};

}  // namespace zero3
