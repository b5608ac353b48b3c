// `zero3 train --backend sim`: ZeRO-3 or DDP on simulated ranks, with --check comparing ZeRO-3
// against the DDP reference bit for bit and against the single-process reference by tolerance.
#pragma once
#include <nlohmann/json.hpp>

#include "tools/runs/training_run.h"

namespace zero3 {

// Trains on the simulator, prints steps and the summary, fills `outcome` and adds the sim-only
// fields (memory, collectives, check results) to `report`. Throws Zero3Error on failure.
void train_simulated(const TrainOptions& options, const TrainConfig& config, TrainOutcome& outcome,
                     nlohmann::json& report);

}  // namespace zero3
