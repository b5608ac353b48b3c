// What a resumed run does differently from the run that saved its checkpoint. Resharding to another
// world size is supported and not reported; a different seed (a different data stream) or training
// config is legal but easy to do by accident, so `zero3 train --load-checkpoint` warns about each.
//
//   for (const std::string& line : resume_differences(read_checkpoint_manifest(dir), seed, config))
//     std::printf("warning: %s\n", line.c_str());
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/training/checkpoint.h"
#include "core/training/train_config.h"

namespace zero3 {

// One line per difference, naming the setting (a JSON path into the training config, or "seed")
// with the saved and the current value.
std::vector<std::string> resume_differences(const CheckpointManifest& saved, uint64_t seed, const TrainConfig& config);

}  // namespace zero3
