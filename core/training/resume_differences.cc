// Differences between a checkpoint's run and the run resuming it (see resume_differences.h).
#include "core/training/resume_differences.h"

namespace zero3 {

namespace {

// Every leaf where `saved` and `now` differ, as "path: saved in the checkpoint, now now".
void collect(const nlohmann::json& saved, const nlohmann::json& now, const std::string& path,
             std::vector<std::string>& out) {
  if (saved.is_object() && now.is_object()) {
    for (const auto& [key, value] : saved.items()) {
      collect(value, now.contains(key) ? now.at(key) : nlohmann::json(), path + "/" + key, out);
    }
    for (const auto& [key, value] : now.items()) {
      if (!saved.contains(key)) collect(nlohmann::json(), value, path + "/" + key, out);
    }
    return;
  }
  if (saved == now) return;
  // Floats are f32 settings: a checkpoint written before they were saved in their shortest form
  // (0.003000000026077032) holds the same lr as 0.003.
  if (saved.is_number_float() && now.is_number_float() &&
      static_cast<float>(saved.get<double>()) == static_cast<float>(now.get<double>())) {
    return;
  }
  const auto text = [](const nlohmann::json& value) { return value.is_null() ? std::string("unset") : value.dump(); };
  out.push_back("train_config " + path + ": " + text(saved) + " in the checkpoint, " + text(now) + " now");
}

}  // namespace

std::vector<std::string> resume_differences(const CheckpointManifest& saved, uint64_t seed, const TrainConfig& config) {
  std::vector<std::string> out;
  if (saved.seed != seed) {
    out.push_back("seed: " + std::to_string(saved.seed) + " in the checkpoint, " + std::to_string(seed) +
                  " now (the data stream differs from the saved run's)");
  }
  collect(saved.train_config, train_config_to_json(config), "", out);
  return out;
}

}  // namespace zero3
