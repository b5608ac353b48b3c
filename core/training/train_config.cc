// DeepSpeed-style config parsing with range checks and unknown-key warnings.
#include "core/training/train_config.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <limits>

#include "core/base/errors.h"
#include "core/base/json_reader.h"
#include "core/training/deepspeed_keys.h"

namespace zero3 {

namespace {

constexpr int64_t kElementsMax = std::numeric_limits<int64_t>::max() / 8;

// Keys of a DeepSpeed config that zero3 reads; anything else is reported, never silently used.
const std::vector<std::string> kTopLevelKeys = {
    "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "train_batch_size", "gradient_clipping", "bf16",
    "fp16", "optimizer", "zero_optimization", "activation_checkpointing"};

// Where Hugging Face Trainer writes "auto" (its ds_config templates), filling them from its own
// arguments; zero3 fills them from its flags, the trace or its defaults, and prints what it chose.
const std::vector<std::string> kAutoPaths = {
    "/train_micro_batch_size_per_gpu", "/gradient_accumulation_steps", "/train_batch_size", "/gradient_clipping", "/bf16/enabled",
    "/fp16/enabled", "/optimizer/params/lr", "/optimizer/params/betas", "/optimizer/params/eps",
    "/optimizer/params/weight_decay", "/zero_optimization/reduce_bucket_size",
    "/zero_optimization/stage3_prefetch_bucket_size", "/zero_optimization/stage3_param_persistence_threshold"};

bool contains(const std::vector<std::string>& list, const std::string& item) {
  for (const std::string& entry : list) {
    if (entry == item) return true;
  }
  return false;
}

// True (and noted) when the value is "auto" where Hugging Face writes it; the value then stays as
// the caller will resolve it. "auto" anywhere else is an error, not a silent default.
bool is_auto(const JsonReader& value, TrainConfig& config) {
  if (!value.json().is_string() || value.json().get<std::string>() != "auto") return false;
  if (!contains(kAutoPaths, value.path())) {
    value.fail("a value; \"auto\" is accepted only where Hugging Face Trainer writes it");
  }
  config.auto_keys.push_back(value.path());
  return true;
}
// DeepSpeed's ZeRO config takes each stage3_ setting under its field name too (pydantic aliases).
const std::vector<std::string> kZeroKeys = {
    "stage", "stage3_prefetch_bucket_size", "prefetch_bucket_size", "stage3_max_live_parameters",
    "max_live_parameters", "stage3_max_reuse_distance", "max_reuse_distance", "stage3_param_persistence_threshold",
    "param_persistence_threshold", "reduce_bucket_size", "overlap_comm", "zero3_placeholder_policy",
    "zero3_leaf_modules", "offload_optimizer", "offload_param", "mics_shard_size", "zero_hpz_partition_size"};
const std::vector<std::string> kOffloadKeys = {"device"};
const std::vector<std::string> kCheckpointingKeys = {"zero3_modules"};
const std::vector<std::string> kOptimizerKeys = {"type", "params"};
const std::vector<std::string> kAdamWKeys = {"lr", "betas", "eps", "weight_decay"};
const std::vector<std::string> kPrecisionKeys = {"enabled"};

// Keys zero3 does not read. In a section DeepSpeed validates strictly, one DeepSpeed would refuse is
// refused here too (a user must never learn from zero3 that a config is fine that DeepSpeed would
// reject); a DeepSpeed key zero3 has no use for is collected for one grouped warning; anything
// else is a warning of its own (a feature not built yet, a slip in a section DeepSpeed does not check).
void check_unknown_keys(const JsonReader& object, const std::vector<std::string>& known, TrainConfig& config,
                        std::vector<std::string>* warnings) {
  for (const auto& key : object.keys()) {
    if (contains(known, key)) continue;
    const DeepSpeedKey* deepspeed = unread_deepspeed_key(object.path(), key);
    const bool refused = deepspeed == nullptr || deepspeed->support == KeySupport::removed_by_deepspeed;
    if (refused && deepspeed_refuses_unknown_keys(object.path())) {
      // "<path> is not a DeepSpeed key: did you mean X?" without the path it would repeat.
      std::string advice = unused_key_advice(object.path(), key, known);
      advice = advice.substr(std::min(advice.size(), object.path().size() + key.size() + 2));
      if (advice.rfind("is ", 0) == 0) advice = advice.substr(3);
      // "ignored" is the warning's word; here the key is refused.
      const std::string ignored = "; ignored";
      if (advice.ends_with(ignored)) advice.resize(advice.size() - ignored.size());
      throw_json_error(object.source(), object.path() + "/" + key,
                       advice + (advice.ends_with("?") ? " Expected" : "; expected") + " a key DeepSpeed accepts in " +
                           object.path().substr(1) + ": DeepSpeed 0.19.8 refuses a key it does not know there (its "
                           "config model forbids extra fields), and so does zero3");
    }
    if (deepspeed != nullptr && deepspeed->support == KeySupport::not_used) {
      config.ignored_deepspeed_keys.push_back(object.path() + "/" + key);
    } else if (warnings) {
      warnings->push_back(unused_key_advice(object.path(), key, known));
    }
  }
}

// The grouped warning: "zero3 does not use 14 DeepSpeed keys of this config: /scheduler, ...".
std::string ignored_keys_warning(const std::vector<std::string>& paths) {
  std::string text = "zero3 does not use " + std::to_string(paths.size()) + " DeepSpeed key" +
                     (paths.size() == 1 ? "" : "s") + " of this config (DeepSpeed accepts them; they change "
                     "nothing zero3 computes or holds): ";
  for (size_t i = 0; i < paths.size(); ++i) text += (i ? ", " : "") + paths[i];
  return text;
}

void parse_optimizer(const JsonReader& optimizer, TrainConfig& config, std::vector<std::string>* warnings) {
  check_unknown_keys(optimizer, kOptimizerKeys, config, warnings);
  if (optimizer.has("type")) optimizer.at("type").as_choice({"AdamW", "adamw", "Adam", "adam"});
  if (!optimizer.has("params")) return;
  const JsonReader params = optimizer.at("params");
  check_unknown_keys(params, kAdamWKeys, config, warnings);
  AdamWHyper& adamw = config.adamw;
  auto read_number = [&](const char* key, float& out, double max) {
    if (params.has(key) && !is_auto(params.at(key), config)) out = static_cast<float>(params.at(key).as_number(0.0, max));
  };
  read_number("lr", adamw.lr, 10.0);
  read_number("eps", adamw.eps, 1.0);
  read_number("weight_decay", adamw.weight_decay, 10.0);
  if (params.has("betas") && !is_auto(params.at("betas"), config)) {
    const JsonReader betas = params.at("betas");
    if (betas.size() != 2) betas.fail("an array of two numbers [beta1, beta2]");
    adamw.beta1 = static_cast<float>(betas.at(0).as_number(0.0, 0.999999));
    adamw.beta2 = static_cast<float>(betas.at(1).as_number(0.0, 0.999999));
  }
}

// offload_optimizer / offload_param: {"device": "none" | "cpu"}; DeepSpeed's other keys (pinning,
// buffers, nvme_path) tune transfers zero3 only counts, and are reported as unused.
void parse_offload(const JsonReader& zero_json, const char* key, OffloadDevice& out, TrainConfig& config,
                   std::vector<std::string>* warnings) {
  if (!zero_json.has(key)) return;
  const JsonReader section = zero_json.at(key);
  section.expect_object();
  check_unknown_keys(section, kOffloadKeys, config, warnings);
  if (!section.has("device")) return;  // DeepSpeed's default: "none"
  const JsonReader device = section.at("device");
  const std::string name = device.as_string();
  if (name == "nvme") {
    device.fail("\"cpu\" or \"none\" (\"nvme\", ZeRO-Infinity's file-backed store, is not built in zero3; "
                "\"cpu\" keeps the state in host memory)");
  }
  out = device.as_choice({"none", "cpu"}) == "cpu" ? OffloadDevice::cpu : OffloadDevice::none;
}

void parse_zero(const JsonReader& zero_json, TrainConfig& config, std::vector<std::string>* warnings) {
  ZeroConfig& zero = config.zero;
  check_unknown_keys(zero_json, kZeroKeys, config, warnings);
  if (zero_json.has("stage")) {
    zero.stage = static_cast<int>(zero_json.at("stage").as_int(0, 3));
  }
  auto read_elements = [&](const std::string& key, int64_t& out, int64_t min) {
    if (zero_json.has(key) && !is_auto(zero_json.at(key), config)) out = zero_json.at(key).as_int(min, kElementsMax);
  };
  // A stage3_ setting under either of DeepSpeed's names, but not both (which one would win is a guess).
  auto read_stage3 = [&](const std::string& field, int64_t& out) {
    if (zero_json.has(field) && zero_json.has("stage3_" + field)) {
      zero_json.at(field).fail("one of " + field + " and stage3_" + field + " (DeepSpeed's two names for it)");
    }
    read_elements(zero_json.has(field) ? field : "stage3_" + field, out, 0);
  };
  read_stage3("prefetch_bucket_size", zero.prefetch_bucket_elements);
  read_stage3("max_live_parameters", zero.max_live_elements);
  read_stage3("max_reuse_distance", zero.max_reuse_distance);
  read_stage3("param_persistence_threshold", zero.persistence_threshold);
  read_elements("reduce_bucket_size", zero.reduce_bucket_elements, 1);
  if (zero_json.has("overlap_comm")) zero.overlap_comm = zero_json.at("overlap_comm").as_bool();
  if (zero_json.has("zero3_placeholder_policy")) {
    const std::string policy = zero_json.at("zero3_placeholder_policy").as_choice({"error", "empty", "scalar"});
    parse_placeholder_policy(policy, &zero.placeholder);
  }
  if (zero_json.has("zero3_leaf_modules")) {
    const JsonReader leaves = zero_json.at("zero3_leaf_modules");
    for (size_t i = 0; i < leaves.size(); ++i) zero.leaf_modules.push_back(leaves.at(i).as_string());
  }
  parse_offload(zero_json, "offload_optimizer", zero.offload_optimizer, config, warnings);
  parse_offload(zero_json, "offload_param", zero.offload_param, config, warnings);
  // DeepSpeed's "off" values: mics_shard_size -1, zero_hpz_partition_size 1 (0 is read as 1 too).
  if (zero_json.has("mics_shard_size")) {
    const int64_t size = zero_json.at("mics_shard_size").as_int(-1, 1 << 20);
    if (size == 0) zero_json.at("mics_shard_size").fail("a group size of at least 1, or -1 for no groups");
    zero.shard_group_size = size < 0 ? 0 : static_cast<int>(size);
  }
  if (zero_json.has("zero_hpz_partition_size")) {
    zero.hpz_group_size = std::max(1, static_cast<int>(zero_json.at("zero_hpz_partition_size").as_int(0, 1 << 20)));
  }
}

void parse_checkpointing(const JsonReader& section, TrainConfig& config, std::vector<std::string>* warnings) {
  check_unknown_keys(section, kCheckpointingKeys, config, warnings);
  if (!section.has("zero3_modules")) return;
  const JsonReader modules = section.at("zero3_modules");
  if (!modules.json().is_array()) modules.fail("an array of module types or dotted names, e.g. [\"block\"]");
  for (size_t i = 0; i < modules.size(); ++i) config.checkpoint_modules.push_back(modules.at(i).as_string());
}

// bf16 and fp16 blocks. fp16 needs dynamic loss scaling, which is not built: it is refused rather
// than computed as f32, and bf16 (same range as f32, so no loss scaling) is named as the way.
void parse_precision(const JsonReader& root, TrainConfig& config, std::vector<std::string>* warnings) {
  bool any_auto = false;
  if (root.has("fp16")) {
    const JsonReader fp16 = root.at("fp16");
    check_unknown_keys(fp16, kPrecisionKeys, config, warnings);
    if (fp16.has("enabled")) {
      const JsonReader enabled = fp16.at("enabled");
      any_auto = is_auto(enabled, config);
      if (!any_auto && enabled.as_bool()) {
        enabled.fail("false (fp16 training, with its dynamic loss scaling, is not built in zero3; "
                     "\"bf16\": {\"enabled\": true} has f32's range and needs no loss scaling)");
      }
      if (!any_auto) config.precision_origin = SettingOrigin::file;
    }
  }
  if (root.has("bf16")) {
    const JsonReader bf16 = root.at("bf16");
    check_unknown_keys(bf16, kPrecisionKeys, config, warnings);
    if (bf16.has("enabled")) {
      if (is_auto(bf16.at("enabled"), config)) {
        any_auto = true;
      } else {
        config.bf16 = bf16.at("enabled").as_bool();
        config.precision_origin = SettingOrigin::file;
      }
    }
  }
  if (any_auto && config.precision_origin == SettingOrigin::unset) config.precision_origin = SettingOrigin::file_auto;
}

// The shortest text that reads back as the same float: lr 0.003, not 0.003000000026077032.
std::string shortest_text(float value) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

std::string setting_text(const TrainConfig& config, const std::string& path) {
  const auto number = shortest_text;
  if (path == "/train_micro_batch_size_per_gpu") return std::to_string(config.micro_batch_size);
  if (path == "/gradient_accumulation_steps") return std::to_string(config.gradient_accumulation_steps);
  if (path == "/train_batch_size") return config.train_batch_size > 0 ? std::to_string(config.train_batch_size) : "?";
  if (path == "/gradient_clipping") return number(config.gradient_clipping);
  if (path == "/bf16/enabled") return config.bf16 ? "true" : "false";
  if (path == "/fp16/enabled") return "false";
  if (path == "/optimizer/params/lr") return number(config.adamw.lr);
  if (path == "/optimizer/params/betas") return "[" + number(config.adamw.beta1) + ", " + number(config.adamw.beta2) + "]";
  if (path == "/optimizer/params/eps") return number(config.adamw.eps);
  if (path == "/optimizer/params/weight_decay") return number(config.adamw.weight_decay);
  if (path == "/zero_optimization/reduce_bucket_size") return std::to_string(config.zero.reduce_bucket_elements);
  if (path == "/zero_optimization/stage3_prefetch_bucket_size") return std::to_string(config.zero.prefetch_bucket_elements);
  if (path == "/zero_optimization/stage3_param_persistence_threshold") {
    return std::to_string(config.zero.persistence_threshold);
  }
  return "?";
}

}  // namespace

const std::vector<std::string>& keys_zero3_reads(const std::string& section) {
  static const std::vector<std::string> none;
  if (section.empty()) return kTopLevelKeys;
  if (section == "/zero_optimization") return kZeroKeys;
  if (section == "/optimizer") return kOptimizerKeys;
  if (section == "/optimizer/params") return kAdamWKeys;
  if (section == "/bf16" || section == "/fp16") return kPrecisionKeys;
  if (section == "/zero_optimization/offload_optimizer" || section == "/zero_optimization/offload_param") {
    return kOffloadKeys;
  }
  if (section == "/activation_checkpointing") return kCheckpointingKeys;
  return none;
}

std::string auto_resolutions(const TrainConfig& config) {
  std::string out;
  for (const std::string& path : config.auto_keys) {
    if (!out.empty()) out += ", ";
    out += path.substr(1) + "=" + setting_text(config, path);
  }
  return out;
}

TrainConfig parse_train_config(const nlohmann::json& json, const std::string& source,
                               std::vector<std::string>* warnings) {
  TrainConfig config;
  const JsonReader root(json, source);
  root.expect_object();
  check_unknown_keys(root, kTopLevelKeys, config, warnings);
  auto read_count = [&](const char* key, int64_t& out, SettingOrigin& origin) {
    if (!root.has(key)) return;
    const bool is_auto_value = is_auto(root.at(key), config);
    if (!is_auto_value) out = root.at(key).as_int(1, 1 << 20);
    origin = is_auto_value ? SettingOrigin::file_auto : SettingOrigin::file;
  };
  read_count("train_micro_batch_size_per_gpu", config.micro_batch_size, config.micro_batch_origin);
  read_count("gradient_accumulation_steps", config.gradient_accumulation_steps, config.gas_origin);
  if (root.has("train_batch_size") && !is_auto(root.at("train_batch_size"), config)) {
    config.train_batch_size = root.at("train_batch_size").as_int(1, int64_t{1} << 40);
  }
  if (root.has("gradient_clipping") && !is_auto(root.at("gradient_clipping"), config)) {
    config.gradient_clipping = static_cast<float>(root.at("gradient_clipping").as_number(0.0, 1e30));
  }
  parse_precision(root, config, warnings);
  if (root.has("optimizer")) parse_optimizer(root.at("optimizer"), config, warnings);
  if (root.has("zero_optimization")) parse_zero(root.at("zero_optimization"), config, warnings);
  if (root.has("activation_checkpointing")) parse_checkpointing(root.at("activation_checkpointing"), config, warnings);
  if (!config.ignored_deepspeed_keys.empty() && warnings) warnings->push_back(ignored_keys_warning(config.ignored_deepspeed_keys));
  return config;
}

void check_batch_sizes(TrainConfig& config, int world, const std::string& source) {
  const int64_t global = config.train_batch_size;
  if (world <= 0) return;
  if (global <= 0) {  // "auto" or not given: Trainer writes micro-batch x accumulation x world
    if (contains(config.auto_keys, "/train_batch_size")) {
      config.train_batch_size = config.micro_batch_size * config.gradient_accumulation_steps * world;
    }
    return;
  }
  const bool micro_given = config.micro_batch_origin == SettingOrigin::file;
  const bool gas_given = config.gas_origin == SettingOrigin::file;
  // DeepSpeed's _set_batch_related_parameters: what is not given follows from the global batch.
  if (!micro_given && !gas_given) {
    config.gradient_accumulation_steps = 1;
    config.micro_batch_size = global / world;
  } else if (!micro_given) {
    config.micro_batch_size = global / world / config.gradient_accumulation_steps;
  } else if (!gas_given) {
    config.gradient_accumulation_steps = global / config.micro_batch_size / world;
  }
  if (!micro_given) config.micro_batch_origin = SettingOrigin::file;
  if (!gas_given) config.gas_origin = SettingOrigin::file;
  const int64_t product = config.micro_batch_size * config.gradient_accumulation_steps * world;
  if (config.micro_batch_size > 0 && config.gradient_accumulation_steps > 0 && product == global) return;
  throw InputError(source + ": at /train_batch_size: " + std::to_string(global) +
                   " is not train_micro_batch_size_per_gpu x gradient_accumulation_steps x world size = " +
                   std::to_string(config.micro_batch_size) + " x " + std::to_string(config.gradient_accumulation_steps) +
                   " x " + std::to_string(world) + " = " + std::to_string(product) +
                   " (DeepSpeed asserts they are equal); set it to " + std::to_string(product) + ", or to \"auto\", "
                   "or leave it out");
}

bool resolve_auto_from_hidden_size(TrainConfig& config, int64_t hidden_size) {
  if (hidden_size <= 0) return false;
  bool filled = false;
  for (const std::string& path : config.auto_keys) {
    if (path == "/zero_optimization/reduce_bucket_size") {
      config.zero.reduce_bucket_elements = hidden_size * hidden_size;
    } else if (path == "/zero_optimization/stage3_prefetch_bucket_size") {
      config.zero.prefetch_bucket_elements = static_cast<int64_t>(0.9 * static_cast<double>(hidden_size * hidden_size));
    } else if (path == "/zero_optimization/stage3_param_persistence_threshold") {
      config.zero.persistence_threshold = 10 * hidden_size;
    } else {
      continue;
    }
    filled = true;
  }
  return filled;
}

namespace {

std::vector<std::string> split_module_names(const std::string& text) {
  std::vector<std::string> names;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string name = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (name.empty()) throw InputError("--checkpoint-activations " + text + ": an empty name between commas");
    names.push_back(name);
    if (comma == std::string::npos) return names;
    start = comma + 1;
  }
}

}  // namespace

