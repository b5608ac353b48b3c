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
        key != "host_link_bytes_per_s" && key != "host_optimizer_elements_per_s") {
      throw InputError("hardware profile: unknown key /" + key +
                       "; expected peak_flops, bandwidth_bytes_per_s, latency_s, host_link_bytes_per_s, "
                       "host_optimizer_elements_per_s");
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
  return profile;
}

nlohmann::json HardwareProfile::to_json() const {
  return {{"peak_flops", peak_flops},
          {"bandwidth_bytes_per_s", bandwidth_bytes_per_s},
          {"latency_s", latency_s},
          {"host_link_bytes_per_s", host_link_bytes_per_s},
          {"host_optimizer_elements_per_s", host_optimizer_elements_per_s}};
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

double collective_time_s(const HardwareProfile& hardware, CollectiveOp op, int64_t bytes, int world) {
  ZERO3_CHECK(bytes >= 0 && world >= 1, "collective of " + std::to_string(bytes) + " bytes on " +
                                            std::to_string(world) + " ranks");
  if (world == 1) return 0.0;
  const double steps = world - 1;
  const double ring_fraction = steps / world;
  const double transfer_s = static_cast<double>(bytes) / hardware.bandwidth_bytes_per_s;
  switch (op) {
    case CollectiveOp::all_gather:
    case CollectiveOp::reduce_scatter: return hardware.latency_s * steps + ring_fraction * transfer_s;
    // A ring all-reduce is a reduce-scatter followed by an all-gather.
    case CollectiveOp::all_reduce: return 2.0 * (hardware.latency_s * steps + ring_fraction * transfer_s);
    // A pipelined ring broadcast sends every byte once over each link.
    case CollectiveOp::broadcast: return hardware.latency_s * steps + transfer_s;
    // A barrier is an all-reduce of nothing.
    case CollectiveOp::barrier: return 2.0 * hardware.latency_s * steps;
  }
  return 0.0;
}

}  // namespace zero3
