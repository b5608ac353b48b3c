// The legal-call table of the engine's phases (engine_phase.h).
#include "core/zero3/engine_phase.h"

#include <iterator>
#include <string>

#include "core/base/errors.h"

namespace zero3 {

namespace {

constexpr int kPhases = 5;
constexpr int kCalls = 13;

// What each call leaves the phase as, by phase (rows) and call (columns); `no` marks an illegal call.
constexpr int8_t no = -1;
constexpr int8_t B = static_cast<int8_t>(EnginePhase::between_steps);
constexpr int8_t I = static_cast<int8_t>(EnginePhase::in_step);
constexpr int8_t F = static_cast<int8_t>(EnginePhase::forward);
constexpr int8_t K = static_cast<int8_t>(EnginePhase::backward);
constexpr int8_t S = static_cast<int8_t>(EnginePhase::step);
// Columns: begin_step, begin_micro_step, record_micro_loss, begin_backward, end_micro_step,
// end_step, pre_forward, post_forward, pre_backward, post_backward, checked_access,
// load_shard_state, gather_full_state.
constexpr int8_t kNext[kPhases][kCalls] = {
    // BETWEEN_STEPS: only a new step or the checkpoint calls.
    {I, no, no, no, no, no, no, no, no, no, no, B, B},
    // IN_STEP: a micro-step opens, or the step ends (a step of no micro-step reduces nothing).
    {no, F, no, no, no, S, no, no, no, no, no, no, no},
    // FORWARD: the model runs; the loss may be recorded before backward begins.
    {no, no, F, K, no, no, F, F, no, no, F, no, no},
    // BACKWARD: checkpointed modules run their forward again; the loss may be recorded late.
    {no, no, K, no, I, no, K, K, K, K, K, no, no},
    // STEP: end_step runs alone and moves on to BETWEEN_STEPS itself when the optimizer is done.
    {no, no, no, no, no, no, no, no, no, no, no, no, no},
};

constexpr const char* kPhaseNames[kPhases] = {"BETWEEN_STEPS", "IN_STEP", "FORWARD", "BACKWARD", "STEP"};
// Gathers run only in FORWARD, BACKWARD and STEP; the other two labels name where a collective
// outside them would have come from.
constexpr const char* kPhaseLabels[kPhases] = {"between_steps", "in_step", "forward", "backward", "step"};
constexpr const char* kCallNames[kCalls] = {
    "begin_step()",   "begin_micro_step()", "record_micro_loss()", "begin_backward()", "end_micro_step()",
    "end_step()",     "pre_forward()",      "post_forward()",      "pre_backward()",   "post_backward()",
    "checked_access()", "load_shard_state()", "gather_full_state()"};
static_assert(std::size(kCallNames) == static_cast<size_t>(EngineCall::gather_full_state) + 1);
static_assert(std::size(kPhaseNames) == static_cast<size_t>(EnginePhase::step) + 1);

int8_t next_of(EnginePhase phase, EngineCall call) {
  return kNext[static_cast<int>(phase)][static_cast<int>(call)];
}

}  // namespace

const char* engine_phase_name(EnginePhase phase) { return kPhaseNames[static_cast<int>(phase)]; }
const char* engine_phase_label(EnginePhase phase) { return kPhaseLabels[static_cast<int>(phase)]; }
const char* engine_call_name(EngineCall call) { return kCallNames[static_cast<int>(call)]; }

bool is_legal_call(EnginePhase phase, EngineCall call) { return next_of(phase, call) != no; }

EnginePhase phase_after(EnginePhase phase, EngineCall call, int rank, int64_t step) {
  const int8_t next = next_of(phase, call);
  if (next == no) {
    throw CorrectnessError(std::string("illegal engine call ") + engine_call_name(call) + " in phase " +
                           engine_phase_name(phase) + " on rank " + std::to_string(rank) + " at step " +
                           std::to_string(step));
  }
  return static_cast<EnginePhase>(next);
}

}  // namespace zero3