void apply_lever_flags(const LeverFlags& flags, const std::string& config_path, TrainConfig& config) {
  if (flags.zero_stage) config.zero.stage = *flags.zero_stage;
  if (flags.checkpoint_activations) config.checkpoint_modules = split_module_names(*flags.checkpoint_activations);
  auto device = [](const std::string& text) { return text == "cpu" ? OffloadDevice::cpu : OffloadDevice::none; };
  if (flags.offload_optimizer) config.zero.offload_optimizer = device(*flags.offload_optimizer);
  if (flags.offload_param) config.zero.offload_param = device(*flags.offload_param);
  if (flags.shard_group) config.zero.shard_group_size = *flags.shard_group;
  if (flags.hpz_group) config.zero.hpz_group_size = *flags.hpz_group;
  check_lever_combinations(config, config_path.empty() ? std::string("the flags") : config_path + " with the flags");
}

const char* offload_device_name(OffloadDevice device) { return device == OffloadDevice::cpu ? "cpu" : "none"; }

void check_lever_combinations(const TrainConfig& config, const std::string& source) {
  const int stage = config.zero.stage;
  if (config.zero.offload_param != OffloadDevice::none && stage < 3) {
    throw InputError(source + ": /zero_optimization/offload_param/device: \"cpu\" needs stage 3 (stage " +
                     std::to_string(stage) + " keeps every parameter whole on the device, so there is no shard to "
                     "offload); offload_optimizer offloads the optimizer state at stages 1 and 2");
  }
  if (config.zero.offload_optimizer != OffloadDevice::none && stage == 0) {
    throw InputError(source + ": /zero_optimization/offload_optimizer/device: \"cpu\" needs stage 1, 2 or 3 "
                     "(stage 0 is DDP: every rank steps the whole optimizer state itself)");
  }
}

