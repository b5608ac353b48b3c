// The replay report in a few lines for a person (replay_report.h).
#include <cmath>
#include <cstdio>
#include <iterator>
#include <string>
#include <utility>

#include "traces/replay/replay_report.h"

namespace zero3 {

namespace {

std::string format(const char* pattern, double a, double b = 0.0, double c = 0.0) {
  char buffer[256];
  std::snprintf(buffer, sizeof buffer, pattern, a, b, c);
  return buffer;
}

// Decimal units, as the ZeRO paper and GPU datasheets count them.
std::string gb(double bytes) {
  if (bytes >= 1e9) return format("%.3f GB", bytes / 1e9);
  if (bytes >= 1e6) return format("%.3f MB", bytes / 1e6);
  if (bytes >= 1e3) return format("%.3f kB", bytes / 1e3);
  return format("%.0f B", bytes);
}

// Seconds in the unit that keeps three significant places: a tiny model's compute is nanoseconds,
// and "0.000000 s" read as none at all.
std::string seconds(double value) {
  if (value >= 1.0 || value == 0.0) return format("%.3f s", value);
  if (value >= 1e-3) return format("%.3f ms", value * 1e3);
  if (value >= 1e-6) return format("%.3f us", value * 1e6);
  return format("%.3f ns", value * 1e9);
}

std::string count(double value) {
  if (value >= 1e9) return format("%.2fB", value / 1e9);
  if (value >= 1e6) return format("%.2fM", value / 1e6);
  if (value >= 1e3) return format("%.2fk", value / 1e3);
  return format("%.0f", value);
}

std::string model_lines(const nlohmann::json& report) {
  const nlohmann::json& model = report.at("model");
  std::string out = "model: " + count(model.at("parameters").get<double>()) + " parameters in " +
                    std::to_string(model.at("parameter_tensors").get<int64_t>()) + " tensors; largest module '" +
                    model.at("largest_module").at("name").get<std::string>() + "' (" +
                    count(model.at("largest_module").at("parameters").get<double>()) + ")";
  if (!model.at("zero_sized_params").empty() || !model.at("sub_world_params").empty()) {
    out += "; " + std::to_string(model.at("zero_sized_params").size()) + " zero-sized and " +
           std::to_string(model.at("sub_world_params").size()) + " smaller than W";
  }
  return out + "\n";
}

std::string model_state_lines(const nlohmann::json& report) {
  const nlohmann::json& states = report.at("model_states");
  const nlohmann::json& measured = states.at("measured");
  std::string out = "model states per rank: " + gb(states.at("measured_bytes_per_rank").get<double>()) +
                    " (param_shard " + gb(measured.at("param_shard").get<double>()) + " + grad_shard " +
                    gb(measured.at("grad_shard").get<double>()) + " + optimizer_state " +
                    gb(measured.at("optimizer_state").get<double>()) +
                    (states.at("host_bytes_per_rank").get<double>() > 0.0
                         ? " + in host memory " + gb(states.at("host_bytes_per_rank").get<double>())
                         : std::string()) +
                    format(") = %.2f bytes per shard element\n", states.at("measured_bytes_per_shard_element").get<double>());
  // HSDP shards over its blocks of G ranks: the paper's formula at G.
  const int64_t shard_world = report.at("model").value("shard_world", int64_t{0});
  const bool blocks = shard_world > 0 && shard_world != report.at("world").get<int64_t>();
  const std::string divisor = blocks ? "G (HSDP's block of " + std::to_string(shard_world) + ")" : "W";
  out += "  ZeRO paper (2+2+12)*Psi/" + divisor + ": " + gb(states.at("zero_paper_bytes_per_rank").get<double>()) +
         "; the paper's widths on our padded shards: " + gb(states.at("zero_paper_widths_on_our_shards_bytes").get<double>()) +
         "; our f32 gradient partition adds " + gb(states.at("gradient_width_difference_bytes").get<double>()) + "\n";
  const nlohmann::json& offload = states.at("offload");
  if (offload.at("optimizer") != "none" || offload.at("param") != "none") {
    out += "  offloaded (optimizer " + offload.at("optimizer").get<std::string>() + ", parameters " +
           offload.at("param").get<std::string>() + "): on the device " +
           gb(states.at("device_bytes_per_rank").get<double>()) + " per rank; in host memory " +
           gb(states.at("host_bytes_per_rank").get<double>()) + " per rank, " +
           gb(states.at("host_bytes_per_node").get<double>()) + " per node; copies per step " +
           gb(offload.at("device_to_host_bytes_per_step").get<double>()) + " device->host, " +
           gb(offload.at("host_to_device_bytes_per_step").get<double>()) + " host->device\n";
  }
  const nlohmann::json& estimator = states.at("deepspeed_estimator");
  for (const auto& estimate : estimator.at("estimates")) {
    out += "  DeepSpeed estimator, offload " + estimate.at("offload").get<std::string>() + ": " +
           gb(estimate.at("gpu_bytes").get<double>()) + " per GPU, " + gb(estimate.at("cpu_bytes").get<double>()) +
           " CPU per node (" + std::to_string(estimator.at("gpus_per_node").get<int>()) + " GPUs x " +
           std::to_string(estimator.at("nodes").get<int>()) + " nodes)\n";
  }
  if (states.at("offload").at("optimizer") != "none") {
    // The two host figures differ by design, by a factor the reader should not have to derive.
    out += "  (the estimator's CPU figure with optimizer offload is 2x ours: DeepSpeed offloads the f32 gradient "
           "partition too, 16 bytes per element where zero3 keeps 12 on the host, and multiplies by its "
           "additional_buffer_factor 1.5; on the GPU it counts the largest layer's parameters where zero3 counts "
           "its f32 gradient shard)\n";
  }
  return out;
}

std::string peak_line(const nlohmann::json& rank, const std::string& who) {
  const nlohmann::json& peak = rank.at("peak_total");
  std::string out = "peak " + who + ": " + gb(peak.at("bytes").get<double>()) +
                    " at " + seconds(peak.at("at_s").get<double>()) + " (step " +
                    std::to_string(peak.at("step").get<int64_t>()) + ", " + peak.at("phase").get<std::string>() +
                    ", module '" + peak.at("module").get<std::string>() + "'); each category's own peak:";
  for (const auto& [category, moment] : rank.at("categories").items()) {
    if (moment.at("bytes").get<int64_t>() > 0) out += " " + category + " " + gb(moment.at("bytes").get<double>());
  }
  return out + "\n";
}

// Bytes with one decimal in the largest decimal unit under them; `whole` drops a ".0", so a
// datasheet capacity reads as the datasheet does ("80 GB").
std::string short_bytes(double bytes, bool whole = false) {
  static constexpr std::pair<double, const char*> kUnits[] = {{1e9, "GB"}, {1e6, "MB"}, {1e3, "kB"}, {0.0, "B"}};
  size_t which = 0;
  while (which + 1 < std::size(kUnits) && bytes < kUnits[which].first) ++which;
  const auto& [scale, unit] = kUnits[which];
  std::string number = format("%.1f", scale > 0.0 ? bytes / scale : bytes);
  if (whole && number.ends_with(".0")) number.resize(number.size() - 2);
  return number + " " + unit;
}

// Every replay ends its memory part with one verdict naming the hardware it was judged against,
// and says so when nobody chose that hardware: a fit on an assumed device is not an answer yet.
std::string verdict_line(const nlohmann::json& report) {
  const nlohmann::json& verdict = report.at("memory").at("verdict");
  const std::string hardware = verdict.at("hardware").get<std::string>();
  const std::string assumed =
      verdict.at("assumed").get<bool>() ? " (assumed: pass --hardware h100|h200|a100|FILE)" : "";
  if (verdict.at("fits").is_null()) return "fit unknown: " + hardware + " has no memory size" + assumed + "\n";
  const long percent = std::lround(verdict.at("fraction").get<double>() * 100.0);
  const bool fits = verdict.at("fits").get<bool>();
  const double margin = verdict.value("margin_bytes", 0.0);
  const nlohmann::json& reserve = verdict.value("reserve", nlohmann::json::object());
  std::string reserve_text;
  if (reserve.value("bytes", 0.0) > 0.0) {
    reserve_text = " after a " + short_bytes(reserve.at("bytes").get<double>()) + " reserve (CUDA context " +
                   short_bytes(reserve.at("context_bytes").get<double>()) + ", allocator fragmentation " +
                   format("%.0f", 100.0 * reserve.at("fragmentation_fraction").get<double>()) + " % of the device)";
  }
  const std::string margin_text =
      verdict.contains("margin_bytes") ? "; " + short_bytes(std::fabs(margin)) + (fits ? " to spare" : " over") : "";
  return std::string(fits ? "fits: " : "does NOT fit: ") + short_bytes(verdict.at("peak_bytes").get<double>()) + " of " +
         short_bytes(verdict.at("capacity_bytes").get<double>(), /*whole=*/true) + " (" + std::to_string(percent) +
         " %) on " + hardware + assumed + margin_text + reserve_text + "\n";
}

// Ranks whose peaks are identical (SPMD parts of a divergent trace) share one line.
std::string peak_lines(const nlohmann::json& report) {
  const nlohmann::json& ranks = report.at("memory").at("per_rank");
  bool all_same = true;
  for (const auto& rank : ranks) all_same = all_same && rank.at("categories") == ranks[0].at("categories");
  if (all_same && ranks.size() > 1) return peak_line(ranks[0], "(every rank alike)");
  std::string out;
  for (size_t i = 0; i < ranks.size() && i < 8; ++i) {
    out += peak_line(ranks[i], "rank " + std::to_string(ranks[i].at("rank").get<int>()));
  }
  if (ranks.size() > 8) out += "  (" + std::to_string(ranks.size() - 8) + " more ranks in the JSON report)\n";
  return out;
}

bool hardware_link_is_not_nvlink(const nlohmann::json& time) {
  return time.at("hardware").at("link").get<std::string>() != "nvlink";
}

std::string communication_and_time_lines(const nlohmann::json& report) {
  const nlohmann::json& communication = report.at("communication");
  std::string out = "communication (rank 0, all steps):";
  for (const auto& [op, totals] : communication.at("by_op").items()) {
    out += " " + op + " " + std::to_string(totals.at("count").get<int64_t>()) + "x " +
           gb(totals.at("buffer_bytes").get<double>());
  }
  out += format("; per step %.3f x the 2*Psi DDP volume\n", communication.at("ratio_to_ddp").get<double>());
  const nlohmann::json& levels = communication.at("bytes_per_step_by_level");
  out += "bytes per step by link (rank 0, last step): intra-node " +
         gb(levels.at("intra_node_bytes").get<double>()) + ", inter-node " +
         gb(levels.at("inter_node_bytes").get<double>());
  std::string groups;
  for (const auto& [group, totals] : levels.at("by_group").items()) {
    groups += (groups.empty() ? "" : ", ") + group + " " + totals.at("level").get<std::string>() + " " +
              gb(totals.at("buffer_bytes").get<double>());
  }
  out += (groups.empty() ? "" : " (" + groups + ")") + "\n";
  const nlohmann::json& time = report.at("time");
  // The link named is the world's; process groups inside a node ride NVLink instead.
  const bool groups_in_a_node = hardware_link_is_not_nvlink(time) && levels.at("intra_node_bytes").get<int64_t>() > 0;
  const nlohmann::json& hardware = time.at("hardware");
  if (!time.at("steps").empty()) {
    const nlohmann::json& last = time.at("steps").back();
    out += "predicted step time: " + seconds(last.at("duration_s").get<double>()) + " (compute " +
           seconds(last.at("compute_s").get<double>()) + ", communication " +
           seconds(last.at("communication_s").get<double>()) + ", " +
           seconds(last.at("exposed_communication_s").get<double>()) + " not hidden by compute" +
           (last.at("offload_s").get<double>() > 0.0
                ? ", offload copies and host AdamW " + seconds(last.at("offload_s").get<double>())
                : std::string()) + ") on " +
           hardware.at("name").get<std::string>() + " over " + hardware.at("link").get<std::string>() +
           (groups_in_a_node ? " (groups inside a node over nvlink)" : "") + "\n";
  }
  const nlohmann::json& throughput = report.value("throughput", nlohmann::json());
  if (throughput.is_object()) {
    out += format("throughput: %.0f tokens/s over %.0f ranks; %.1f TFLOP/s per GPU", throughput.at("tokens_per_s").get<double>(),
                  report.at("world").get<double>(), throughput.at("model_tflops_per_gpu").get<double>());
    if (!throughput.at("mfu").is_null()) {
      out += format(", MFU %.1f %%, HFU %.1f %%", 100.0 * throughput.at("mfu").get<double>(),
                    100.0 * throughput.at("hfu").get<double>());
    }
    out += " (model flops: 6N + attention per token, recompute only in HFU)\n";
  }
  return out;
}

std::string check_lines(const nlohmann::json& report) {
  const nlohmann::json& checks = report.at("checks");
  std::string out;
  if (!checks.at("failure").is_null()) {
    out += "FAILURE (" + checks.at("failure").at("kind").get<std::string>() + "): " +
           checks.at("failure").at("message").get<std::string>() + "\n";
  }
  for (const auto& [kind, findings] : checks.at("findings").items()) {
    out += kind + ": " + std::to_string(findings.at("count").get<int64_t>()) + " (first: rank " +
           std::to_string(findings.at("first").at(0).at("rank").get<int>()) + ", module '" +
           findings.at("first").at(0).at("module").get<std::string>() + "': " +
           findings.at("first").at(0).at("detail").get<std::string>() + ")\n";
  }
  const nlohmann::json& recorded = checks.at("recorded_collectives");
  if (!recorded.is_null() && recorded.at("compared").get<bool>()) {
    out += std::string("recorded collectives: ") +
           (recorded.at("equal").get<bool>() ? "the replay issued exactly the recorded ones"
                                             : "DIFFER, " + recorded.at("first_difference").get<std::string>()) + "\n";
  }
  if (out.empty()) out = "checks: clean (no collective mismatch, no placeholder hit, no trace invalidation)\n";
  return out;
}

}  // namespace

std::string replay_summary(const nlohmann::json& report) {
  const bool symmetric = report.at("simulation").get<std::string>() == "symmetric";
  std::string out = "replay '" + report.at("trace").get<std::string>() + "': " + report.at("simulation").get<std::string>() +
                    " simulation of " + std::to_string(report.at("world").get<int>()) + " ranks" +
                    (symmetric ? " (one representative rank: every rank runs the same events)" : " (every rank)") +
                    ", " + std::to_string(report.at("steps").get<int64_t>()) + " steps\n";
  return out + model_lines(report) + model_state_lines(report) + peak_lines(report) + verdict_line(report) +
         communication_and_time_lines(report) + check_lines(report);
}

}  // namespace zero3
