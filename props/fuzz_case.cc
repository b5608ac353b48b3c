// Fuzz cases: their runs, their case files and their size (see fuzz_case.h).
#include "props/fuzz_case.h"

#include <ostream>

#include "core/zero3/bug_injection.h"
#include "core/base/json_reader.h"
#include "core/base/text.h"
#include "core/models/model_zoo.h"
#include "sim/fault_plan.h"
#include "sim/opaque_device.h"

namespace zero3 {

DistributedRunOptions run_options(const FuzzCase& fuzz_case) {
  DistributedRunOptions options;
  options.model_spec = fuzz_case.model_spec;
  options.seed = fuzz_case.seed;
  options.world = fuzz_case.world;
  options.steps = fuzz_case.steps;
  options.config = fuzz_case.config;
  for (const std::string& name : fuzz_case.inject) options.bugs.set(parse_bug(name));
  options.faults = FaultPlan::parse(fuzz_case.faults);
  options.device = fuzz_case.device;
  return options;
}

DistributedRunOptions reference_options(const FuzzCase& fuzz_case) {
  DistributedRunOptions options = run_options(fuzz_case);
  // Plain DDP: none of the levers (stages, checkpointing, offload), which must not change a bit.
  options.config.zero.stage = 0;
  options.config.zero.offload_optimizer = OffloadDevice::none;
  options.config.zero.offload_param = OffloadDevice::none;
  options.config.zero.hpz_group_size = 1;  // hpZ reduces as flat ZeRO-3; HSDP keeps its tree (the oracle)
  options.config.checkpoint_modules.clear();
  options.bugs = BugInjections{};
  options.faults = FaultPlan{};
  return options;
}

nlohmann::json case_file_json(const FuzzCase& fuzz_case, const std::string& property, const std::string& message) {
  nlohmann::json run = {{"world", fuzz_case.world},
                        {"seed", fuzz_case.seed},
                        {"steps", fuzz_case.steps},
                        {"config", train_config_to_json(fuzz_case.config)},
                        {"inject", fuzz_case.inject},
                        {"faults", fuzz_case.faults}};
  if (fuzz_case.checkpoint.save_at_step > 0) {
    run["checkpoint"] = {{"save_at_step", fuzz_case.checkpoint.save_at_step},
                         {"resume_world", fuzz_case.checkpoint.resume_world}};
  }
  if (fuzz_case.device != Device::cpu) run["device"] = device_name(fuzz_case.device);
  if (fuzz_case.save_every > 0) run["save_every"] = fuzz_case.save_every;
  return {
      {"zero3_trace", 1},
      {"source", "fuzz"},
      {"model_spec", fuzz_case.model_spec},
      {"run", run},
      {"expected", {{"property", property}, {"message", message}}},
  };
}

namespace {

// The simulator runs on cpu and opaque only; a cuda case file is refused, not run on the host.
Device fuzz_case_device(const JsonReader& field) {
  const std::string text = field.as_string();
  Device device;
  if (!parse_device(text, &device) || !is_simulated_device(device)) {
    field.fail("\"cpu\" or \"opaque\"");
  }
  return device;
}

}  // namespace

FuzzCase case_from_file_json(const nlohmann::json& json, const std::string& source) {
  const JsonReader root(json, source);
  root.expect_object();
  if (root.at("zero3_trace").as_int(1, 1) != 1) root.at("zero3_trace").fail("version 1");
  FuzzCase fuzz_case;
  root.at("model_spec").expect_object();
  fuzz_case.model_spec = root.at("model_spec").json();
  const JsonReader run = root.at("run");
  run.expect_only_keys({"world", "seed", "steps", "config", "inject", "faults", "checkpoint", "device", "save_every"});
  fuzz_case.world = static_cast<int>(run.at("world").as_int(1, 4096));
  fuzz_case.seed = static_cast<uint64_t>(run.at("seed").as_int(0, INT64_MAX));
  fuzz_case.steps = run.at("steps").as_int(1, 1 << 20);
  std::vector<std::string> warnings;
  fuzz_case.config = parse_train_config(run.at("config").json(), source + " /run/config", &warnings);
  if (!warnings.empty()) run.at("config").fail("only keys zero3 reads (" + warnings.front() + ")");
  // A group size the world cannot hold is the file's error, not a failure of the run.
  check_group_sizes(fuzz_case.config, fuzz_case.world, source + " /run/config");
  const JsonReader inject = run.at("inject");
  for (size_t i = 0; i < inject.size(); ++i) {
    fuzz_case.inject.push_back(inject.at(i).as_string());
    parse_bug(fuzz_case.inject.back());
  }
  fuzz_case.faults = FaultPlan::parse(run.at("faults").as_string()).to_string();
  if (run.has("checkpoint")) {
    const JsonReader checkpoint = run.at("checkpoint");
    checkpoint.expect_only_keys({"save_at_step", "resume_world"});
    if (fuzz_case.steps < 2) run.at("steps").fail("at least 2 steps, so that a checkpoint falls between them");
    fuzz_case.checkpoint.save_at_step = checkpoint.at("save_at_step").as_int(1, fuzz_case.steps - 1);
    fuzz_case.checkpoint.resume_world = static_cast<int>(checkpoint.at("resume_world").as_int(1, 4096));
  }
  if (run.has("device")) fuzz_case.device = fuzz_case_device(run.at("device"));
  if (run.has("save_every")) fuzz_case.save_every = run.at("save_every").as_int(1, fuzz_case.steps);
  return fuzz_case;
}

namespace {

int64_t count_layers(const nlohmann::json& layers) {
  int64_t count = 0;
  for (const auto& layer : layers) {
    count += 1;
    if (layer.contains("layers")) count += count_layers(layer.at("layers"));
  }
  return count;
}

}  // namespace

CaseSize case_size(const FuzzCase& fuzz_case) {
  CaseSize size;
  size.layers = count_layers(fuzz_case.model_spec.value("layers", nlohmann::json::array()));
  const BuiltModel built = build_model_from_spec(fuzz_case.model_spec, "model_spec", {.seed = fuzz_case.seed});
  size.elements = built.model->parameter_count();
  return size;
}

std::string describe(const FuzzCase& fuzz_case) {
  const CaseSize size = case_size(fuzz_case);
  std::string text = std::to_string(size.layers) + " layers, " + std::to_string(size.elements) + " elements, W=" +
                     std::to_string(fuzz_case.world) + ", " + std::to_string(fuzz_case.steps) + " steps, gas " +
                     std::to_string(fuzz_case.config.gradient_accumulation_steps);
  const TrainConfig& config = fuzz_case.config;
  // The levers, where they are on: a shrunk counterexample keeps only those its failure needs.
  if (config.zero.stage != 3) text += ", stage " + std::to_string(config.zero.stage);
  if (config.zero.shard_group_size > 0) text += ", HSDP blocks of " + std::to_string(config.zero.shard_group_size);
  if (config.zero.hpz_group_size > 1) text += ", hpZ blocks of " + std::to_string(config.zero.hpz_group_size);
  if (!config.checkpoint_modules.empty()) text += ", checkpointing [" + join_words(config.checkpoint_modules) + "]";
  if (config.zero.offload_optimizer != OffloadDevice::none) text += ", optimizer offloaded";
  if (config.zero.offload_param != OffloadDevice::none) text += ", parameters offloaded";
  if (fuzz_case.faults != "none") text += ", faults " + fuzz_case.faults;
  if (fuzz_case.device != Device::cpu) text += ", on " + device_name(fuzz_case.device);
  if (fuzz_case.save_every > 0) text += ", saved every " + std::to_string(fuzz_case.save_every) + " steps";
  if (fuzz_case.checkpoint.save_at_step > 0) {
    text += ", saved at step " + std::to_string(fuzz_case.checkpoint.save_at_step) + " and resumed on W=" +
            std::to_string(fuzz_case.checkpoint.resume_world);
  }
  return text;
}

void showValue(const FuzzCase& fuzz_case, std::ostream& os) {
  nlohmann::json json = case_file_json(fuzz_case, "", "");
  json.erase("expected");
  os << json.dump();
}

}  // namespace zero3
