// HardwareProfile: the simulated machine behind the clock. Compute takes flops / peak_flops; a
// collective takes the ring alpha-beta time, e.g. all-gather of `bytes` (the whole gathered buffer)
// over W ranks: latency_s * (W - 1) + (W - 1) / W * bytes / bandwidth_bytes_per_s.
//
//   HardwareProfile h100 = HardwareProfile::from_json(nlohmann::json::parse(R"({"peak_flops": 9.9e14})"));
#pragma once
#include <cstdint>

#include <nlohmann/json.hpp>

#include "core/sharding/communicator.h"

namespace zero3 {

struct HardwareProfile {
  double peak_flops = 1e14;             // per rank, sustained
  double bandwidth_bytes_per_s = 1e11;  // per rank link, as NCCL's bus bandwidth
  double latency_s = 5e-6;              // per ring step
  // ZeRO-Offload's costs: host<->device copies over this link (PCIe), each way, and AdamW on the
  // host over this many shard elements a second (memory-bound on the CPU socket's bandwidth).
  double host_link_bytes_per_s = 25e9;
  double host_optimizer_elements_per_s = 1e9;

  // Keys as the fields; missing keys keep their defaults. Throws InputError naming the key for an
  // unknown key or a value that is not a positive number.
  static HardwareProfile from_json(const nlohmann::json& json);
  nlohmann::json to_json() const;
};

// Seconds for ZeRO-Offload's part of a step: `copied_bytes` over the host link and host AdamW
// over `host_optimizer_elements`.
double offload_time_s(const HardwareProfile& hardware, int64_t copied_bytes, int64_t host_optimizer_elements);
// Seconds for `flops` of compute on one rank.
double compute_time_s(const HardwareProfile& hardware, double flops);
// Seconds for one collective moving `bytes` (the all-gathered or reduce-scattered whole buffer, or
// the all-reduced / broadcast buffer) among `world` ranks, ring algorithms.
double collective_time_s(const HardwareProfile& hardware, CollectiveOp op, int64_t bytes, int world);

}  // namespace zero3