void check_group_sizes(const TrainConfig& config, int world, const std::string& source) {
  const ZeroConfig& zero = config.zero;
  const std::string world_text = "the world size " + std::to_string(world) + " (ranks)";
  if (zero.shard_group_size > 0 && zero.hpz_group_size > 1) {
    throw InputError(source + ": /zero_optimization/mics_shard_size (" + std::to_string(zero.shard_group_size) +
                     ") and /zero_optimization/zero_hpz_partition_size (" + std::to_string(zero.hpz_group_size) +
                     ") together: choose one (HSDP shards inside a block; hpZ shards over the world and keeps a "
                     "secondary copy inside a block)");
  }
  auto check = [&](const char* key, int size) {
    const std::string where = source + ": /zero_optimization/" + key + " = " + std::to_string(size);
    if (zero.stage != 3) {
      throw InputError(where + " needs stage 3 (allowed at stage 3 only: stage " + std::to_string(zero.stage) +
                       " keeps the parameters whole on every rank, so there is no shard to place in a group)");
    }
    if (size > world) throw InputError(where + " exceeds " + world_text + ": expected a group of at most the world");
    if (world % size != 0) {
      throw InputError(where + " does not divide " + world_text +
                       ": expected blocks of consecutive ranks, every block of the same size");
    }
  };
  if (zero.shard_group_size > 0) check("mics_shard_size", zero.shard_group_size);
  if (zero.hpz_group_size > 1) check("zero_hpz_partition_size", zero.hpz_group_size);
}

