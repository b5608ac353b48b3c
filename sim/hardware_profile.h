// HardwareProfile: the simulated machine behind the clock. Compute takes flops / peak_flops; a
// collective takes the ring alpha-beta time, e.g. all-gather of `bytes` (the whole gathered buffer)
// over W ranks: latency_s * (W - 1) + (W - 1) / W * bytes / bandwidth_bytes_per_s.
//
// Two levels. bandwidth_bytes_per_s / latency_s are the world's link: a collective over every rank
// is priced on them alone (the catalog picks NVLink for a world within one node, InfiniBand past
// it), so flat replays do not depend on the levels at all. A process group's collective (HSDP's
// and hpZ's blocks, the all-reduce across blocks) is priced by where its ranks are: all of them
// in one node of ranks_per_node consecutive ranks -> the intra-node link (NVLink); otherwise the
// ring has a step that crosses the network and the world's link bounds it (inter-node). With
// blocks of G consecutive ranks every block lies in one node exactly when G <= ranks_per_node and
// ranks_per_node % G == 0. The default ranks_per_node of 1 puts every group of two or more ranks
// on the world's link, i.e. today's flat model.
//
//   HardwareProfile h100 = HardwareProfile::from_json(nlohmann::json::parse(R"({"peak_flops": 9.9e14})"));
#pragma once
#include <cstdint>
#include <vector>

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
  // AdamW on the device over this many shard elements a second; 0: the optimizer step takes no
  // time (memory-bound milliseconds on a GPU). `zero3 bench calibrate` measures it on a CPU, where
  // the step is a part of the step time worth pricing.
  double optimizer_elements_per_s = 0.0;
  // The link inside a node (NVLink) and how many consecutive ranks share a node.
  double intra_node_bandwidth_bytes_per_s = 1e11;
  double intra_node_latency_s = 5e-6;
  int ranks_per_node = 1;

  // Keys as the fields; missing keys keep their defaults. Throws InputError naming the key for an
  // unknown key or a value that is not a positive number.
  static HardwareProfile from_json(const nlohmann::json& json);
  nlohmann::json to_json() const;
};

enum class LinkLevel : uint8_t { intra_node, inter_node };
const char* link_level_name(LinkLevel level);  // "intra-node", "inter-node"
// Whether the ranks (world ranks) all lie in one node.
LinkLevel link_level(const HardwareProfile& hardware, const std::vector<int>& world_ranks);
// The level of blocks of `block_size` consecutive ranks: intra-node when every block lies in one node.
LinkLevel block_level(const HardwareProfile& hardware, int block_size);
// The level of a world of `world` ranks (ranks 0 .. world-1).
LinkLevel world_level(const HardwareProfile& hardware, int world);

// Seconds for ZeRO-Offload's part of a step: `copied_bytes` over the host link and host AdamW
// over `host_optimizer_elements`.
double offload_time_s(const HardwareProfile& hardware, int64_t copied_bytes, int64_t host_optimizer_elements);
// Seconds for `flops` of compute on one rank.
double compute_time_s(const HardwareProfile& hardware, double flops);
// Seconds for one collective moving `bytes` (the all-gathered or reduce-scattered whole buffer, or
// the all-reduced / broadcast buffer) among `world` ranks, ring algorithms.
double collective_time_s(const HardwareProfile& hardware, CollectiveOp op, int64_t bytes, int world);
// The same for a process group's collective among `group_size` ranks at `level`: the intra-node
// link's numbers for intra_node, the world's link for inter_node (see the top comment).
double group_collective_time_s(const HardwareProfile& hardware, CollectiveOp op, int64_t bytes, int group_size,
                               LinkLevel level);

}  // namespace zero3
