// The measured per-phase step times in the report and the summary (measured_phases.h).
#include "tools/runs/measured_phases.h"

#include <cstdio>

namespace zero3 {

nlohmann::json measured_phases_json(const std::vector<StepStats>& steps) {
  nlohmann::json phases = nlohmann::json::array();
  for (const StepStats& stats : steps) {
    const PhaseTimes& p = stats.phases;
    phases.push_back({{"step", stats.step},
                      {"step_s", p.step_s},
                      {"forward_s", p.forward_s},
                      {"backward_s", p.backward_s},
                      {"recompute_s", p.recompute_s},
                      {"optimizer_s", p.optimizer_s},
                      {"offload_s", p.offload_s},
                      {"communication_wait_s", p.communication_wait_s}});
  }
  return phases;
}

std::string phase_summary_line(const std::vector<StepStats>& steps) {
  if (steps.empty()) return "";
  const size_t first = steps.size() > 1 ? 1 : 0;
  PhaseTimes mean;
  for (size_t i = first; i < steps.size(); ++i) {
    const PhaseTimes& p = steps[i].phases;
    mean.step_s += p.step_s;
    mean.forward_s += p.forward_s;
    mean.backward_s += p.backward_s;
    mean.recompute_s += p.recompute_s;
    mean.optimizer_s += p.optimizer_s;
    mean.offload_s += p.offload_s;
    mean.communication_wait_s += p.communication_wait_s;
  }
  const double ms = 1000.0 / static_cast<double>(steps.size() - first);
  const std::string over = first == 0 ? "the one step"
                                      : "mean over the " + std::to_string(steps.size() - first) + " steps after the first";
  char line[512];
  std::snprintf(line, sizeof(line),
                "  phases (%s): forward %.2f ms, backward %.2f ms (recompute %.2f), optimizer %.2f ms; step %.2f ms; "
                "of which offload %.2f ms, communication wait %.2f ms\n",
                over.c_str(), mean.forward_s * ms, mean.backward_s * ms, mean.recompute_s * ms, mean.optimizer_s * ms,
                mean.step_s * ms, mean.offload_s * ms, mean.communication_wait_s * ms);
  return line;
}

}  // namespace zero3
