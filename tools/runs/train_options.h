// The options of `zero3 train` (and of commands that train, like demo): flags, their defaults,
// the resolved TrainConfig, and the one-line replay command every run prints.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/tensor/device.h"

#include "core/models/model_zoo.h"
#include "core/training/train_config.h"

namespace zero3 {

struct TrainOptions {
  std::string backend = "ref";  // ref | sim | mpi | cuda
  std::string device = "cpu";   // cpu | opaque (ref and sim backends)
  std::string model = "gpt-tiny";
  int64_t steps = 50;
  uint64_t seed = 1;
  int ranks = 1;
  std::optional<int> zero_stage;           // overrides the config's zero_optimization.stage
  std::string config_path;                 // DeepSpeed-style JSON
  // Override activation_checkpointing.zero3_modules (comma-separated types or dotted names).
  std::optional<std::string> checkpoint_activations;
  std::optional<std::string> offload_optimizer;  // "none" | "cpu": zero_optimization.offload_optimizer.device
  std::optional<std::string> offload_param;      // "none" | "cpu": zero_optimization.offload_param.device
  std::optional<int> shard_group;  // HSDP block size: zero_optimization.mics_shard_size
  std::optional<int> hpz_group;    // hpZ block size: zero_optimization.zero_hpz_partition_size
  std::optional<int64_t> micro_batch_size;
  std::optional<int64_t> gradient_accumulation_steps;
  std::optional<double> lr;
  bool bf16 = false;
  std::string data_file;
  std::string init_from;             // safetensors weights to start from (core/models/weight_names.h)
  std::string init_names = "zero3";  // their names: zero3 or hf-gpt2
  std::string report_path;
  std::string record_path;
  std::string faults;
  int64_t log_every = 1;
  bool check = false;  // sim + ZeRO-3: also run the DDP and single-process references and compare
  // Programmatic callers (demo) start from this instead of the built-in defaults; no flag sets it.
  std::optional<TrainConfig> base_config;
  std::string save_checkpoint;     // directory (core/training/checkpoint.h)
  std::optional<int64_t> save_at;  // optimizer steps taken when saving; default: after the last
  int64_t save_every = 0;          // > 0: a checkpoint series (core/training/checkpoint_series.h)
  int64_t keep_last = 0;           // with save_every: the newest this many stay; 0 keeps all
  std::string load_checkpoint;     // resume from this directory; --steps counts from the start
  double collective_timeout_s = 600.0;  // mpi, cuda: a collective waited on longer fails the run (exit 3)
  std::optional<int> gpus;              // cuda without a launcher: how many local GPUs (default all)
};

void add_train_options(CLI::App& command, TrainOptions& options);
// --device cpu|opaque, for the commands that run simulated ranks or the reference (train, bench
// step, fuzz), and its parse: an InputError for anything else.
void add_simulated_device_option(CLI::App& command, std::string& device);
Device simulated_device(const std::string& text);
// The config file (if any) with the command-line overrides applied; warnings for unused keys.
TrainConfig resolve_train_config(const TrainOptions& options, std::vector<std::string>* warnings);
// The group sizes against --ranks where the world is known before the ranks start (sim): InputError.
void check_hierarchical_sharding(const TrainOptions& options, const TrainConfig& config);
// The banner's lines for the memory levers in use (checkpointed modules, offload), "" for none.
std::string lever_lines(const TrainConfig& config, const BuiltModel& built);
// `zero3 train ...` reproducing this run exactly.
std::string replay_command(const TrainOptions& options);
// The device --device names; an InputError when the backend cannot run on it.
Device train_device(const TrainOptions& options);

}  // namespace zero3
