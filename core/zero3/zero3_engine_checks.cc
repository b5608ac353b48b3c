// The ZeRO-3 engine's invariants, asserted in every run (TigerBeetle's "assert both sides of
// every state change"): both sides of each parameter's status change, the gather bucket's id
// order, the reduce bucket's single reduction, and what must hold at each micro-step and step
// boundary. props/lifecycle/lifecycle_checker.h still models the lifecycle from outside; these
// are the engine's own checks, so a production run stops at the first broken one with an error
// naming it, not with a silently wrong model. A status change's checks are O(1), the boundaries'
// O(parameters); each allocates only to build the message of a failure.
#include "core/base/errors.h"
#include "core/nn/module.h"
#include "core/zero3/zero3_engine.h"
#include "core/zero3/zero3_engine_state.h"

namespace zero3 {

void Zero3Engine::fail_invariant(const std::string& what) const {
  throw CorrectnessError("engine invariant broken on rank " + std::to_string(comm_.rank()) + " at step " +
                         std::to_string(step_) + " in phase " + engine_phase_name(phase_) + ": " + what);
}

void Zero3Engine::check_param_side(const ParamState& state, ParamStatus from, ParamStatus to,
                                   const std::string& module, Side side) const {
  // Before a change the parameter must hold what `from` says, after it what `to` says: its full
  // tensor exactly while AVAILABLE, a gather exactly while INFLIGHT, and the running totals must
  // count it where its status is (only this parameter is compared: a change never scans them all).
  const ParamStatus status = side == Side::before ? from : to;
  const bool available = status == ParamStatus::available;
  const bool inflight = status == ParamStatus::inflight;
  const bool full_agrees = state.full.defined() == available;
  const bool gather_agrees = (state.pending != nullptr) == inflight;
  std::string totals = totals_problem(totals_, status, state.numel);
  if (full_agrees && gather_agrees && totals.empty()) return;
  std::string what = totals;
  if (!full_agrees) {
    what = available ? "it has no full tensor" : "it still holds a full tensor";
  } else if (!gather_agrees) {
    what = inflight ? "it points at no gather" : "it still points at a gather";
  }
  fail_invariant(std::string(side == Side::before ? "before" : "after") + " " + param_status_name(from) + " -> " +
                 param_status_name(to) + " of '" + state.param->name() + "' in module '" + module + "': " + what +
                 " while " + param_status_name(status));
}

void Zero3Engine::check_gather_bucket_order(const Module& module, const std::vector<ParamState*>& params) const {
  // Every rank lays a bucket out from its parameter order: by id, it is the same on every rank
  // whatever order hooks and external registrations listed them in (README.md, "Design").
  for (size_t i = 1; i < params.size(); ++i) {
    if (params[i - 1]->param->id() < params[i]->param->id()) continue;
    fail_invariant("gather bucket of module '" + module.display_name() + "' lists '" + params[i]->param->name() +
                   "' (id " + std::to_string(params[i]->param->id()) + ") after '" + params[i - 1]->param->name() +
                   "' (id " + std::to_string(params[i - 1]->param->id()) + "): buckets are ordered by id");
  }
}

void Zero3Engine::check_reduce_bucket_unreduced() const {
  // `reduced` is set for the whole bucket only after its collective: one already set here would
  // add its gradient twice. Sorted by id by now, a parameter queued twice sits next to itself, so
  // one pass finds both (under the arrival-order bug only adjacent duplicates are seen).
  for (size_t i = 0; i < reduce_bucket_.size(); ++i) {
    const ParamState& state = *reduce_bucket_[i];
    if (state.reduced) fail_invariant("'" + state.param->name() + "' queued for reduction after it was reduced");
    if (i > 0 && reduce_bucket_[i - 1] == &state) {
      fail_invariant("'" + state.param->name() + "' queued twice in one reduce bucket");
    }
  }
}

void Zero3Engine::check_micro_step_boundary(Context& ctx) const {
  if (!invocation_stack_.empty()) {
    fail_invariant("module '" + invocation_stack_.back().first->display_name() +
                   "' still running at the end of the micro-step (post-forward or post-backward never ran)");
  }
  if (!reduce_bucket_.empty()) {
    fail_invariant(std::to_string(reduce_bucket_.size()) + " parameters left in the reduce bucket");
  }
  for (const auto& state : states_) {
    if (state->active_uses != 0) {
      fail_invariant("'" + state->param->name() + "' has " + std::to_string(state->active_uses) +
                     " active uses at the end of the micro-step (a module using it never ended)");
    }
    // Only a bug leaves one here: every gradient was reduce-scattered and dropped above.
    if (state->grad_bytes > 0 || ctx.param_grad(*state->param).defined()) {
      fail_invariant("the full gradient of '" + state->param->name() + "' was never reduce-scattered");
    }
  }
  check_step_boundary();
}

void Zero3Engine::check_step_boundary() const {
  // The full recount of what each change kept as running totals (move_status checks only the
  // parameter it moves).
  if (!pending_.empty() || totals_.inflight_elements != 0) {
    fail_invariant(std::to_string(pending_.size()) + " gathers (" + std::to_string(totals_.inflight_elements) +
                   " elements) still in flight at a step boundary");
  }
  if (totals_.inflight_params != 0) {
    fail_invariant(std::to_string(totals_.inflight_params) + " parameters counted in flight at a step boundary");
  }
  int64_t available_elements = 0;
  int64_t available_params = 0;
  for (const auto& state : states_) {
    if (state->status == ParamStatus::inflight) fail_invariant("'" + state->param->name() + "' is INFLIGHT");
    if (state->status == ParamStatus::available) {
      available_elements += state->numel;
      ++available_params;
    }
  }
  if (available_elements != totals_.live_elements) {
    fail_invariant("live elements " + std::to_string(totals_.live_elements) + " differ from the " +
                   std::to_string(available_elements) + " elements of AVAILABLE parameters");
  }
  if (available_params != totals_.available_params) {
    fail_invariant(std::to_string(totals_.available_params) + " parameters counted AVAILABLE, " +
                   std::to_string(available_params) + " are");
  }
}

}  // namespace zero3
