// The cost model of the simulated clock.
#include "sim/hardware_profile.h"

#include <string>

#include "core/base/errors.h"

namespace zero3 {

namespace {

double positive_number(const nlohmann::json& json, const char* key, double fallback) {
  if (!json.contains(key)) return fallback;
  const nlohmann::json& value = json.at(key);
  if (!value.is_number() || !(value.get<double>() > 0.0)) {
    throw InputError(std::string("hardware profile: /") + key + " must be a positive number, got " + value.dump());
  }
  return value.get<double>();
}

}  // namespace

HardwareProfile HardwareProfile::from_json(const nlohmann::json& json) {
  if (!json.is_object()) throw InputError("hardware profile: expected a JSON object, got " + json.dump());
  for (const auto& [key, value] : json.items()) {
    if (key != "peak_flops" && key != "bandwidth_bytes_per_s" && key != "latency_s" &&
        key != "host_link_bytes_per_s" && key != "host_optimizer_elements_per_s" &&
        key != "optimizer_elements_per_s" && key != "intra_node_bandwidth_bytes_per_s" && key != "intra_node_latency_s" && key != "ranks_per_node") {
      throw InputError("hardware profile: unknown key /" + key +
                       "; expected peak_flops, bandwidth_bytes_per_s, latency_s, host_link_bytes_per_s, "
                       "host_optimizer_elements_per_s, optimizer_elements_per_s, intra_node_bandwidth_bytes_per_s, "
                       "intra_node_latency_s, ranks_per_node");
    }
  }
  HardwareProfile defaults;
  HardwareProfile profile;
  profile.peak_flops = positive_number(json, "peak_flops", defaults.peak_flops);
  profile.bandwidth_bytes_per_s = positive_number(json, "bandwidth_bytes_per_s", defaults.bandwidth_bytes_per_s);
  profile.latency_s = positive_number(json, "latency_s", defaults.latency_s);
  profile.host_link_bytes_per_s = positive_number(json, "host_link_bytes_per_s", defaults.host_link_bytes_per_s);
  profile.host_optimizer_elements_per_s =
      positive_number(json, "host_optimizer_elements_per_s", defaults.host_optimizer_elements_per_s);
  if (json.contains("optimizer_elements_per_s")) {
    profile.optimizer_elements_per_s = positive_number(json, "optimizer_elements_per_s", 1.0);
  }
  profile.intra_node_bandwidth_bytes_per_s =
      positive_number(json, "intra_node_bandwidth_bytes_per_s", defaults.intra_node_bandwidth_bytes_per_s);
  profile.intra_node_latency_s = positive_number(json, "intra_node_latency_s", defaults.intra_node_latency_s);
  const double ranks_per_node = positive_number(json, "ranks_per_node", defaults.ranks_per_node);
  if (ranks_per_node != static_cast<double>(static_cast<int>(ranks_per_node)) || ranks_per_node > (1 << 20)) {
    throw InputError("hardware profile: /ranks_per_node must be a whole number up to 2^20, got " +
                     json.at("ranks_per_node").dump());
  }
  profile.ranks_per_node = static_cast<int>(ranks_per_node);
  return profile;
}

nlohmann::json HardwareProfile::to_json() const {
  nlohmann::json json = {{"peak_flops", peak_flops},
          {"bandwidth_bytes_per_s", bandwidth_bytes_per_s},
          {"latency_s", latency_s},
          {"host_link_bytes_per_s", host_link_bytes_per_s},
          {"host_optimizer_elements_per_s", host_optimizer_elements_per_s},
          {"intra_node_bandwidth_bytes_per_s", intra_node_bandwidth_bytes_per_s},
          {"intra_node_latency_s", intra_node_latency_s},
          {"ranks_per_node", ranks_per_node}};
  // Only when priced: from_json takes no 0 for it (a key present must be a positive rate).
  if (optimizer_elements_per_s > 0.0) json["optimizer_elements_per_s"] = optimizer_elements_per_s;
  return json;
}

const char* link_level_name(LinkLevel level) {
  return level == LinkLevel::intra_node ? "intra-node" : "inter-node";
}

LinkLevel link_level(const HardwareProfile& hardware, const std::vector<int>& world_ranks) {
  for (int rank : world_ranks) {
    if (rank / hardware.ranks_per_node != world_ranks.front() / hardware.ranks_per_node) return LinkLevel::inter_node;
  }
  return LinkLevel::intra_node;
}

LinkLevel block_level(const HardwareProfile& hardware, int block_size) {
  ZERO3_CHECK(block_size >= 1, "block of " + std::to_string(block_size) + " ranks");
  if (block_size == 1) return LinkLevel::intra_node;
  const bool inside = block_size <= hardware.ranks_per_node && hardware.ranks_per_node % block_size == 0;
  return inside ? LinkLevel::intra_node : LinkLevel::inter_node;
}

LinkLevel world_level(const HardwareProfile& hardware, int world) {
  return world <= hardware.ranks_per_node ? LinkLevel::intra_node : LinkLevel::inter_node;
}

double offload_time_s(const HardwareProfile& hardware, int64_t copied_bytes, int64_t host_optimizer_elements) {
  ZERO3_CHECK(copied_bytes >= 0 && host_optimizer_elements >= 0, "negative offload traffic");
  return static_cast<double>(copied_bytes) / hardware.host_link_bytes_per_s +
         static_cast<double>(host_optimizer_elements) / hardware.host_optimizer_elements_per_s;
}

double compute_time_s(const HardwareProfile& hardware, double flops) {
  ZERO3_CHECK(flops >= 0.0, "negative flops " + std::to_string(flops));
  return flops / hardware.peak_flops;
}

namespace {

double ring_time_s(double bandwidth_bytes_per_s, double latency_s, CollectiveOp op, int64_t bytes, int world) {
  ZERO3_CHECK(bytes >= 0 && world >= 1, "collective of " + std::to_string(bytes) + " bytes on " +
                                            std::to_string(world) + " ranks");
  if (world == 1) return 0.0;
  const double steps = world - 1;
  const double ring_fraction = steps / world;
  const double transfer_s = static_cast<double>(bytes) / bandwidth_bytes_per_s;
  switch (op) {
    case CollectiveOp::all_gather:
    case CollectiveOp::reduce_scatter: return latency_s * steps + ring_fraction * transfer_s;
    // A ring all-reduce is a reduce-scatter followed by an all-gather.
    case CollectiveOp::all_reduce: return 2.0 * (latency_s * steps + ring_fraction * transfer_s);
    // A pipelined ring broadcast sends every byte once over each link.
    case CollectiveOp::broadcast: return latency_s * steps + transfer_s;
    // A barrier is an all-reduce of nothing.
    case CollectiveOp::barrier: return 2.0 * latency_s * steps;
  }
  return 0.0;
}

}  // namespace

double collective_time_s(const HardwareProfile& hardware, CollectiveOp op, int64_t bytes, int world) {
  return ring_time_s(hardware.bandwidth_bytes_per_s, hardware.latency_s, op, bytes, world);
}

double group_collective_time_s(const HardwareProfile& hardware, CollectiveOp op, int64_t bytes, int group_size,
                               LinkLevel level) {
  if (level == LinkLevel::intra_node) {
    return ring_time_s(hardware.intra_node_bandwidth_bytes_per_s, hardware.intra_node_latency_s, op, bytes, group_size);
  }
  return ring_time_s(hardware.bandwidth_bytes_per_s, hardware.latency_s, op, bytes, group_size);
}

}  // namespace zero3
