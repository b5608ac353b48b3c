// Training configuration: a DeepSpeed-style JSON config accepted as is (users bring their
// ds_config.json), plus the few zero3 options DeepSpeed does not have. Unknown keys are collected
// as warnings; invalid values raise InputError naming the file, the JSON path and the allowed range.
//
//   std::vector<std::string> warnings;
//   TrainConfig config = parse_train_config(json, "ds_config.json", &warnings);
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/nn/placeholder_policy.h"
#include "core/training/optimizer.h"

namespace zero3 {

// Where offloaded state lives: zero_optimization.offload_optimizer / offload_param "device".
// ("nvme", ZeRO-Infinity's file-backed store, is refused by the parser: it is not built.)
enum class OffloadDevice : uint8_t { none, cpu };
const char* offload_device_name(OffloadDevice device);  // "none", "cpu"

struct ZeroConfig {
  // 0 = DDP (unsharded); 1 = optimizer state sharded, gradients all-reduced; 2 = gradients
  // reduce-scattered too; 1 and 2 keep every parameter replicated, refreshed by an all-gather after
  // the step; 3 = parameters sharded as well (ZeRO-3). 1-3 are configurations of one engine.
  int stage = 3;
  int64_t prefetch_bucket_elements = 50'000'000;  // stage3_prefetch_bucket_size
  int64_t max_live_elements = 1'000'000'000;      // stage3_max_live_parameters
  int64_t max_reuse_distance = 1'000'000'000;     // stage3_max_reuse_distance
  int64_t persistence_threshold = 100'000;        // stage3_param_persistence_threshold
  int64_t reduce_bucket_elements = 500'000'000;   // reduce_bucket_size
  bool overlap_comm = true;
  PlaceholderPolicy placeholder = PlaceholderPolicy::error;  // zero3 only: "zero3_placeholder_policy"
  // zero3 only: "zero3_leaf_modules", module types or dotted names treated as leaves, as
  // DeepSpeed's set_z3_leaf_modules does: entering one gathers its whole subtree, and its
  // gradients become ready together at its post-backward, so ranks that route differently
  // inside it (MoE experts) still issue identical collectives.
  std::vector<std::string> leaf_modules;
  // ZeRO-Offload: the f32 master weights and AdamW moments (offload_optimizer, stages 1-3) or the
  // compute-dtype parameter shards (offload_param, stage 3) live in host memory; the optimizer
  // runs on the host, and every crossing is a counted host<->device copy.
  OffloadDevice offload_optimizer = OffloadDevice::none;
  OffloadDevice offload_param = OffloadDevice::none;
  // Hierarchical sharding over blocks of consecutive ranks (a node when the block is its GPUs),
  // stage 3 only, at most one of the two:
  //   shard_group_size G (mics_shard_size, --shard-group): HSDP / MiCS. Parameters, gradients and
  //     optimizer state are sharded over the G ranks of a block and replicated across the W/G
  //     blocks; gradients are reduce-scattered in the block, then all-reduced across blocks.
  //     0 (DeepSpeed's -1): one block of the whole world, flat ZeRO-3.
  //   hpz_group_size G (zero_hpz_partition_size, --hpz): ZeRO++ hpZ. Everything is sharded over
  //     the world as in flat ZeRO-3; a parameter gathered in a step also keeps a secondary shard
  //     over its block, which backward gathers from inside the block. 1 (or 0): no secondary copy.
  int shard_group_size = 0;
  int hpz_group_size = 1;
  bool hierarchical() const { return (shard_group_size > 0) || hpz_group_size > 1; }
  // At `world` ranks: the ranks a shard spans (HSDP's block where 0 < G < W, else the world), and
  // whether hpZ keeps a secondary copy (1 < G < W). A block of the whole world splits nothing.
  int shard_ranks(int world) const { return shard_group_size > 0 && shard_group_size < world ? shard_group_size : world; }
  bool keeps_secondary(int world) const { return hpz_group_size > 1 && hpz_group_size < world; }
};

// Where a setting came from: callers that have their own default for it (replay takes the trace's
// dtype and batch) apply it only when the file did not set it, and every banner says which it was.
// How errors name the checkpointed-modules setting (a config key or a flag).
inline constexpr const char* kCheckpointModulesKey = "activation_checkpointing.zero3_modules (--checkpoint-activations)";

enum class SettingOrigin : uint8_t { unset, file, file_auto };

struct TrainConfig {
  int64_t micro_batch_size = 4;            // train_micro_batch_size_per_gpu
  int64_t gradient_accumulation_steps = 1;
  float gradient_clipping = 1.0f;          // max global norm; 0 turns clipping off
  bool bf16 = false;                       // bf16.enabled: bf16 compute, f32 master weights
  AdamWHyper adamw{.lr = 3e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.0f};
  ZeroConfig zero;
  // activation_checkpointing.zero3_modules (or --checkpoint-activations): module types or dotted
  // names, as zero3_leaf_modules takes them, whose forward keeps only its inputs and output;
  // backward runs it again (gathering its parameters again under stage 3) before its backward.
  std::vector<std::string> checkpoint_modules;
  // train_batch_size: 0 when the file does not give it (or gives "auto"); else DeepSpeed's global
  // batch, which must equal micro-batch x gradient_accumulation_steps x world (check_batch_sizes).
  int64_t train_batch_size = 0;
  SettingOrigin micro_batch_origin = SettingOrigin::unset;
  SettingOrigin gas_origin = SettingOrigin::unset;
  SettingOrigin precision_origin = SettingOrigin::unset;  // bf16.enabled / fp16.enabled
  std::vector<std::string> auto_keys;  // JSON paths the file gave as "auto", resolved by the caller
  // DeepSpeed keys of the file that zero3 does not use, as JSON paths (one grouped warning says them).
  std::vector<std::string> ignored_deepspeed_keys;
};

// Parses a DeepSpeed-style config. `source` names the file in errors. Keys zero3 does not use are
// appended to `warnings` with their JSON path.
TrainConfig parse_train_config(const nlohmann::json& json, const std::string& source,
                               std::vector<std::string>* warnings);
// Reads and parses a config file; InputError if it cannot be read or is not JSON.
TrainConfig load_train_config(const std::string& path, std::vector<std::string>* warnings);
nlohmann::json train_config_to_json(const TrainConfig& config);
// The combinations DeepSpeed refuses, checked once the flags are applied: offload_param below
// stage 3, offload_optimizer at stage 0. InputError naming `source`, the key and why. Not part of
// the parse: a flag (--zero) may still change the stage.
void check_lever_combinations(const TrainConfig& config, const std::string& source);
// The group sizes against the world: each must divide `world` (so every block has G ranks) and
// needs stage 3; at most one of the two. InputError naming `source`, the key and the world size.
void check_group_sizes(const TrainConfig& config, int world, const std::string& source);
// The levers' flags, as train and replay both take them (--zero, --checkpoint-activations a,b,
// --offload-optimizer none|cpu, --offload-param none|cpu); an unset one leaves the config's value.
struct LeverFlags {
  std::optional<int> zero_stage;
  std::optional<std::string> checkpoint_activations;
  std::optional<std::string> offload_optimizer;
  std::optional<std::string> offload_param;
  std::optional<int> shard_group;  // --shard-group G: zero_optimization.mics_shard_size
  std::optional<int> hpz_group;    // --hpz G: zero_optimization.zero_hpz_partition_size
};
// Applies them, then check_lever_combinations naming `config_path` (or the flags alone).
void apply_lever_flags(const LeverFlags& flags, const std::string& config_path, TrainConfig& config);
// The keys zero3 reads in a section of the config ("" the top level, "/zero_optimization",
// "/optimizer", "/optimizer/params", "/bf16", "/fp16"); empty for any other.
const std::vector<std::string>& keys_zero3_reads(const std::string& section);
// train_batch_size as DeepSpeed reads it, once the world is known: where the file gives it and not
// the micro-batch or the accumulation steps (nor a flag), they are derived from it as DeepSpeed
// derives them; then it must equal micro-batch x gradient_accumulation_steps x world, which
// DeepSpeed asserts. InputError naming `source`, the key and the three factors.
void check_batch_sizes(TrainConfig& config, int world, const std::string& source);
// "auto" of the three bucket sizes as Hugging Face Trainer fills them from the model's hidden size
// h: reduce_bucket_size h^2, stage3_prefetch_bucket_size 0.9 h^2, stage3_param_persistence_threshold
// 10 h (transformers' DeepSpeed integration). Leaves the values the file gave as numbers; returns
// whether any "auto" was filled.
bool resolve_auto_from_hidden_size(TrainConfig& config, int64_t hidden_size);
// What each "auto" of the file became, from the final config: "train_micro_batch_size_per_gpu=8,
// bf16.enabled=true"; "" when the file had none.
std::string auto_resolutions(const TrainConfig& config);

}  // namespace zero3
