// A run's measured step times per phase (core/training/step_stats.h's PhaseTimes, rank 0's): the
// report's "measured_phases" list, which replay's predicted phases are compared against, and the
// summary line `zero3 train` ends with.
//
//   report["measured_phases"] = measured_phases_json(outcome.steps);
//   std::printf("%s", phase_summary_line(outcome.steps).c_str());
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/training/step_stats.h"

namespace zero3 {

// One object per optimizer step run: {"step", "step_s", "forward_s", "backward_s", "recompute_s",
// "optimizer_s", "offload_s", "communication_wait_s"}; "step" counts from 0 (the step line shows
// it plus 1).
nlohmann::json measured_phases_json(const std::vector<StepStats>& steps);

// "  phases (mean over the N steps after the first): forward ... ms, ...\n": the first step, which
// warms up allocations and the prefetch trace, is left out when there are others; "" without steps.
std::string phase_summary_line(const std::vector<StepStats>& steps);

}  // namespace zero3
