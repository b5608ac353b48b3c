// The replay report (FORMAT.md, "Report"): per-rank peak bytes by category and when they
// happened, model-state bytes next to the ZeRO paper's formula and DeepSpeed's estimator,
// communication by op against the 2Ψ DDP volume, the predicted step time, and the checks.
//
//   nlohmann::json report = replay_report(trace, config, hardware, result);
//   std::fputs(replay_summary(report).c_str(), stdout);
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "core/training/train_config.h"
#include "traces/replay/hardware_catalog.h"
#include "traces/replay/replay.h"
#include "traces/format/trace.h"

namespace zero3 {

nlohmann::json replay_report(const Trace& trace, const TrainConfig& config, const HardwareChoice& hardware,
                             const ShapeReplayResult& result);
// A few lines for a person, from the report.
std::string replay_summary(const nlohmann::json& report);

}  // namespace zero3
