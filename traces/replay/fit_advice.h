// "Will it fit?" answered with what to do about it: the run replayed again with one thing changed
// at a time. When the run fits, the largest micro-batch that still fits; when it does not, that
// micro-batch (or none) and each single lever that would make it fit — checkpointing the repeated
// block, offloading the optimizer or the parameters to the host, ZeRO stage 3, hpZ or HSDP off,
// more ranks — each with its predicted peak, step time and tokens per second, so a planner (or a
// script reading the report's memory.advice) can choose without looping over replays by hand.
//
//   const FitAdvice advice = advise_fit(recorded_trace, {.batch = 4, .seq_len = 4096}, options, hardware, path);
//   if (advice.largest_micro_batch == 0) ...   // not even one sequence per rank fits
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "traces/replay/hardware_catalog.h"
#include "traces/replay/replay.h"
#include "traces/format/trace_scaling.h"

namespace zero3 {

struct FitProbe {
  std::string lever;      // "micro-batch", "activation checkpointing", "offload optimizer", ...
  std::string change;     // the flag that makes it: "--checkpoint-activations LlamaDecoderLayer"
  bool fits = false;
  int64_t peak_bytes = 0;  // the largest per-rank peak
  double step_s = 0.0;     // the predicted (last) step
  double tokens_per_s = 0.0;
};

struct FitAdvice {
  bool fits = false;                 // the run as asked
  int64_t largest_micro_batch = -1;  // -1: the trace cannot be rescaled; 0: not even 1 fits
  FitProbe at_largest{};             // the run at that micro-batch
  std::vector<FitProbe> levers{};    // when it does not fit: each single lever tried, fitting or not
  int replays = 0;                   // replays the search ran
};

// `recorded`: the trace as read (not rescaled); `shape`: the run's batch, seq_len and micro-steps;
// `options`: the run's (world, config, hardware profile). Replays run symmetric (an SPMD trace) and
// without progress; a rank-divergent trace is searched the same way on the full simulation.
FitAdvice advise_fit(const Trace& recorded, const RunShape& shape, const ReplayOptions& options,
                     const HardwareChoice& hardware, const std::string& source);

nlohmann::json fit_advice_json(const FitAdvice& advice);
// "largest micro-batch that fits: 3 (peak 71.2 GB, step 1.21 s, 81,000 tokens/s)" and, when it does
// not fit, a line per lever; ends with a newline.
std::string fit_advice_lines(const FitAdvice& advice);

}  // namespace zero3
