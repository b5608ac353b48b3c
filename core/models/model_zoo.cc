// Built-in model specs, spec files, and the data source that goes with each model kind.
#include "core/models/model_zoo.h"

#include <filesystem>
#include <map>

#include "core/models/byte_file_data.h"
#include "core/models/token_file_data.h"
#include "core/models/weight_names.h"
#include "core/base/errors.h"
#include "core/models/gpt_model.h"
#include "core/base/json_reader.h"
#include "core/models/markov_data.h"
#include "core/models/model_spec.h"
#include "core/models/sequential_spec.h"
#include "core/models/teacher_data.h"

namespace zero3 {

namespace {

// The built-ins, written as the JSON a user would write (MODEL_SPEC.md shows the same shapes).
const std::map<std::string, const char*>& builtin_specs() {
  static const std::map<std::string, const char*> specs = {
      {"mlp-tiny", R"({"kind": "sequential", "input_width": 8, "loss": "mse", "layers": [
          {"type": "linear", "out": 32}, {"type": "gelu"}, {"type": "linear", "out": 32}, {"type": "gelu"},
          {"type": "linear", "out": 4}]})"},
      {"classifier-tiny", R"({"kind": "sequential", "input_width": 8, "loss": "cross_entropy", "layers": [
          {"type": "linear", "out": 32}, {"type": "relu"}, {"type": "layer_norm"}, {"type": "linear", "out": 5}]})"},
      {"gpt-tiny", R"({"kind": "gpt", "vocab": 64, "context": 16, "layers": 2, "heads": 2, "width": 32})"},
      // Byte-level: vocab 256, for `zero3 train --data FILE` on any text file.
      {"gpt-bytes", R"({"kind": "gpt", "vocab": 256, "context": 32, "layers": 2, "heads": 4, "width": 64})"},
      {"gpt2-124m", R"({"kind": "gpt", "vocab": 50257, "context": 1024, "layers": 12, "heads": 12, "width": 768})"},
      {"moe-tiny", R"({"kind": "sequential", "input_width": 8, "loss": "mse", "layers": [
          {"type": "linear", "out": 16}, {"type": "gelu"},
          {"type": "residual", "layers": [{"type": "moe", "experts": 4, "hidden": 16}]},
          {"type": "linear", "out": 4}]})"},
      // Linear(8, 0) takes part in the loss through a concat: DeepSpeed's zero-sized-parameter case.
      {"zero-sized", R"({"kind": "sequential", "input_width": 8, "loss": "mse", "layers": [
          {"type": "concat", "layers": [{"type": "linear", "out": 0}]},
          {"type": "linear", "out": 16}, {"type": "gelu"}, {"type": "linear", "out": 4}]})"},
      // h[B, 1] * p[4] through a raw handle: a placeholder [0] or [1] p silently changes the loss.
      {"broadcast-trap", R"({"kind": "sequential", "input_width": 8, "loss": "mse", "layers": [
          {"type": "linear", "out": 4}, {"type": "scale", "shape": [4]}, {"type": "linear", "out": 1},
          {"type": "sum_residual", "layers": [{"type": "raw_scale", "param": "layers.1.scale"}]}]})"},
      {"repeat-tiny", R"({"kind": "sequential", "input_width": 8, "loss": "mse", "layers": [
          {"type": "linear", "out": 16}, {"type": "gelu"},
          {"type": "repeat", "times": 3, "layers": [{"type": "linear", "out": 16}, {"type": "gelu"}]},
          {"type": "linear", "out": 4}]})"},
      {"tied-tiny", R"({"kind": "sequential", "input_width": 8, "loss": "mse", "layers": [
          {"type": "linear", "out": 16}, {"type": "gelu"},
          {"type": "tied_linear", "tie_to": "layers.0", "transpose": true}, {"type": "linear", "out": 4}]})"},
      {"unused-tiny", R"({"kind": "sequential", "input_width": 8, "loss": "mse", "layers": [
          {"type": "linear", "out": 16}, {"type": "unused_linear", "out": 16}, {"type": "gelu"},
          {"type": "linear", "out": 4}]})"},
      // One of every layer type, for demos and as a seed for the fuzzer's generators.
      {"kitchen-sink", R"({"kind": "sequential", "input_width": 8, "loss": "mse", "layers": [
          {"type": "linear", "out": 16}, {"type": "layer_norm"}, {"type": "scale", "shape": [16, 1]},
          {"type": "residual", "layers": [{"type": "moe", "experts": 3, "hidden": 8}]},
          {"type": "repeat", "times": 2, "layers": [{"type": "linear", "out": 16}, {"type": "relu"}]},
          {"type": "sum_residual", "layers": [{"type": "linear", "out": 0}]},
          {"type": "tied_linear", "tie_to": "layers.0", "transpose": true, "bias": true},
          {"type": "unused_linear", "out": 4}, {"type": "bias", "shape": [1]},
          {"type": "concat", "layers": [{"type": "raw_scale", "shape": [1]}]}, {"type": "gelu"},
          {"type": "residual", "layers": [{"type": "rms_norm"}, {"type": "swiglu", "hidden": 8}]},
          {"type": "linear", "out": 4, "bias": false}]})"},
      {"transformer-tiny", R"({"kind": "sequential", "vocab": 32, "context": 8, "loss": "cross_entropy", "layers": [
          {"type": "embedding", "dim": 16},
          {"type": "residual", "layers": [{"type": "layer_norm"}, {"type": "causal_self_attention", "heads": 2, "bias": false}]},
          {"type": "residual", "layers": [{"type": "layer_norm"}, {"type": "linear", "out": 32}, {"type": "gelu"},
                                          {"type": "linear", "out": 16}]},
          {"type": "layer_norm"}, {"type": "tied_linear", "tie_to": "layers.0"}]})"},
  };
  return specs;
}

