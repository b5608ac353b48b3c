// Hardware profiles as JSON files (traces/hardware/*.json): a GPU's datasheet numbers with their
// sources, turned into the simulator's HardwareProfile for a given world size. A ring collective
// within one node runs over NVLink; once it spans nodes, every ring has a step that crosses the
// network, so the per-GPU InfiniBand bandwidth bounds it (FORMAT.md, "Hardware profiles").
//
//   HardwareChoice h200 = load_hardware("h200", /*world=*/1024);   // or a path to a .json
//   SimOptions options{.hardware = h200.profile};
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "sim/hardware_profile.h"
#include "traces/replay/kernel_rates.h"

namespace zero3 {

struct HardwareChoice {
  HardwareProfile profile{};
  // The profile's optional memory_bandwidth, transcendentals and kernel_call: what prices a
  // trace's recorded kernel work (kernel_rates.h); all 0 when it says none.
  KernelRates kernel_rates{};
  std::string name{};         // "H200 SXM 141GB", or "simulator default"
  std::string link{};         // "nvlink", "infiniband" or "default"
  int gpus_per_node = 8;
  double memory_bytes = 0;  // device memory, 0 when unknown
  nlohmann::json file{};      // the profile as read (with its sources), null for the default
  bool assumed = false;  // the user named no hardware; this one stands in
  double datasheet_peak_flops = 0;  // the profile's peak_flops before flops_efficiency (MFU's denominator); 0 unknown
  // What a run cannot use of memory_bytes (the profile's optional "reserve"): the CUDA context and
  // the libraries' workspaces, and a fraction of the device lost to the caching allocator's
  // fragmentation. The fit verdict judges the peak against memory_bytes less both.
  double reserve_context_bytes = 0;
  double reserve_fragmentation_fraction = 0;
  std::string reserve_source{};
  double usable_bytes() const {
    return memory_bytes - reserve_context_bytes - reserve_fragmentation_fraction * memory_bytes;
  }
};

// The simulator's built-in HardwareProfile, labelled as such.
HardwareChoice default_hardware();
// `name_or_path`: a .json file, or a name in traces/hardware/ ("h100", "h200", "a100").
// InputError naming the file and JSON path for anything missing or out of range.
HardwareChoice load_hardware(const std::string& name_or_path, int world);
// ZeRO++ hpZ keeps its secondary shards in blocks of `hpz_group_size` consecutive ranks so that
// backward's all-gathers stay on NVLink: a block spanning nodes (the size exceeds gpus_per_node or
// does not divide it, in a world larger than a node) defeats that, so it is an InputError naming `source`'s key, the value, the
// world size and gpus per node. HSDP blocks spanning nodes stay legal (priced on the network).
void check_hpz_within_nodes(int hpz_group_size, int world, const HardwareChoice& hardware, const std::string& source);
HardwareChoice hardware_from_json(const nlohmann::json& json, const std::string& source, int world);

}  // namespace zero3
