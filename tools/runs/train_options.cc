// `zero3 train` flags and config resolution.
#include "tools/runs/train_options.h"

#include <sstream>

#include "core/base/errors.h"
#include "sim/opaque_device.h"

namespace zero3 {

void add_simulated_device_option(CLI::App& command, std::string& device) {
  command.add_option("--device", device,
                     "where tensors live: cpu, or opaque, the simulator's stand-in for a GPU whose memory the host "
                     "may not read: a run on it proves no host touch is left, and equals cpu bit for bit")
      ->check(CLI::IsMember({"cpu", "opaque"}))
      ->capture_default_str();
}

Device simulated_device(const std::string& text) {
  Device device = Device::cpu;
  if (!parse_device(text, &device) || !is_simulated_device(device)) {
    throw InputError("--device " + text + ": expected cpu or opaque");
  }
  return device;
}

void add_train_options(CLI::App& command, TrainOptions& options) {
  command.add_option("--backend", options.backend,
                     "ref: single-process reference; sim: simulated ranks in one process; mpi: one process per rank "
                     "under `mpirun -np W` or `srun -n W` (bitwise the sim's result); cuda: GPUs")
      ->check(CLI::IsMember({"ref", "sim", "mpi", "cuda"}))
      ->capture_default_str();
  add_simulated_device_option(command, options.device);
  command.add_option("--gpus", options.gpus,
                     "cuda: train on this many local GPUs from one process, one thread each (default: every "
                     "visible GPU); under torchrun, srun or mpirun each process takes GPU LOCAL_RANK instead")
      ->check(CLI::Range(1, 1 << 10));
  command.add_option("--model", options.model, "a built-in model name (see `zero3 inspect --list`) or a JSON spec file")
      ->capture_default_str();
  command.add_option("--steps", options.steps, "optimizer steps")->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->capture_default_str();
  command.add_option("--seed", options.seed, "seeds initialisation, data, schedule and faults")->capture_default_str();
  command.add_option("--ranks", options.ranks,
                     "world size (ref: the global batch covers this many ranks' data; mpi: the launcher's, which "
                     "--ranks may only repeat)")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  command.add_option("--zero", options.zero_stage,
                     "0: DDP (unsharded); 1: optimizer state sharded; 2: gradients too; 3: parameters too (ZeRO-3); "
                     "overrides the config")
      ->check(CLI::Range(0, 3));
  command.add_option("--config", options.config_path, "DeepSpeed-style ds_config.json")->check(CLI::ExistingFile);
  command.add_option("--checkpoint-activations", options.checkpoint_activations,
                     "module types or dotted names, comma-separated (e.g. block): their forward keeps only inputs and "
                     "output, backward runs it again (re-gathering its parameters under ZeRO-3); same bits, less "
                     "activation memory; overrides activation_checkpointing.zero3_modules");
  command.add_option("--offload-optimizer", options.offload_optimizer,
                     "cpu: f32 master weights and AdamW moments in host memory, the step on the host (ZeRO-Offload; "
                     "stages 1-3); overrides zero_optimization.offload_optimizer.device")
      ->check(CLI::IsMember({"none", "cpu"}));
  command.add_option("--offload-param", options.offload_param,
                     "cpu: parameter shards in host memory, copied up for each gather (stage 3); overrides "
                     "zero_optimization.offload_param.device")
      ->check(CLI::IsMember({"none", "cpu"}));
  command.add_option("--shard-group", options.shard_group,
                     "HSDP: shard over blocks of G consecutive ranks and replicate across the W/G blocks (gradients "
                     "reduce-scattered in the block, all-reduced across blocks; stage 3, G divides --ranks); "
                     "overrides zero_optimization.mics_shard_size")
      ->check(CLI::Range(1, 1 << 16));
  command.add_option("--hpz", options.hpz_group,
                     "ZeRO++ hpZ: shard over all ranks and keep a secondary copy over blocks of G ranks that "
                     "backward gathers from (stage 3, G divides --ranks); overrides "
                     "zero_optimization.zero_hpz_partition_size")
      ->check(CLI::Range(1, 1 << 16));
  command.add_option("--micro-batch", options.micro_batch_size, "examples per rank per micro-step")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  command.add_option("--gas", options.gradient_accumulation_steps, "gradient accumulation steps")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  command.add_option("--lr", options.lr, "AdamW learning rate")->check(CLI::Range(0.0, 10.0));
  command.add_flag("--bf16", options.bf16, "bf16 compute with f32 master weights");
  command.add_option("--data", options.data_file, "train a GPT on this file's bytes instead of synthetic data")
      ->check(CLI::ExistingFile);
  command.add_option("--init-from", options.init_from,
                     "start from these weights (safetensors, f32 or bf16) instead of the seeded ones; every "
                     "parameter's name and shape is checked")
      ->check(CLI::ExistingFile);
  command.add_option("--names", options.init_names,
                     "names in the --init-from file: zero3, or hf-gpt2 (gpt models: Hugging Face GPT-2's names and "
                     "Conv1D layouts, the head tied to transformer.wte.weight)")
      ->check(CLI::IsMember({"zero3", "hf-gpt2"}))
      ->capture_default_str();
  command.add_option("--report", options.report_path,
                     "write a JSON summary here (atomically); a failed run writes one too, with status, "
                     "exit_code and failure {class, kind, message}");
  command.add_option("--record", options.record_path, "write a trace of the run here (traces/FORMAT.md; sim backend)");
  command.add_option("--faults", options.faults,
                     "sim fault kinds: late,reorder,stall,crash,alloc or all, each optionally aimed at one site "
                     "class (crash@checkpoint, alloc@offload); mpi: crash only (a seeded rank SIGKILLs itself at a "
                     "seeded collective or checkpoint write)");
  command.add_option("--collective-timeout", options.collective_timeout_s,
                     "mpi, cuda: seconds a rank waits for one collective before it fails the job with exit 3, "
                     "naming the collective")
      ->check(CLI::Range(0.001, 1e7))
      ->capture_default_str();
  command.add_flag("--check", options.check,
                   "sim, ZeRO-3: also train the DDP reference on the same ranks and data and require bitwise "
                   "equality (exit 2 otherwise); both stages: print the max difference to the single-process "
                   "reference");
  command.add_option("--log-every", options.log_every, "print a step line every N steps")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->capture_default_str();
  CLI::Option* save = command.add_option("--save-checkpoint", options.save_checkpoint,
                                         "write a checkpoint to this directory (sim: one shard file per rank)");
  CLI::Option* save_at =
      command.add_option("--save-at", options.save_at, "save after this many optimizer steps (default: after the last)")
          ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
          ->needs(save);
  CLI::Option* save_every =
      command
          .add_option("--save-every", options.save_every,
                      "save after every N optimizer steps and after the last, each into DIR/step_NNNNNNNN with "
                      "DIR/latest naming the newest (--load-checkpoint DIR reads it), as DeepSpeed's save_checkpoint")
          ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
          ->needs(save)
          ->excludes(save_at);
  command.add_option("--keep-last", options.keep_last, "with --save-every: keep only the newest K checkpoints")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->needs(save_every);
  command.add_option("--load-checkpoint", options.load_checkpoint,
                     "resume from this checkpoint directory, saved at any world size; --steps counts from the start "
                     "of training, so the run continues at the checkpoint's step");
}

TrainConfig resolve_train_config(const TrainOptions& options, std::vector<std::string>* warnings) {
  TrainConfig config = options.base_config.value_or(TrainConfig{});
  if (!options.config_path.empty()) config = load_train_config(options.config_path, warnings);
  if (options.micro_batch_size) config.micro_batch_size = *options.micro_batch_size;
  if (options.gradient_accumulation_steps) config.gradient_accumulation_steps = *options.gradient_accumulation_steps;
  if (options.lr) config.adamw.lr = static_cast<float>(*options.lr);
  if (options.bf16) config.bf16 = true;
  apply_lever_flags({.zero_stage = options.zero_stage, .checkpoint_activations = options.checkpoint_activations,
                     .offload_optimizer = options.offload_optimizer, .offload_param = options.offload_param,
                     .shard_group = options.shard_group, .hpz_group = options.hpz_group},
                    options.config_path, config);
  return config;
}

Device train_device(const TrainOptions& options) {
  const Device device = simulated_device(options.device);
  if (device != Device::cpu && options.backend == "cuda") {
    throw InputError("--device " + options.device + " is for the ref, sim and mpi backends; --backend cuda runs on GPUs");
  }
  // Flags a backend would otherwise ignore are refused: a run never silently drops what was asked.
  if (!options.record_path.empty() && options.backend != "sim") {
    throw InputError("--record records the simulator's events: it needs --backend sim, not " + options.backend);
  }
  if (options.gpus && options.backend != "cuda") {
    throw InputError("--gpus picks GPUs for --backend cuda, not for --backend " + options.backend);
  }
  if (!options.faults.empty() && options.backend != "sim" && options.backend != "mpi") {
    throw InputError("--faults are injected by the simulator (and crash by the mpi backend), not by --backend " +
                     options.backend);
  }
  return device;
}

void check_hierarchical_sharding(const TrainOptions& options, const TrainConfig& config) {
  // Under a launcher the world is the launcher's: the engine checks it there, as every rank starts.
  if (options.backend != "sim") return;
  check_group_sizes(config, options.ranks,
                    options.config_path.empty() ? std::string("the flags") : options.config_path + " with the flags");
}

std::string lever_lines(const TrainConfig& config, const BuiltModel& built) {
  std::string out;
  const std::vector<std::string> checkpointed = checkpointed_names(built, config.checkpoint_modules);
  if (!checkpointed.empty()) {
    std::string names;
    for (const std::string& name : checkpointed) names += (names.empty() ? "" : ",") + name;
    const size_t modules = select_modules(*built.model, checkpointed, kCheckpointModulesKey).size();
    out += "  activation checkpointing: " + names + " (" + std::to_string(modules) +
           " modules; backward runs their forward again)\n";
  }
  if (config.zero.offload_optimizer != OffloadDevice::none || config.zero.offload_param != OffloadDevice::none) {
    out += std::string("  offload: optimizer state ") + offload_device_name(config.zero.offload_optimizer) +
           ", parameter shards " + offload_device_name(config.zero.offload_param) +
           " (host memory; copies counted per step)\n";
  }
  if (config.zero.shard_group_size > 0) {
    out += "  HSDP: sharded over blocks of " + std::to_string(config.zero.shard_group_size) +
           " ranks, replicated across blocks (gradients reduce-scattered in the block, all-reduced across)\n";
  }
  if (config.zero.hpz_group_size > 1) {
    out += "  hpZ: sharded over the world, a secondary copy over blocks of " + std::to_string(config.zero.hpz_group_size) +
           " ranks that backward gathers from\n";
  }
  return out;
}

std::string replay_command(const TrainOptions& options) {
  std::ostringstream command;
  // Under MPI the world size is the launcher's.
  if (options.backend == "mpi") command << "mpirun -np " << options.ranks << " ";
  command << "zero3 train --backend " << options.backend << " --model " << options.model << " --steps "
          << options.steps << " --seed " << options.seed;
  if (options.backend != "mpi") command << " --ranks " << options.ranks;
  if (options.gpus) command << " --gpus " << *options.gpus;
  if (options.device != "cpu") command << " --device " << options.device;
  if (options.zero_stage) command << " --zero " << *options.zero_stage;
  if (!options.config_path.empty()) command << " --config " << options.config_path;
  if (options.checkpoint_activations) command << " --checkpoint-activations " << *options.checkpoint_activations;
  if (options.offload_optimizer) command << " --offload-optimizer " << *options.offload_optimizer;
  if (options.offload_param) command << " --offload-param " << *options.offload_param;
  if (options.shard_group) command << " --shard-group " << *options.shard_group;
  if (options.hpz_group) command << " --hpz " << *options.hpz_group;
  if (options.micro_batch_size) command << " --micro-batch " << *options.micro_batch_size;
  if (options.gradient_accumulation_steps) command << " --gas " << *options.gradient_accumulation_steps;
  if (options.lr) command << " --lr " << *options.lr;
  if (options.bf16) command << " --bf16";
  if (!options.data_file.empty()) command << " --data " << options.data_file;
  if (!options.init_from.empty()) command << " --init-from " << options.init_from;
  if (options.init_names != "zero3") command << " --names " << options.init_names;
  if (!options.faults.empty()) command << " --faults " << options.faults;
  if (options.check) command << " --check";
  if (!options.load_checkpoint.empty()) command << " --load-checkpoint " << options.load_checkpoint;
  if (!options.save_checkpoint.empty()) command << " --save-checkpoint " << options.save_checkpoint;
  if (options.save_at) command << " --save-at " << *options.save_at;
  if (options.save_every > 0) command << " --save-every " << options.save_every;
  if (options.keep_last > 0) command << " --keep-last " << options.keep_last;
  if ((options.backend == "mpi" || options.backend == "cuda") && options.collective_timeout_s != 600.0) {
    command << " --collective-timeout " << options.collective_timeout_s;
  }
  return command.str();
}

}  // namespace zero3