// The default name: the built-in's name, or the spec file's stem.
std::string name_from_source(const std::string& source) {
  const std::string prefix = "builtin:";
  if (source.starts_with(prefix)) return source.substr(prefix.size());
  return std::filesystem::path(source).stem().string();
}

GptConfig read_gpt_config(const SpecNode& spec) {
  spec.expect_object(
      {"zero3_model_spec", "name", "kind", "vocab", "context", "layers", "heads", "width", "checkpoint_activations"},
      "a gpt model spec");
  // Far above any real GPT (GPT-3: 50,257 / 2,048 / 96 / 96 / 12,288), low enough that every
  // parameter's and the model's element count fits in 64 bits with room to spare.
  constexpr int64_t kGptDimMax = int64_t{1} << 24;
  constexpr int64_t kGptWidthMax = int64_t{1} << 20;
  constexpr int64_t kGptLayersMax = int64_t{1} << 14;
  GptConfig config;
  config.vocab = spec.at("vocab").integer(1, kGptDimMax);
  config.context = spec.at("context").integer(1, kGptDimMax);
  config.layers = spec.at("layers").integer(0, kGptLayersMax);
  config.heads = spec.at("heads").integer(1, kGptWidthMax);
  config.width = spec.at("width").integer(1, kGptWidthMax);
  if (config.width % config.heads != 0) {
    spec.at("heads").fail_expected("a divisor of the width " + std::to_string(config.width));
  }
  return config;
}

BuiltModel build_gpt(const SpecNode& spec, const ModelOptions& options) {
  const GptConfig config = read_gpt_config(spec);
  BuiltModel built;
  built.model = std::make_unique<GptModel>(config);
  if (options.data_file.empty()) {
    built.data = std::make_unique<MarkovData>(options.seed, config.vocab, config.context);
    return built;
  }
  if (TokenFileData::is_token_file(options.data_file)) {
    built.data = std::make_unique<TokenFileData>(options.data_file, config.vocab, config.context,
                                                 options.micro_steps_per_step);
    return built;
  }
  if (config.vocab < ByteFileData::kVocab) {
    spec.at("vocab").fail_expected("a vocab of at least 256 to train on the bytes of data file '" +
                                   options.data_file + "'");
  }
  built.data = std::make_unique<ByteFileData>(options.data_file, options.seed, config.context);
  return built;
}

BuiltModel build_sequential(const SpecNode& spec, const ModelOptions& options) {
  if (!options.data_file.empty()) {
    spec.at("kind").fail("a data file ('" + options.data_file + "') feeds gpt models only; expected kind \"gpt\"");
  }
  auto model = build_sequential_model(spec);
  BuiltModel built;
  if (model->tokens().vocab > 0) {
    built.data = std::make_unique<MarkovData>(options.seed, model->tokens().vocab, model->tokens().context);
    built.model = std::move(model);
    return built;
  }
  built.data = std::make_unique<TeacherData>(options.seed, model->input_width(), model->output_width(),
                                             model->loss_kind());
  built.model = std::move(model);
  return built;
}

