// Where one rank's engine stands in the training step, and which calls each phase allows. The
// phase API (begin_step ... end_step), the module hooks and the between-steps calls (checkpoint
// load, full state) are all checked against one table, so a driver that calls them out of order
// gets an error naming the phase, the call, the rank and the step instead of a loss buffer
// acquired twice or a micro-step's gradients dropped.
//
// A step: BETWEEN_STEPS -begin_step-> IN_STEP, then per micro-step -begin_micro_step-> FORWARD
// -begin_backward-> BACKWARD -end_micro_step-> IN_STEP; finally -end_step-> STEP (the optimizer),
// which end_step leaves for BETWEEN_STEPS when it is done.
#pragma once
#include <cstdint>

namespace zero3 {

enum class EnginePhase : uint8_t {
  between_steps,  // before the first step and after end_step: checkpoints load and save here
  in_step,        // begin_step ran; no micro-step is open (before the first, between two)
  forward,        // a micro-step's forward
  backward,       // a micro-step's backward (forward hooks run again for checkpointed modules)
  step,           // inside end_step: the loss, the norm and the optimizer
};

enum class EngineCall : uint8_t {
  begin_step,
  begin_micro_step,
  record_micro_loss,
  begin_backward,
  end_micro_step,
  end_step,
  pre_forward,
  post_forward,
  pre_backward,
  post_backward,
  checked_access,
  load_shard_state,
  gather_full_state,
};

const char* engine_phase_name(EnginePhase phase);  // "FORWARD"
const char* engine_call_name(EngineCall call);     // "begin_step()"
// The phase as collectives name it in their call sites (CallSite::phase), and so in simulator
// reports and recorded traces: "forward", "backward", "step".
const char* engine_phase_label(EnginePhase phase);

bool is_legal_call(EnginePhase phase, EngineCall call);

// The phase after `call`, or CorrectnessError naming the call, the phase, the rank and the step
// when the table does not allow it there.
EnginePhase phase_after(EnginePhase phase, EngineCall call, int rank, int64_t step);

}  // namespace zero3
