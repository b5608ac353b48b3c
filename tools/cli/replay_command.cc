// `zero3 replay TRACE`: shape replay of a trace through the ZeRO-3 engine (memory, communication,
// predicted step time, checks, timelines) or functional replay of a fuzzer counterexample.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>

#include "core/base/atomic_file.h"
#include "core/base/errors.h"
#include "core/base/json_reader.h"
#include "props/fuzzer.h"
#include "tools/cli/commands.h"
#include "tools/runs/progress.h"
#include "traces/replay/fit_advice.h"
#include "traces/replay/functional_replay.h"
#include "traces/replay/hardware_catalog.h"
#include "traces/replay/replay.h"
#include "traces/replay/replay_report.h"
#include "traces/replay/timeline.h"
#include "traces/format/trace_scaling.h"

namespace zero3 {

namespace {

struct ReplayFlags {
  std::string trace_path;
  int ranks = 0;
  std::string config_path;
  std::string hardware;
  std::string timeline_path;
  std::string svg_path;
  std::string report_path;
  std::string mode = "auto";
  bool full_simulation = false;
  bool no_fit_advice = false;
  int64_t micro_batch = 0;  // 0: the config's, else the trace's
  int64_t seq_len = 0;      // 0: the trace's
  int64_t gas = 0;          // 0: the config's, else the trace's
  LeverFlags levers;  // over the config's, as train's flags of the same names
};

// The levers' flags over the config, checked together as DeepSpeed would, and said on one line.
void apply_levers(const ReplayFlags& flags, TrainConfig& config) {
  apply_lever_flags(flags.levers, flags.config_path, config);
  std::string checkpointed;
  for (const std::string& name : config.checkpoint_modules) checkpointed += (checkpointed.empty() ? "" : ",") + name;
  std::printf("levers: ZeRO stage %d; activation checkpointing %s; offload optimizer %s, parameters %s\n",
              config.zero.stage, checkpointed.empty() ? "off" : checkpointed.c_str(),
              offload_device_name(config.zero.offload_optimizer), offload_device_name(config.zero.offload_param));
  if (config.zero.shard_group_size > 0) std::printf("  HSDP: shard blocks of %d ranks\n", config.zero.shard_group_size);
  if (config.zero.hpz_group_size > 1) std::printf("  hpZ: secondary blocks of %d ranks\n", config.zero.hpz_group_size);
}

// The config: --config, else the one the trace was recorded with, else defaults in the trace's dtype.
TrainConfig replay_config(const ReplayFlags& flags, const Trace& trace) {
  std::vector<std::string> warnings;
  TrainConfig config;
  if (!flags.config_path.empty()) {
    config = load_train_config(flags.config_path, &warnings);
    std::printf("config: %s\n", flags.config_path.c_str());
  } else if (trace.run) {
    config = parse_train_config(trace.run->config, flags.trace_path + " /run/config", &warnings);
    std::printf("config: the trace's run section%s\n", config.zero.stage == 3 ? "" : " (recorded with DDP; replayed as ZeRO-3)");
    config.zero.stage = 3;
  } else {
    config.bf16 = trace.dtype == "bf16";
    std::printf("config: defaults, %s from the trace's dtype (pass --config ds_config.json to change)\n",
                config.bf16 ? "bf16" : "f32");
  }
  for (const std::string& warning : warnings) std::fprintf(stderr, "warning: %s\n", warning.c_str());
  return config;
}

// Where the replayed config came from, for an error about it: --config, else the trace's own run
// section (replay_config reads it then), else only the flags.
std::string config_source(const ReplayFlags& flags, const Trace& trace) {
  if (!flags.config_path.empty()) return flags.config_path + " with the flags";
  if (trace.run) return flags.trace_path + " at /run/config with the flags";
  return "the flags";
}

// The config as DeepSpeed and Hugging Face Trainer read it, before the run is chosen: "auto" bucket
// sizes from the model's hidden size, and train_batch_size against the micro-batch, accumulation
// and world (the flags count as given, as a launcher's arguments would).
void resolve_as_deepspeed_does(const ReplayFlags& flags, const Trace& trace, int world, TrainConfig& config) {
  const int64_t hidden = trace_hidden_size(trace);
  const bool bucket_auto = std::any_of(config.auto_keys.begin(), config.auto_keys.end(), [](const std::string& path) {
    return path.rfind("/zero_optimization/", 0) == 0;
  });
  if (bucket_auto && !resolve_auto_from_hidden_size(config, hidden)) {
    std::printf("config: \"auto\" bucket sizes keep DeepSpeed's defaults: the trace does not say the model's hidden "
                "size (its \"hidden_size\", or an Embedding's width), which Hugging Face Trainer fills them from\n");
  }
  if (config.train_batch_size <= 0) return;
  if (flags.micro_batch > 0) {
    config.micro_batch_size = flags.micro_batch;
    config.micro_batch_origin = SettingOrigin::file;
  }
  if (flags.gas > 0) {
    config.gradient_accumulation_steps = flags.gas;
    config.gas_origin = SettingOrigin::file;
  }
  check_batch_sizes(config, world, config_source(flags, trace));
}

// One setting of the replayed run and where it came from, for the banner.
struct Chosen {
  int64_t value = 0;
  std::string origin{};
};

Chosen choose(int64_t flag, const char* flag_name, SettingOrigin origin, int64_t from_file, const char* key,
              int64_t from_trace) {
  if (flag > 0) return {flag, flag_name};
  if (origin == SettingOrigin::file) return {from_file, std::string("config ") + key};
  const std::string trace_origin = origin == SettingOrigin::file_auto ? "\"auto\": the trace's" : "the trace's";
  return {from_trace, trace_origin};
}

// The run the replay predicts: micro-batch, sequence length, accumulation and precision, each from
// a flag, else the config file, else the trace (never a default that silently differs from the
// trace), printed on one line. Returns the trace rescaled to that run (trace_scaling.h).
Trace trace_for_the_run(const ReplayFlags& flags, const Trace& trace, TrainConfig& config, int world) {
  const Chosen batch = choose(flags.micro_batch, "--micro-batch", config.micro_batch_origin, config.micro_batch_size,
                              "train_micro_batch_size_per_gpu", trace.batch);
  const Chosen seq_len = choose(flags.seq_len, "--seq-len", SettingOrigin::unset, 0, "", trace.seq_len);
  int64_t recorded_micro_steps = 1;
  for (const TraceStep& step : trace.steps) recorded_micro_steps = std::max(recorded_micro_steps, micro_steps_of(step));
  const Chosen gas = choose(flags.gas, "--gas", config.gas_origin, config.gradient_accumulation_steps,
                            "gradient_accumulation_steps", recorded_micro_steps);
  const Trace run = rescale_trace(trace, {.batch = batch.value, .seq_len = seq_len.value, .micro_steps = gas.value},
                                  flags.trace_path);
  std::string precision_origin = "config bf16.enabled";
  if (config.precision_origin != SettingOrigin::file) {
    config.bf16 = trace.dtype == "bf16";
    precision_origin = config.precision_origin == SettingOrigin::file_auto ? "\"auto\": the trace's dtype" : "the trace's dtype";
  }
  if (run.batch > 0) config.micro_batch_size = run.batch;
  config.gradient_accumulation_steps = gas.value;
  if (run.batch > 0) {
    std::printf("run: micro-batch %lld (%s) x seq_len %lld (%s) = %lld tokens per rank and micro-step",
                static_cast<long long>(run.batch), batch.origin.c_str(), static_cast<long long>(run.seq_len),
                seq_len.origin.c_str(), static_cast<long long>(run.tokens));
  } else {
    std::printf("run: %lld tokens per rank and micro-step (the trace's; it does not say its batch and seq_len)",
                static_cast<long long>(run.tokens));
  }
  std::printf("; %lld micro-step%s per step (%s); %s compute (%s)\n", static_cast<long long>(gas.value),
              gas.value == 1 ? "" : "s", gas.origin.c_str(), config.bf16 ? "bf16" : "f32", precision_origin.c_str());
  check_batch_sizes(config, world, config_source(flags, trace));
  const std::string resolved = auto_resolutions(config);
  if (!resolved.empty()) std::printf("config \"auto\" resolved: %s\n", resolved.c_str());
  return run;
}

// The fuzzer's properties, checked by the fuzzer's own code, so that a counterexample's message is
// recomputed by the function that wrote it.
std::optional<PropertyCheck> fuzz_property_checker(const std::string& property, const nlohmann::json& case_json,
                                                   const std::string& source) {
  for (const FuzzProperty& fuzz_property : fuzz_properties()) {
    if (fuzz_property.name != property) continue;
    const Verdict verdict = fuzz_property.check(case_from_file_json(case_json, source));
    return PropertyCheck{.ok = verdict.ok, .message = verdict.message};
  }
  return std::nullopt;
}

void replay_functionally(const ReplayFlags& flags, const Trace& trace) {
  std::printf("functional replay of %s: %d ranks, seed %llu, %lld steps, ZeRO-3 then the DDP reference...\n",
              flags.trace_path.c_str(), trace.run->world, static_cast<unsigned long long>(trace.run->seed),
              static_cast<long long>(trace.run->steps));
  const FunctionalOutcome outcome =
      replay_functional(trace, read_json_file(flags.trace_path), flags.trace_path, fuzz_property_checker);
  std::printf("%s\n", outcome.verdict.c_str());
  if (!outcome.event_log_hash.empty()) std::printf("event log hash %s\n", outcome.event_log_hash.c_str());
  if (!flags.report_path.empty()) {
    const nlohmann::json report = {{"zero3_replay_report", 1}, {"mode", "functional"}, {"trace", trace.name},
                                   {"property", outcome.property}, {"message", outcome.message},
                                   {"event_log_hash", outcome.event_log_hash}, {"exit_code", outcome.exit_code},
                                   {"has_expectation", outcome.has_expectation}, {"reproduced", outcome.reproduced},
                                   {"verdict", outcome.verdict}};
    write_file_atomically(flags.report_path, report.dump(2) + "\n");
  }
  if (outcome.exit_code == kExitLiveness) throw LivenessError("replayed run failed: " + outcome.message);
  if (outcome.exit_code != kExitOk) throw Zero3Error("replayed run failed: " + outcome.message, outcome.exit_code);
}

void write_outputs(const ReplayFlags& flags, const Trace& trace, const HardwareChoice& hardware,
                   const ShapeReplayResult& result, const nlohmann::json& report) {
  if (!flags.report_path.empty()) {
    write_file_atomically(flags.report_path, report.dump(2) + "\n");
    std::printf("report written to %s\n", flags.report_path.c_str());
  }
  if (flags.timeline_path.empty() && flags.svg_path.empty()) return;
  Timeline timeline = build_timeline(result, trace.name + " @ " + std::to_string(result.world) + " ranks (" +
                                                 result.simulation + " simulation)");
  // The SVG draws the device's memory as a line over the memory band; an assumed device says so there too.
  timeline.device_memory_bytes = hardware.memory_bytes;
  timeline.device_name = hardware.name + (hardware.assumed ? " (assumed)" : "");
  if (!flags.timeline_path.empty()) {
    write_file_atomically(flags.timeline_path, chrome_trace_json(timeline).dump() + "\n");
    std::printf("timeline (Chrome trace JSON: open in https://ui.perfetto.dev) written to %s\n", flags.timeline_path.c_str());
  }
  if (!flags.svg_path.empty()) {
    write_file_atomically(flags.svg_path, timeline_svg(timeline));
    std::printf("timeline (SVG) written to %s\n", flags.svg_path.c_str());
  }
}

// --hardware, else an H100 marked as assumed: every replay states whether it fits some device's
// memory, and the summary tells the user which flag makes that device their own choice.
HardwareChoice replay_hardware(const ReplayFlags& flags, int world) {
  if (!flags.hardware.empty()) return load_hardware(flags.hardware, world);
  HardwareChoice hardware = load_hardware("h100", world);
  hardware.assumed = true;
  return hardware;
}

void replay_shapes(const ReplayFlags& flags, const Trace& recorded) {
  ReplayOptions options;
  options.world = replay_world(recorded, flags.ranks);
  options.config = replay_config(flags, recorded);
  apply_levers(flags, options.config);
  check_group_sizes(options.config, options.world, config_source(flags, recorded));
  resolve_as_deepspeed_does(flags, recorded, options.world, options.config);
  const Trace trace = trace_for_the_run(flags, recorded, options.config, options.world);
  options.full_simulation = flags.full_simulation;
  const HardwareChoice hardware = replay_hardware(flags, options.world);
  check_hpz_within_nodes(options.config.zero.hpz_group_size, options.world, hardware, config_source(flags, recorded));
  options.hardware = hardware.profile;
  options.kernel_rates = hardware.kernel_rates;
  std::unique_ptr<ProgressBar> bar;  // made at the first step, when the number of steps is known
  options.on_progress = [&](int64_t done, int64_t total) {
    if (!bar) bar = std::make_unique<ProgressBar>(total, "replay");
    bar->update(done, "step " + std::to_string(done));
  };
  const ShapeReplayResult result = replay_trace(trace, options);
  if (bar) bar->finish();
  nlohmann::json report = replay_report(trace, options.config, hardware, result);
  std::fputs(replay_summary(report).c_str(), stdout);
  // What to change: the run replayed again with one thing changed at a time (fit_advice.h).
  if (!result.failure && hardware.memory_bytes > 0 && !flags.no_fit_advice) {
    const FitAdvice advice =
        advise_fit(recorded, {.batch = trace.batch, .seq_len = trace.seq_len,
                              .micro_steps = options.config.gradient_accumulation_steps},
                   options, hardware, flags.trace_path);
    std::fputs(fit_advice_lines(advice).c_str(), stdout);
    report["memory"]["advice"] = fit_advice_json(advice);
  }
  write_outputs(flags, trace, hardware, result, report);
  const int code = result.exit_code();
  if (code == kExitLiveness) throw LivenessError("replay found ranks that would hang or mix up collectives (see above)");
  if (code != kExitOk) throw Zero3Error("replay found a use of a partitioned parameter (see above)", code);
}

void replay(const ReplayFlags& flags) {
  const Trace trace = load_trace(flags.trace_path);
  const bool functional = flags.mode == "functional" ||
                          (flags.mode == "auto" && trace.run && (trace.expected || !trace.has_events()));
  if (functional) {
    if (!trace.run) throw InputError(flags.trace_path + ": --mode functional needs a trace with model_spec and run");
    replay_functionally(flags, trace);
    return;
  }
  replay_shapes(flags, trace);
}

}  // namespace

void add_replay_command(CLI::App& app) {
  auto flags = std::make_shared<ReplayFlags>();
  CLI::App* command = app.add_subcommand(
      "replay",
      "Replay a trace (traces/FORMAT.md) through the ZeRO-3 engine: per-rank memory, communication, predicted\n"
      "step time and rank-divergence checks (shape mode), or re-run a fuzzer counterexample (functional mode)\n"
      "Example: zero3 replay traces/models/gpt3-175b.json --ranks 1024 --hardware h100 --report r.json");
  command->add_option("trace", flags->trace_path, "the trace file")->required();
  command->add_option("--ranks", flags->ranks, "world size (default: the trace's recorded world, else 1)")
      ->check(CLI::Range(1, 1 << 20));
  command->add_option("--config", flags->config_path, "a DeepSpeed-style ds_config.json (default: the trace's own)");
  command->add_option("--micro-batch", flags->micro_batch,
                      "sequences per rank and micro-step: activations and flops rescaled from the trace's batch "
                      "(default: the config's train_micro_batch_size_per_gpu, else the trace's)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  command->add_option("--seq-len", flags->seq_len,
                      "tokens per sequence: activations and flops rescaled, attention's quadratic parts by its square "
                      "(default: the trace's)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  command->add_option("--gas", flags->gas,
                      "micro-steps per optimizer step (default: the config's gradient_accumulation_steps, else the trace's)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  command->add_option("--zero", flags->levers.zero_stage, "ZeRO stage 1, 2 or 3 (overrides the config)")
      ->check(CLI::Range(1, 3));
  command->add_option("--checkpoint-activations", flags->levers.checkpoint_activations,
                      "module types or dotted names, comma-separated: their activations are recomputed in backward "
                      "(overrides activation_checkpointing.zero3_modules)");
  command->add_option("--offload-optimizer", flags->levers.offload_optimizer,
                      "cpu: master weights and moments in host memory, AdamW on the host")
      ->check(CLI::IsMember({"none", "cpu"}));
  command->add_option("--offload-param", flags->levers.offload_param, "cpu: parameter shards in host memory (stage 3)")
      ->check(CLI::IsMember({"none", "cpu"}));
  command->add_option("--shard-group", flags->levers.shard_group,
                      "HSDP: shard over blocks of G consecutive ranks, replicate across blocks (stage 3; overrides "
                      "zero_optimization.mics_shard_size)")
      ->check(CLI::Range(1, 1 << 20));
  command->add_option("--hpz", flags->levers.hpz_group,
                      "ZeRO++ hpZ: a secondary copy over blocks of G ranks that backward gathers from (stage 3; "
                      "overrides zero_optimization.zero_hpz_partition_size)")
      ->check(CLI::Range(1, 1 << 20));
  command->add_option("--hardware", flags->hardware,
                      "a profile in traces/hardware (h100, h200, a100) or a JSON file (default: h100, marked as assumed)");
  command->add_option("--timeline", flags->timeline_path, "write a Chrome trace JSON timeline here");
  command->add_option("--timeline-svg", flags->svg_path, "write the timeline as an SVG picture here");
  command->add_option("--report", flags->report_path, "write the JSON report here");
  command->add_option("--mode", flags->mode, "auto (functional for fuzzer cases), shape or functional")
      ->check(CLI::IsMember({"auto", "shape", "functional"}))
      ->capture_default_str();
  command->add_flag("--no-fit-advice", flags->no_fit_advice,
                    "skip the search for the largest micro-batch that fits and the levers that would make the run "
                    "fit (each a replay of its own; the report's memory.advice)");
  command->add_flag("--full-simulation", flags->full_simulation,
                    "simulate every rank on the SimWorld even for an SPMD trace (slower; checks the symmetric shortcut). "
                    "Ranks whose event streams are identical share one simulated engine; each is still reported");
  command->callback([flags] { replay(*flags); });
}

}  // namespace zero3