nlohmann::json read_spec_file(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) {
    throw InputError("'" + path + "' is neither a built-in model (" + join_words(builtin_model_names()) +
                     ") nor a model spec file");
  }
  return read_json_file(path);
}

}  // namespace

std::vector<std::string> builtin_model_names() {
  std::vector<std::string> names;
  for (const auto& [name, unused] : builtin_specs()) names.push_back(name);
  return names;
}

nlohmann::json builtin_model_spec(const std::string& name) {
  const auto found = builtin_specs().find(name);
  if (found == builtin_specs().end()) {
    throw InputError("unknown built-in model '" + name + "'; built-in models: " + join_words(builtin_model_names()));
  }
  nlohmann::json spec = {{"zero3_model_spec", kModelSpecVersion}, {"name", name}};
  spec.update(nlohmann::json::parse(found->second));
  return spec;
}

BuiltModel build_model(const std::string& name_or_path, const ModelOptions& options) {
  if (builtin_specs().contains(name_or_path)) {
    return build_model_from_spec(builtin_model_spec(name_or_path), "builtin:" + name_or_path, options);
  }
  return build_model_from_spec(read_spec_file(name_or_path), name_or_path, options);
}

// Parameters are only allocated when the model is initialised, so a spec's size is checked here,
// before anything counts its elements in 64 bits (repeats x experts x widths can pass 2^63).
void check_model_elements(const Model& model, const SpecNode& root) {
  constexpr int64_t kModelElementsMax = int64_t{1} << 50;
  int64_t total = 0;
  for (const Parameter* param : model.parameters()) {
    if (__builtin_add_overflow(total, param->numel(), &total) || total > kModelElementsMax) {
      root.fail_expected("a model of at most 2^50 parameter elements (" + std::to_string(kModelElementsMax) +
                         "); this one has more, past '" + param->name() + "'");
    }
  }
}

BuiltModel build_model_from_spec(const nlohmann::json& spec, const std::string& source, const ModelOptions& options) {
  nlohmann::json resolved = spec;
  const SpecNode root(spec, source, &resolved);
  root.require_object("a model spec");
  check_spec_version(root);
  const std::string kind = root.at("kind").one_of({"gpt", "sequential"});
  root.at("name").text_or(name_from_source(source));
  BuiltModel built = kind == "gpt" ? build_gpt(root, options) : build_sequential(root, options);
  check_model_elements(*built.model, root);
  const SpecNode checkpointed = root.at("checkpoint_activations");
  if (checkpointed.present()) {
    if (!checkpointed.value().is_array()) checkpointed.fail_expected("an array of module types or dotted names");
    for (size_t i = 0; i < checkpointed.array_size(); ++i) built.checkpoint_modules.push_back(checkpointed.at(i).text());
    (void)select_modules(*built.model, built.checkpoint_modules, source + ": at /checkpoint_activations");
  }
  built.spec = std::move(resolved);
  built.init_from = options.init_from;
  built.init_names = options.init_names;
  if (!built.init_from.empty()) parse_weight_names(built.init_names);  // a bad --names fails before training
  return built;
}

std::vector<std::string> checkpointed_names(const BuiltModel& built, const std::vector<std::string>& from_config) {
  std::vector<std::string> names = built.checkpoint_modules;
  names.insert(names.end(), from_config.begin(), from_config.end());
  return names;
}

std::vector<NamedTensor> global_batch_tensors(const BuiltModel& built, int64_t steps, int64_t gas, int64_t rows) {
  std::vector<NamedTensor> tensors;
  for (int64_t step = 0; step < steps; ++step) {
    for (int64_t micro = 0; micro < gas; ++micro) {
      const Batch batch = built.data->batch(step, micro, 0, 1, rows);
      const std::string prefix = "step" + std::to_string(step) + ".micro" + std::to_string(micro);
      tensors.push_back({prefix + ".inputs", batch.inputs});
      tensors.push_back({prefix + ".targets", batch.targets});
    }
  }
  return tensors;
}

void initialize_model(BuiltModel& built, uint64_t seed) {
  built.model->initialize(seed);
  if (!built.init_from.empty()) load_initial_weights(*built.model, built.init_from, parse_weight_names(built.init_names));
}

}  // namespace zero3
