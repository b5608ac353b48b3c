// A trace as the user's run would execute it: another micro-batch, sequence length or number of
// micro-steps per optimizer step than it was recorded with (`zero3 replay --micro-batch --seq-len
// --gas`, or the config's train_micro_batch_size_per_gpu and gradient_accumulation_steps).
//
// Activation bytes, output bytes and explicit flops grow with tokens = batch x seq_len, except
// their quadratic parts (attention scores), which grow with batch x seq_len^2; flops derived from
// shapes follow the new `tokens`. A step recorded with one micro-step is repeated to the requested
// accumulation.
//
//   Trace run = rescale_trace(load_trace(path), {.batch = 8, .micro_steps = 4}, path);
#pragma once
#include <cstdint>
#include <string>

#include "traces/format/trace.h"

namespace zero3 {

struct RunShape {
  int64_t batch = 0;        // sequences per rank and micro-step; 0: the trace's
  int64_t seq_len = 0;      // tokens per sequence; 0: the trace's
  int64_t micro_steps = 0;  // per optimizer step (gradient accumulation); 0: the trace's
};

// Micro-steps in one optimizer step of `step` (its `backward` events, as rank 0 runs it).
int64_t micro_steps_of(const TraceStep& step);
// InputError naming `source` when the trace cannot be rescaled as asked: a new batch or sequence
// length for a trace that does not say its own (FORMAT.md, "Batch and sequence length"), or an
// accumulation other than the recorded one for a step recorded with several micro-steps.
Trace rescale_trace(const Trace& trace, const RunShape& shape, const std::string& source);

}  // namespace zero3
