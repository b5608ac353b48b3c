// One training run as the CLI drives it: banner, per-step lines with a progress bar, summary and
// the JSON report. `zero3 train` and `zero3 demo` both go through here.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/training/checkpoint.h"
#include "core/training/replicated_trainer.h"
#include "tools/runs/train_options.h"

namespace zero3 {

struct TrainOutcome {
  std::vector<StepStats> steps;
  std::string final_param_hash;  // FNV-1a over the f32 master weights in id order
  std::string final_state_hash;  // the same over master weights and both AdamW moments
  double seconds = 0.0;
  int64_t parameter_count = 0;
  std::optional<double> unigram_entropy_nats;
  std::string data_description;
  nlohmann::json backend_report = nlohmann::json::object();  // sim: memory, collectives, check results
};

// Trains per `options` on the chosen backend, printing as it goes; throws Zero3Error on failure.
TrainOutcome run_training(const TrainOptions& options);
nlohmann::json outcome_to_json(const TrainOptions& options, const TrainConfig& config, const TrainOutcome& outcome);
// Prints a warning line for each way this run differs from the one that saved `dir` (seed,
// training config, world size and so the global batch), so a resume that is not a continuation is
// never silent.
void warn_about_resume_differences(const std::string& dir, const CheckpointManifest& saved, uint64_t seed,
                                   const TrainConfig& config, int world);
// FNV-1a over the final f32 master weights in parameter-id order; and over the masters and both
// AdamW moments, which a resumed or cross-backend run must also reproduce.
std::string hash_master_weights(const std::vector<OptimizerSlot>& state);
std::string hash_optimizer_state(const std::vector<OptimizerSlot>& state);

}  // namespace zero3
