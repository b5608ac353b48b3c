// Reading hardware profile files and choosing the link a collective of W ranks runs over, and the
// intra-node link of groups inside a node.
#include "traces/replay/hardware_catalog.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "core/base/text.h"
#include "core/base/errors.h"
#include "core/base/json_reader.h"

namespace zero3 {

HardwareChoice default_hardware() {
  HardwareChoice choice;
  choice.name = "simulator default";
  choice.link = "default";
  choice.file = nullptr;
  return choice;
}

// The rates that price a trace's recorded kernel work (kernel_rates.h): each an object with its
// figure and the `source` that says how it was measured.
void read_kernel_rates(const JsonReader& root, KernelRates& rates) {
  const auto rate = [&](const char* key, const char* figure, double min, double max) {
    const JsonReader node = root.at(key);
    node.expect_only_keys({figure, "source"});
    node.at("source").as_string();
    return node.at(figure).as_number(min, max);
  };
  if (root.has("memory_bandwidth")) rates.memory_bytes_per_s = rate("memory_bandwidth", "bytes_per_s", 1e6, 1e15);
  if (root.has("transcendentals")) rates.transcendentals_per_s = rate("transcendentals", "per_s", 1e3, 1e15);
  if (root.has("kernel_call")) rates.call_s = rate("kernel_call", "seconds", 0.0, 1.0);
  if (root.has("optimizer_passes")) {
    rates.optimizer_passes_bytes_per_s = rate("optimizer_passes", "bytes_per_s", 1e6, 1e15);
  }
  if ((root.has("transcendentals") || root.has("kernel_call")) && !root.has("memory_bandwidth")) {
    root.fail("\"memory_bandwidth\" with \"transcendentals\" and \"kernel_call\": they price recorded kernel work "
              "only together with it");
  }
}

HardwareChoice hardware_from_json(const nlohmann::json& json, const std::string& source, int world) {
  const JsonReader root(json, source);
  root.expect_only_keys({"name", "source", "notes", "peak_flops", "flops_efficiency", "memory_bytes", "gpus_per_node",
                         "nvlink", "infiniband", "host_link", "host_optimizer", "optimizer", "reserve", "measured",
                         "memory_bandwidth", "transcendentals", "kernel_call", "optimizer_passes"});
  HardwareChoice choice;
  choice.name = root.at("name").as_string();
  root.at("source").as_string();  // required: every number says where it comes from
  choice.file = json;
  choice.gpus_per_node = static_cast<int>(root.at("gpus_per_node").as_int(1, 1024));
  choice.memory_bytes = root.at("memory_bytes").as_number(0.0, 1e15);
  const double efficiency = root.at("flops_efficiency").as_number(0.01, 1.0);
  choice.datasheet_peak_flops = root.at("peak_flops").as_number(1e9, 1e18);
  choice.profile.peak_flops = choice.datasheet_peak_flops * efficiency;
  if (root.has("reserve")) {
    const JsonReader reserve = root.at("reserve");
    reserve.expect_only_keys({"context_bytes", "fragmentation_fraction", "source"});
    choice.reserve_source = reserve.at("source").as_string();
    choice.reserve_context_bytes = reserve.at("context_bytes").as_number(0.0, choice.memory_bytes);
    choice.reserve_fragmentation_fraction = reserve.at("fragmentation_fraction").as_number(0.0, 0.5);
  }
  // A ring of W ranks within one node uses NVLink; across nodes the network link bounds it.
  choice.link = world <= choice.gpus_per_node ? "nvlink" : "infiniband";
  const JsonReader link = root.at(choice.link);
  link.expect_only_keys({"bytes_per_s", "latency_s", "source"});
  choice.profile.bandwidth_bytes_per_s = link.at("bytes_per_s").as_number(1e6, 1e15);
  choice.profile.latency_s = link.at("latency_s").as_number(1e-9, 1.0);
  // The second level: process groups whose ranks all lie in one node run over NVLink whatever the
  // world's link is (hardware_profile.h). NVLink is required only where it is the world's link, so
  // a profile without it prices groups on the world's link.
  choice.profile.intra_node_bandwidth_bytes_per_s = choice.profile.bandwidth_bytes_per_s;
  choice.profile.intra_node_latency_s = choice.profile.latency_s;
  if (root.has("nvlink")) {
    const JsonReader nvlink = root.at("nvlink");
    nvlink.expect_only_keys({"bytes_per_s", "latency_s", "source"});
    choice.profile.intra_node_bandwidth_bytes_per_s = nvlink.at("bytes_per_s").as_number(1e6, 1e15);
    choice.profile.intra_node_latency_s = nvlink.at("latency_s").as_number(1e-9, 1.0);
  }
  choice.profile.ranks_per_node = choice.gpus_per_node;
  // ZeRO-Offload's host side; a profile without them keeps the simulator's defaults.
  if (root.has("host_link")) {
    const JsonReader host_link = root.at("host_link");
    host_link.expect_only_keys({"bytes_per_s", "source"});
    host_link.at("source").as_string();
    choice.profile.host_link_bytes_per_s = host_link.at("bytes_per_s").as_number(1e6, 1e15);
  }
  if (root.has("host_optimizer")) {
    const JsonReader host_optimizer = root.at("host_optimizer");
    host_optimizer.expect_only_keys({"elements_per_s", "source"});
    host_optimizer.at("source").as_string();
    choice.profile.host_optimizer_elements_per_s = host_optimizer.at("elements_per_s").as_number(1e3, 1e15);
  }
  // AdamW on the device: priced in the optimizer step when given (a CPU "device" measured by
  // zero3 bench calibrate); the GPU profiles leave it out, the step's milliseconds unpriced.
  if (root.has("optimizer")) {
    const JsonReader optimizer = root.at("optimizer");
    optimizer.expect_only_keys({"elements_per_s", "source"});
    optimizer.at("source").as_string();
    choice.profile.optimizer_elements_per_s = optimizer.at("elements_per_s").as_number(1e3, 1e15);
  }
  read_kernel_rates(root, choice.kernel_rates);
  return choice;
}

void check_hpz_within_nodes(int hpz_group_size, int world, const HardwareChoice& hardware, const std::string& source) {
  const int per_node = hardware.gpus_per_node;
  // A world within one node has no block that spans nodes, whatever the block's size.
  if (hpz_group_size <= 1 || world <= per_node) return;
  if (hpz_group_size <= per_node && per_node % hpz_group_size == 0) return;
  throw InputError(source + ": /zero_optimization/zero_hpz_partition_size = " + std::to_string(hpz_group_size) +
                   " at the world size " + std::to_string(world) + " on " + hardware.name + " with gpus_per_node " +
                   std::to_string(per_node) + ": hpZ's secondary block would span nodes; ZeRO++ keeps the secondary "
                   "copy so that backward's all-gathers run inside a node over NVLink, so the size must divide "
                   "gpus_per_node (use --shard-group for HSDP blocks that span nodes)");
}

HardwareChoice load_hardware(const std::string& name_or_path, int world) {
  std::string path = name_or_path;
  if (!std::filesystem::exists(path)) {
    const std::filesystem::path catalog = std::filesystem::path(ZERO3_TRACES_DIR) / "hardware" / (name_or_path + ".json");
    if (!std::filesystem::exists(catalog)) {
      std::vector<std::string> names;
      if (std::filesystem::is_directory(catalog.parent_path())) {
        for (const auto& entry : std::filesystem::directory_iterator(catalog.parent_path())) {
          names.push_back(entry.path().stem().string());
        }
      }
      std::sort(names.begin(), names.end());  // directory order is the file system's, not ours
      const std::string known = join_words(names);
      throw InputError("hardware profile '" + name_or_path + "': no such file, and not a profile in " +
                       catalog.parent_path().string() + " (" + (known.empty() ? "none found" : known) + ")");
    }
    path = catalog.string();
  }
  return hardware_from_json(read_json_file(path), path, world);
}

}  // namespace zero3