TrainConfig load_train_config(const std::string& path, std::vector<std::string>* warnings) {
  return parse_train_config(read_json_file(path), path, warnings);
}

nlohmann::json train_config_to_json(const TrainConfig& config) {
  const ZeroConfig& zero = config.zero;
  // Each float as the double its shortest text reads as, so the JSON says 0.003.
  auto decimal = [](float value) { return std::strtod(shortest_text(value).c_str(), nullptr); };
  return {
      {"train_micro_batch_size_per_gpu", config.micro_batch_size},
      {"gradient_accumulation_steps", config.gradient_accumulation_steps},
      {"gradient_clipping", decimal(config.gradient_clipping)},
      {"bf16", {{"enabled", config.bf16}}},
      {"optimizer",
       {{"type", "AdamW"},
        {"params",
         {{"lr", decimal(config.adamw.lr)},
          {"betas", {decimal(config.adamw.beta1), decimal(config.adamw.beta2)}},
          {"eps", decimal(config.adamw.eps)},
          {"weight_decay", decimal(config.adamw.weight_decay)}}}}},
      {"zero_optimization",
       {{"stage", zero.stage},
        {"stage3_prefetch_bucket_size", zero.prefetch_bucket_elements},
        {"stage3_max_live_parameters", zero.max_live_elements},
        {"stage3_max_reuse_distance", zero.max_reuse_distance},
        {"stage3_param_persistence_threshold", zero.persistence_threshold},
        {"reduce_bucket_size", zero.reduce_bucket_elements},
        {"overlap_comm", zero.overlap_comm},
        {"zero3_placeholder_policy", placeholder_policy_name(zero.placeholder)},
        {"zero3_leaf_modules", zero.leaf_modules},
        {"offload_optimizer", {{"device", offload_device_name(zero.offload_optimizer)}}},
        {"offload_param", {{"device", offload_device_name(zero.offload_param)}}},
        {"mics_shard_size", zero.shard_group_size > 0 ? zero.shard_group_size : -1},
        {"zero_hpz_partition_size", zero.hpz_group_size}}},
      {"activation_checkpointing", {{"zero3_modules", config.checkpoint_modules}}},
  };
}

}  // namespace zero3
