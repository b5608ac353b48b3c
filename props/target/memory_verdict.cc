// The memory_growth rule over a runner's per-rank, per-step byte counts.
#include "props/target/memory_verdict.h"

#include <cstdint>
#include <vector>

namespace zero3 {
namespace {

std::string bytes_list(const std::vector<int64_t>& bytes) {
  std::string text;
  for (const int64_t b : bytes) text += (text.empty() ? "" : ", ") + std::to_string(b);
  return "[" + text + "]";
}

}  // namespace

std::optional<std::string> memory_growth(const nlohmann::json& framework) {
  if (!framework.contains("held_bytes") || !framework.contains("peak_bytes")) return std::nullopt;
  const auto& held_by_rank = framework.at("held_bytes");
  const auto& peak_by_rank = framework.at("peak_bytes");
  for (size_t rank = 0; rank < held_by_rank.size(); ++rank) {
    const auto held = held_by_rank.at(rank).get<std::vector<int64_t>>();
    const auto peak = peak_by_rank.at(rank).get<std::vector<int64_t>>();
    if (static_cast<int64_t>(held.size()) < kMemoryStepsMin || peak.size() != held.size()) continue;
    bool grows_every_step = true;
    for (size_t step = 2; step < held.size(); ++step) grows_every_step = grows_every_step && held[step] > held[step - 1];
    if (!grows_every_step || peak.back() <= peak[1]) continue;
    return "rank " + std::to_string(rank) + " holds more tensor bytes after every step from the second on: held " +
           bytes_list(held) + ", peaks " + bytes_list(peak) + " (+" + std::to_string(held.back() - held[1]) +
           " bytes over " + std::to_string(held.size() - 2) + " steps)";
  }
  return std::nullopt;
}

}  // namespace zero3
