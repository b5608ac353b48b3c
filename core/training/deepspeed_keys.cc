// DeepSpeed's config keys that zero3 does not read, and the advice built from them.
#include "core/training/deepspeed_keys.h"

#include <algorithm>
#include <cctype>
#include <utility>

namespace zero3 {

namespace {

using enum KeySupport;

// What zero3 does instead, where several keys share the answer.
constexpr std::string_view kStagesOneAndTwo =
    "stages 1 and 2 reduce in reduce_bucket_size buckets and all-gather parameters once after the step";
constexpr std::string_view kOffloadTuning = "offload's copies are counted per step, not pinned, buffered or pipelined";
constexpr std::string_view kNoScheduler = "no LR scheduler: every step uses optimizer.params.lr";
constexpr std::string_view kNoFp16 = "fp16 is not built; bf16 needs no loss scaling";
constexpr std::string_view kBf16Compute = "bf16.enabled gives bf16 compute with f32 master weights";
constexpr std::string_view kOwnAdamW = "zero3 runs its own AdamW, the same arithmetic on every backend";
constexpr std::string_view kMonitor = "zero3 train --report writes the losses and gradient norms as JSON";
constexpr std::string_view kOwnCheckpoints =
    "zero3 writes its own checkpoints (--save-checkpoint), loadable at any world size";
constexpr std::string_view kDataParallelOnly = "zero3 is data parallel over all ranks, nothing else";
constexpr std::string_view kGradientAveraging =
    "gradients are summed over the ranks in f32, then divided by the rank count";
constexpr std::string_view kNoExpertParallel =
    "no expert parallelism: experts are sharded like any parameter (see zero3_leaf_modules)";
constexpr std::string_view kUnquantized = "zero3 trains and communicates unquantized";
constexpr std::string_view kSaveFullWeights = "zero3 consolidate writes the full weights from a checkpoint";
constexpr std::string_view kInOrderData = "no curriculum: batches come in order from the data source";

// Read from DeepSpeed 0.19.8's source (pip package deepspeed==0.19.8):
//   runtime/config.py        DeepSpeedConfig._initialize_params (top level), _REMOVED_TOP_LEVEL_CONFIG_KEYS
//                            and _REMOVED_ZERO_CONFIG_KEYS (keys it now refuses), the optimizer and
//                            scheduler getters
//   runtime/constants.py     the top-level key names, optimizer "legacy_fusion"
//   runtime/engine.py        _configure_basic_optimizer and get_optimizer_configuration (the optimizer
//                            params DeepSpeed itself pops: adam_w_mode, torch_adam, fp32_optimizer_states,
//                            foreach, and max_grad_norm, which it refuses)
//   ops/adam/fused_adam.py   FusedAdam's other params (bias_correction, amsgrad, set_grad_none)
//   runtime/zero/config.py   DeepSpeedZeroConfig: every field under its name and its pydantic alias, as
//                            populate_by_name=True accepts both (prefetch_bucket_size = stage3_prefetch_bucket_size)
//   runtime/zero/offload_config.py  DeepSpeedZeroOffloadParamConfig, DeepSpeedZeroOffloadOptimizerConfig
//   runtime/precision_config.py     DeepSpeedBF16Config, DeepSpeedFP16Config (bf16 also under its old name bfloat16)
//   runtime/lr_schedules.py  the schedulers' constructor arguments (scheduler.params)
//   monitor/config.py, comm/config.py, profiling/config.py, autotuning/config.py, datastates/config.py,
//   utils/config.py, compile/config.py, runtime/tensor_parallel/config.py, runtime/data_pipeline/config.py,
//   runtime/swap_tensor/aio_config.py, runtime/model_checkpointing/config.py, __init__.py: their top-level keys.
// Pydantic sections refuse unknown keys (extra="forbid"); the top level ignores them.
constexpr DeepSpeedKey kUnreadKeys[] = {
    // Top level. zero3 reads train_micro_batch_size_per_gpu, gradient_accumulation_steps,
    // gradient_clipping, bf16, optimizer and zero_optimization.
    {"", "managed_gradient_accumulation", not_used, "zero3 steps once every gradient_accumulation_steps micro-steps"},
    {"", "steps_per_print", not_used, "zero3 train prints a step line every --log-every steps (default 1)"},
    {"", "dump_state", not_used, "zero3 train --report records the config zero3 resolved"},
    {"", "disable_python_gc", not_used, "zero3 runs no Python"},
    {"", "disable_allgather", not_used, "ZeRO-3 all-gathers parameters before use; DDP keeps them whole"},
    {"", "communication_data_type", not_used,
     "gradients are reduced in f32; parameters are gathered in the compute dtype"},
    {"", "seq_parallel_communication_data_type", not_used, kDataParallelOnly},
    {"", "prescale_gradients", not_used, kGradientAveraging},
    {"", "gradient_predivide_factor", not_used, kGradientAveraging},
    {"", "gradient_allreduce_op", not_used, "gradients are always averaged over the ranks (DeepSpeed's \"mean\")"},
    {"", "comms_logger", not_used, "zero3 bench comm times collectives; the sim backend's --report counts them"},
    {"", "tensorboard", not_used, kMonitor},
    {"", "wandb", not_used, kMonitor},
    {"", "csv_monitor", not_used, kMonitor},
    {"", "comet", not_used, kMonitor},
    {"", "bfloat16", not_used, "DeepSpeed's old name for bf16; zero3 reads bf16.enabled"},
    {"", "torch_autocast", not_used, kBf16Compute},
    {"", "zero_allow_untested_optimizer", not_used, "zero3 runs its own AdamW only"},
    {"", "zero_force_ds_cpu_optimizer", not_used, "no CPU optimizer: AdamW runs where each rank's shard lives"},
    {"", "scheduler", not_used, kNoScheduler},
    {"", "flops_profiler", not_used, "zero3 train's step lines show tokens/s, and MFU on GPUs whose peak is known"},
    {"", "wall_clock_breakdown", not_used, "zero3 train prints each logged step's time; --report has the mean"},
    {"", "memory_breakdown", not_used, "the sim backend's --report has each rank's peak bytes by category"},
    {"", "autotuning", not_used, "no autotuner; set the zero_optimization sizes by hand"},
    {"", "use_data_before_expert_parallelism", not_used, kNoExpertParallel},
    {"", "expert_parallel", not_used, kNoExpertParallel},
    {"", "hybrid_engine", not_used, "zero3 trains only; it has no inference engine"},
    {"", "pipeline", not_used, kDataParallelOnly},
    {"", "tensor_parallel", not_used, kDataParallelOnly},
    {"", "sequence_parallel_size", not_used, kDataParallelOnly},
    {"", "data_parallel_size", not_used, "every rank is a data-parallel rank"},
    {"", "data_efficiency", not_used, kInOrderData},
    {"", "checkpoint", not_used, kOwnCheckpoints},
    {"", "datastates_ckpt", not_used, kOwnCheckpoints},
    {"", "data_types", not_used,
     "master weights, gradient shards and AdamW moments are f32; bf16.enabled sets compute"},
    {"", "aio", not_used, "nvme offload is not built, so there is no asynchronous I/O to tune"},
    {"", "dataloader_drop_last", not_used, "zero3 has no DataLoader to configure"},
    {"", "log_level", not_used, "zero3 has no log levels"},
    {"", "weight_quantization", not_used, kUnquantized},
    {"", "compile", not_used, "zero3 runs its own kernels; there is no graph compiler"},
    {"", "timers", not_used, "zero3 train's step lines show each step's time and tokens/s"},
    {"", "vocabulary_size", not_used, "the model (--model) sets the vocabulary"},
    {"", "allgather_size", not_used, "DeepSpeed reads it only with a boolean zero_optimization; zero3 reads an object"},
    {"", "nebula", removed_by_deepspeed, kOwnCheckpoints},
    {"", "compression_training", removed_by_deepspeed, kUnquantized},
    {"", "amp", removed_by_deepspeed, kBf16Compute},
    {"", "quantize_training", removed_by_deepspeed, kUnquantized},
    {"", "sparse_gradients", removed_by_deepspeed, "gradients are reduced dense"},
    {"", "eigenvalue", removed_by_deepspeed, kUnquantized},
    {"", "sparse_attention", removed_by_deepspeed, "attention is dense"},
    {"", "elasticity", removed_by_deepspeed,
     "set the micro-batch and gradient_accumulation_steps; checkpoints load at any world size"},
    {"", "graph_harvesting", removed_by_deepspeed, "zero3 has nothing like it"},
    {"", "curriculum_learning", removed_by_deepspeed, kInOrderData},
    {"", "progressive_layer_drop", removed_by_deepspeed, "every layer runs at every step"},

    // bf16: zero3 reads enabled.
    {"/bf16", "immediate_grad_update", not_used, "gradients are accumulated into f32 shards at every micro-step"},
    {"/bf16", "check_grad_overflow", not_used, "zero3 checks no overflow and skips no step"},
    {"/bf16", "bf16_master_weights_and_grads", not_used, "master weights and gradient shards stay f32"},
    {"/bf16", "bf16_optimizer_states", not_used, "AdamW moments stay f32"},
    // runtime/constants.py still documents check_overflow, but DeepSpeedBF16Config refuses it.
    {"/bf16", "check_overflow", removed_by_deepspeed,
     "now check_grad_overflow; zero3 checks no overflow, skips no step"},

    // fp16: nothing is read (fp16 is not built).
    {"/fp16", "auto_cast", not_used, kNoFp16},
    {"/fp16", "loss_scale", not_used, kNoFp16},
    {"/fp16", "initial_scale_power", not_used, kNoFp16},
    {"/fp16", "loss_scale_window", not_used, kNoFp16},
    {"/fp16", "hysteresis", not_used, kNoFp16},
    {"/fp16", "consecutive_hysteresis", not_used, kNoFp16},
    {"/fp16", "min_loss_scale", not_used, kNoFp16},
    {"/fp16", "fp16_master_weights_and_grads", not_used, kNoFp16},

    // optimizer: zero3 reads type (AdamW or Adam) and params.
    {"/optimizer", "legacy_fusion", not_used, kOwnAdamW},
    // optimizer.params: zero3 reads lr, betas, eps and weight_decay.
    {"/optimizer/params", "adam_w_mode", not_used, "zero3's AdamW always decouples weight decay (DeepSpeed's default)"},
    {"/optimizer/params", "torch_adam", not_used, kOwnAdamW},
    {"/optimizer/params", "fp32_optimizer_states", not_used, "AdamW moments are always f32"},
    {"/optimizer/params", "foreach", not_used, kOwnAdamW},
    {"/optimizer/params", "bias_correction", not_used, "zero3's AdamW always corrects the moments' bias"},
    {"/optimizer/params", "amsgrad", not_used, "zero3's AdamW has no AMSGrad (nor has DeepSpeed's FusedAdam)"},
    {"/optimizer/params", "set_grad_none", not_used, "zero3 clears its own gradient shards"},
    {"/optimizer/params", "max_grad_norm", not_used,
     "DeepSpeed refuses it too; top-level gradient_clipping clips by global norm"},

    // scheduler: nothing is read.
    {"/scheduler", "type", not_used, kNoScheduler},
    {"/scheduler", "params", not_used, kNoScheduler},
    {"/scheduler/params", "lr_range_test_min_lr", not_used, kNoScheduler},
    {"/scheduler/params", "lr_range_test_step_size", not_used, kNoScheduler},
    {"/scheduler/params", "lr_range_test_step_rate", not_used, kNoScheduler},
    {"/scheduler/params", "lr_range_test_staircase", not_used, kNoScheduler},
    {"/scheduler/params", "cycle_min_lr", not_used, kNoScheduler},
    {"/scheduler/params", "cycle_max_lr", not_used, kNoScheduler},
    {"/scheduler/params", "decay_lr_rate", not_used, kNoScheduler},
    {"/scheduler/params", "cycle_first_step_size", not_used, kNoScheduler},
    {"/scheduler/params", "cycle_second_step_size", not_used, kNoScheduler},
    {"/scheduler/params", "cycle_first_stair_count", not_used, kNoScheduler},
    {"/scheduler/params", "cycle_second_stair_count", not_used, kNoScheduler},
    {"/scheduler/params", "decay_step_size", not_used, kNoScheduler},
    {"/scheduler/params", "cycle_momentum", not_used, kNoScheduler},
    {"/scheduler/params", "cycle_min_mom", not_used, kNoScheduler},
    {"/scheduler/params", "cycle_max_mom", not_used, kNoScheduler},
    {"/scheduler/params", "decay_mom_rate", not_used, kNoScheduler},
    {"/scheduler/params", "warmup_min_lr", not_used, kNoScheduler},
    {"/scheduler/params", "warmup_max_lr", not_used, kNoScheduler},
    {"/scheduler/params", "warmup_num_steps", not_used, kNoScheduler},
    {"/scheduler/params", "warmup_type", not_used, kNoScheduler},
    {"/scheduler/params", "warmup_min_ratio", not_used, kNoScheduler},
    {"/scheduler/params", "cos_min_ratio", not_used, kNoScheduler},
    {"/scheduler/params", "total_num_steps", not_used, kNoScheduler},
    {"/scheduler/params", "last_batch_iteration", not_used, kNoScheduler},

    // zero_optimization: zero3 reads stage, stage3_prefetch_bucket_size, stage3_max_live_parameters,
    // stage3_max_reuse_distance, stage3_param_persistence_threshold, reduce_bucket_size, overlap_comm
    // and its own zero3_placeholder_policy and zero3_leaf_modules.
    {"/zero_optimization", "contiguous_gradients", not_used, "gradients are packed into id-ordered reduce buckets"},
    {"/zero_optimization", "reduce_scatter", not_used, "ZeRO-3 always reduce-scatters gradients; DDP all-reduces them"},
    {"/zero_optimization", "use_multi_rank_bucket_allreduce", not_used, kStagesOneAndTwo},
    {"/zero_optimization", "allgather_partitions", not_used, kStagesOneAndTwo},
    {"/zero_optimization", "allgather_bucket_size", not_used, kStagesOneAndTwo},
    {"/zero_optimization", "legacy_stage1", not_used, kStagesOneAndTwo},
    {"/zero_optimization", "round_robin_gradients", not_used, kStagesOneAndTwo},
    {"/zero_optimization", "parameter_alignment", not_used, kStagesOneAndTwo},
    {"/zero_optimization", "compute_grad_norm", not_used,
     "zero3 always computes the global gradient norm (it clips by it)"},
    {"/zero_optimization", "load_from_fp32_weights", not_used,
     "zero3 checkpoints hold f32 master weights, which a resume loads"},
    {"/zero_optimization", "elastic_checkpoint", not_used, "zero3 checkpoints load at any world size"},
    {"/zero_optimization", "cpu_offload_param", not_used, "zero3 reads offload_param: {\"device\": \"cpu\"}"},
    {"/zero_optimization", "cpu_offload", not_used, "zero3 reads offload_optimizer: {\"device\": \"cpu\"}"},
    {"/zero_optimization", "cpu_offload_use_pin_memory", not_used, kOffloadTuning},
    {"/zero_optimization", "zenflow", not_used, "every parameter is updated at every step"},
    {"/zero_optimization", "sub_group_size", not_used, "AdamW steps each rank's whole shard at once"},
    {"/zero_optimization", "model_persistence_threshold", not_used,
     "zero3 bounds persistence per parameter only (stage3_param_persistence_threshold)"},
    {"/zero_optimization", "stage3_model_persistence_threshold", not_used,
     "zero3 bounds persistence per parameter only (stage3_param_persistence_threshold)"},
    {"/zero_optimization", "gather_16bit_weights_on_model_save", not_used, kSaveFullWeights},
    {"/zero_optimization", "stage3_gather_16bit_weights_on_model_save", not_used, kSaveFullWeights},
    {"/zero_optimization", "stage3_gather_fp16_weights_on_model_save", not_used, kSaveFullWeights},
    {"/zero_optimization", "module_granularity_threshold", not_used,
     "zero3_leaf_modules names modules gathered as one unit"},
    {"/zero_optimization", "stage3_module_granularity_threshold", not_used,
     "zero3_leaf_modules names modules gathered as one unit"},
    {"/zero_optimization", "use_all_reduce_for_fetch_params", not_used, "zero3 fetches parameters with all-gathers"},
    {"/zero_optimization", "stage3_use_all_reduce_for_fetch_params", not_used,
     "zero3 fetches parameters with all-gathers"},
    {"/zero_optimization", "allgather_sequential", not_used, "zero3 coalesces gathers into id-ordered buckets"},
    {"/zero_optimization", "stage3_allgather_sequential", not_used, "zero3 coalesces gathers into id-ordered buckets"},
    {"/zero_optimization", "ignore_unused_parameters", not_used, "parameters without a gradient are reduced as zeros"},
    {"/zero_optimization", "zero_quantized_weights", not_used, kUnquantized},
    {"/zero_optimization", "zero_quantized_nontrainable_weights", not_used, kUnquantized},
    {"/zero_optimization", "zero_quantized_gradients", not_used, kUnquantized},
    {"/zero_optimization", "memory_efficient_linear", not_used,
     "a module's parameters are gathered again for its backward"},
    {"/zero_optimization", "pipeline_loading_checkpoint", not_used, kDataParallelOnly},
    {"/zero_optimization", "override_module_apply", not_used, "zero3 builds its own modules; nothing to override"},
    {"/zero_optimization", "log_trace_cache_warnings", not_used,
     "a changed order drops zero3's fetch trace, counted, not logged"},
    {"/zero_optimization", "enable_sanity_checks", not_used, "zero3 checks every parameter state change, always"},
    {"/zero_optimization", "save_muon_momentum_buffer_in_memory", not_used, "zero3 runs AdamW only, no Muon"},
    {"/zero_optimization", "leaf_module", not_used, "zero3 reads zero3_leaf_modules: module types or dotted names"},
    {"/zero_optimization", "mics_hierarchical_params_gather", removed_by_deepspeed, "mics_shard_size gathers inside its block, one level"},
    {"/zero_optimization", "zeropp_loco_param", removed_by_deepspeed, kUnquantized},

    // zero_optimization.offload_optimizer and offload_param: zero3 reads "device" only.
    {"/zero_optimization/offload_optimizer", "nvme_path", not_used, "nvme offload is not built"},
    {"/zero_optimization/offload_optimizer", "buffer_count", not_used, kOffloadTuning},
    {"/zero_optimization/offload_optimizer", "pin_memory", not_used, kOffloadTuning},
    {"/zero_optimization/offload_optimizer", "pipeline_read", not_used, kOffloadTuning},
    {"/zero_optimization/offload_optimizer", "pipeline_write", not_used, kOffloadTuning},
    {"/zero_optimization/offload_optimizer", "fast_init", not_used, kOffloadTuning},
    {"/zero_optimization/offload_optimizer", "ratio", not_built_yet, "the whole optimizer state is offloaded"},
    {"/zero_optimization/offload_optimizer", "super_offload", not_used, kOffloadTuning},
    {"/zero_optimization/offload_optimizer", "cpuadam_cores_perc", not_used, kOffloadTuning},
    {"/zero_optimization/offload_param", "nvme_path", not_used, "nvme offload is not built"},
    {"/zero_optimization/offload_param", "buffer_count", not_used, kOffloadTuning},
    {"/zero_optimization/offload_param", "buffer_size", not_used, kOffloadTuning},
    {"/zero_optimization/offload_param", "max_in_cpu", not_used, kOffloadTuning},
    {"/zero_optimization/offload_param", "pin_memory", not_used, kOffloadTuning},

    // activation_checkpointing: zero3 reads its own zero3_modules (DeepSpeed's model code chooses
    // what to checkpoint by calling deepspeed.checkpointing.checkpoint).
    {"/activation_checkpointing", "partition_activations", not_built_yet,
     "each rank keeps its checkpointed outputs whole"},
    {"/activation_checkpointing", "cpu_checkpointing", not_built_yet, "checkpointed outputs stay on the device"},
    {"/activation_checkpointing", "contiguous_memory_optimization", not_used,
     "the allocator is counted, not laid out"},
    {"/activation_checkpointing", "number_checkpoints", not_used, "zero3_modules names what is checkpointed"},
    {"/activation_checkpointing", "synchronize_checkpoint_boundary", not_used,
     "ranks synchronise only in collectives"},
    {"/activation_checkpointing", "profile", not_used, "zero3 replay and bench time the recompute"},
};

const DeepSpeedKey* find_unread_key(std::string_view section, std::string_view key) {
  for (const DeepSpeedKey& entry : kUnreadKeys) {
    if (entry.section == section && entry.key == key) return &entry;
  }
  return nullptr;
}

// Whether the table lists the section's DeepSpeed keys: only then may a key be called "not a DeepSpeed key".
bool section_is_listed(std::string_view section) {
  return std::ranges::any_of(kUnreadKeys, [&](const DeepSpeedKey& entry) { return entry.section == section; });
}

// What a DeepSpeed key zero3 leaves unread is, as the predicate of a sentence about the key.
std::string_view support_phrase(KeySupport support) {
  switch (support) {
    case not_built_yet: return "is a DeepSpeed key zero3 does not implement yet";
    case not_used: return "is a DeepSpeed key zero3 does not use";
    case removed_by_deepspeed: return "was removed from DeepSpeed, and 0.19.8 refuses it; zero3 does not use it either";
  }
  return "";
}

std::string lowercase(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower;
}

// Optimal string alignment distance: Levenshtein plus the swap of two adjacent letters as one edit,
// the commonest slip in typing ("stgae"). Three rolling rows of the usual table.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> before_previous(b.size() + 1), previous(b.size() + 1), current(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitution = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitution});
      const bool swapped = i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1];
      if (swapped) current[j] = std::min(current[j], before_previous[j - 2] + 1);
    }
    std::swap(before_previous, previous);
    std::swap(previous, current);
  }
  return previous[b.size()];
}

