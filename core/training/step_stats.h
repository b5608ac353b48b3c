// What one optimizer step reports, the same from every trainer (reference, DDP, ZeRO-3), so runs
// can be compared step by step.
#pragma once
#include <cstdint>

namespace zero3 {

struct StepStats {
  int64_t step = 0;
  double loss = 0.0;       // mean over micro-steps (and over ranks for DDP and ZeRO-3)
  float grad_norm = 0.0f;  // before clipping
  float clip = 1.0f;       // the coefficient applied
  // Device-to-host copies this rank's step made (Kernels::host_syncs): by design 2 (the loss and
  // the gradient norm) plus 1 per MoE layer per micro-step. Not part of a run's comparable result.
  int64_t host_syncs = 0;
};

}  // namespace zero3
