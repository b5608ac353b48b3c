// What one optimizer step reports, the same from every trainer (reference, DDP, ZeRO-3), so runs
// can be compared step by step.
#pragma once
#include <cstdint>

namespace zero3 {

// Wall-clock seconds (steady_clock, core/base/stopwatch.h) this rank's step spent per phase,
// measured in every run on every backend. Under the simulator the wall clock is the fibers' (one
// rank's phase includes whatever its peers ran meanwhile): meaningless there, recorded anyway.
// Not part of a run's comparable result: nothing compares, hashes or decides on them.
//
//   step_s      the whole train_step: every micro-step, the gradient reduction, the optimizer.
//   forward_s   the forward passes of all micro-steps, the loss included, waits for parameter
//               gathers included (and the setup before each: the step's zeroed buffers, the
//               micro-step's batch and tape reset).
//   backward_s  the backward passes of all micro-steps, recompute and waits included, plus the
//               end-of-micro-step gradient flush (ZeRO: end_micro_step; DDP: the all-reduces).
//   recompute_s the part of backward_s spent running checkpointed modules' forwards again
//               (recompute_checkpointed in core/autograd/autograd.cc).
//   optimizer_s the rest of the step after the last micro-step: the loss and gradient-norm
//               all-reduces, clipping, AdamW, the refresh and gather of parameters after it.
//               Measured directly, as the last lap: forward_s + backward_s + optimizer_s equals
//               step_s but for the few clock reads between them.
//   offload_s   inside the ZeRO engine's host<->device copies (Zero3Engine::down/up) and the host
//               AdamW under offload_optimizer: a part of the phases above, not beside them; 0
//               without offload.
//   communication_wait_s  blocked waiting for collectives to complete: Work::wait(), the blocking
//               collectives and synchronize() (TimedCommunicator, core/sharding/timed_communicator.h),
//               i.e. communication not hidden behind compute; also a part of the phases above.
//               Filled in by run_rank_program where the seams measure it (the MPI backend), else 0.
struct PhaseTimes {
  double step_s = 0.0;
  double forward_s = 0.0;
  double backward_s = 0.0;
  double recompute_s = 0.0;
  double optimizer_s = 0.0;
  double offload_s = 0.0;
  double communication_wait_s = 0.0;
};

struct StepStats {
  int64_t step = 0;
  double loss = 0.0;       // mean over micro-steps (and over ranks for DDP and ZeRO-3)
  float grad_norm = 0.0f;  // before clipping
  float clip = 1.0f;       // the coefficient applied
  // Device-to-host copies this rank's step made (Kernels::host_syncs): by design 2 (the loss and
  // the gradient norm) plus 1 per MoE layer per micro-step. Not part of a run's comparable result.
  int64_t host_syncs = 0;
  // This rank's wall clock per phase (above). Not part of a run's comparable result.
  PhaseTimes phases = {};
};

}  // namespace zero3