std::vector<std::string> suggestion_candidates(const std::string& section,
                                               const std::vector<std::string>& keys_zero3_reads) {
  // The keys zero3 reads come first, so a tie goes to a key that would take effect.
  std::vector<std::string> candidates = keys_zero3_reads;
  for (const DeepSpeedKey& entry : kUnreadKeys) {
    if (entry.section == section) candidates.emplace_back(entry.key);
  }
  return candidates;
}

std::string typo_advice(const std::string& path, const std::string& section, const std::string& suggestion,
                        bool section_listed) {
  std::string advice = path + (section_listed ? " is not a DeepSpeed key" : " is not a key zero3 reads") +
                       ": did you mean " + suggestion + "?";
  // Warn now that the key they meant would not take effect either, rather than after they fix the slip.
  if (const DeepSpeedKey* meant = find_unread_key(section, suggestion)) {
    advice += " (it " + std::string(support_phrase(meant->support)) + ")";
  }
  return advice;
}

}  // namespace

std::span<const DeepSpeedKey> unread_deepspeed_keys() { return kUnreadKeys; }

bool deepspeed_refuses_unknown_keys(const std::string& section) {
  return section == "/zero_optimization" || section == "/zero_optimization/offload_optimizer" ||
         section == "/zero_optimization/offload_param" || section == "/bf16" || section == "/fp16";
}

const DeepSpeedKey* unread_deepspeed_key(const std::string& section, const std::string& key) {
  return find_unread_key(section, key);
}

std::string unused_key_advice(const std::string& section, const std::string& key,
                              const std::vector<std::string>& keys_zero3_reads) {
  const std::string path = section + "/" + key;
  if (const DeepSpeedKey* known = find_unread_key(section, key)) {
    return path + " " + std::string(support_phrase(known->support)) + ": " + std::string(known->instead);
  }
  const bool section_listed = section_is_listed(section);
  const std::string suggestion = closest_key(key, suggestion_candidates(section, keys_zero3_reads));
  if (!suggestion.empty()) return typo_advice(path, section, suggestion, section_listed);
  return path + (section_listed ? " is neither a DeepSpeed key nor one zero3 reads; ignored"
                                : " is not a key zero3 reads; ignored");
}

// A slip is one edit per five letters of the word, and at least one. That catches a swapped pair in
// "stgae" (5 letters, 1 edit), two slips in "overlap_comm" (12 letters, 2) and a word's worth of
// slips in a long key: "stage3_param_persitence_threshold" (33 letters, up to 6) or dashes for
// underscores in "train-micro-batch-size-per-gpu" (6 edits in 30). A short word gets one edit only,
// so "lr" never reaches "eps" (3 edits), nor "aio" "amp" (2). Some long keys of a section lie within
// reach of each other (stage3_param_ and stage3_model_persistence_threshold: 5 edits in 34 letters),
// which does no harm: an exact key is never called a slip, and a slip of one lands nearest to it.
// Case is ignored: JSON keys are case-sensitive, so "Stage" is a slip worth naming, and a capital
// should not use up the edit a short key is allowed.
std::string closest_key(const std::string& word, const std::vector<std::string>& candidates) {
  const size_t threshold = std::max<size_t>(1, word.size() / 5);
  const std::string lower_word = lowercase(word);
  std::string closest;
  size_t closest_distance = threshold + 1;
  for (const std::string& candidate : candidates) {
    const size_t distance = edit_distance(lower_word, lowercase(candidate));
    if (distance < closest_distance) {
      closest = candidate;
      closest_distance = distance;
    }
  }
  return closest;
}

}  // namespace zero3
