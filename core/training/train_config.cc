// DeepSpeed-style config parsing with range checks and unknown-key warnings.
#include "core/training/train_config.h"

#include <limits>

#include "core/base/errors.h"
#include "core/base/json_reader.h"

namespace zero3 {

namespace {

constexpr int64_t kElementsMax = std::numeric_limits<int64_t>::max() / 8;

// Keys of a DeepSpeed config that zero3 reads; anything else is reported, never silently used.
const std::vector<std::string> kTopLevelKeys = {
    "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "gradient_clipping", "bf16",
    "optimizer", "zero_optimization"};
const std::vector<std::string> kZeroKeys = {
    "stage", "stage3_prefetch_bucket_size", "stage3_max_live_parameters", "stage3_max_reuse_distance",
    "stage3_param_persistence_threshold", "reduce_bucket_size", "overlap_comm", "zero3_placeholder_policy",
    "zero3_leaf_modules"};

void warn_unknown_keys(const JsonReader& object, const std::vector<std::string>& known,
                       std::vector<std::string>* warnings) {
  for (const auto& key : object.keys()) {
    bool is_known = false;
    for (const auto& name : known) is_known = is_known || name == key;
    if (!is_known && warnings) warnings->push_back(object.path() + "/" + key + " is not used by zero3");
  }
}

void parse_optimizer(const JsonReader& optimizer, TrainConfig& config, std::vector<std::string>* warnings) {
  warn_unknown_keys(optimizer, {"type", "params"}, warnings);
  if (optimizer.has("type")) optimizer.at("type").as_choice({"AdamW", "adamw", "Adam", "adam"});
  if (!optimizer.has("params")) return;
  const JsonReader params = optimizer.at("params");
  warn_unknown_keys(params, {"lr", "betas", "eps", "weight_decay"}, warnings);
  AdamWHyper& adamw = config.adamw;
  if (params.has("lr")) adamw.lr = static_cast<float>(params.at("lr").as_number(0.0, 10.0));
  if (params.has("eps")) adamw.eps = static_cast<float>(params.at("eps").as_number(0.0, 1.0));
  if (params.has("weight_decay")) adamw.weight_decay = static_cast<float>(params.at("weight_decay").as_number(0.0, 10.0));
  if (params.has("betas")) {
    const JsonReader betas = params.at("betas");
    if (betas.size() != 2) betas.fail("an array of two numbers [beta1, beta2]");
    adamw.beta1 = static_cast<float>(betas.at(0).as_number(0.0, 0.999999));
    adamw.beta2 = static_cast<float>(betas.at(1).as_number(0.0, 0.999999));
  }
}

void parse_zero(const JsonReader& zero_json, ZeroConfig& zero, std::vector<std::string>* warnings) {
  warn_unknown_keys(zero_json, kZeroKeys, warnings);
  if (zero_json.has("stage")) {
    const int64_t stage = zero_json.at("stage").as_int(0, 3);
    if (stage != 0 && stage != 3) zero_json.at("stage").fail("0 (DDP) or 3 (ZeRO-3); stages 1 and 2 are not built");
    zero.stage = static_cast<int>(stage);
  }
  auto read_elements = [&](const char* key, int64_t& out, int64_t min) {
    if (zero_json.has(key)) out = zero_json.at(key).as_int(min, kElementsMax);
  };
  read_elements("stage3_prefetch_bucket_size", zero.prefetch_bucket_elements, 0);
  read_elements("stage3_max_live_parameters", zero.max_live_elements, 0);
  read_elements("stage3_max_reuse_distance", zero.max_reuse_distance, 0);
  read_elements("stage3_param_persistence_threshold", zero.persistence_threshold, 0);
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
}

}  // namespace

TrainConfig parse_train_config(const nlohmann::json& json, const std::string& source,
                               std::vector<std::string>* warnings) {
  TrainConfig config;
  const JsonReader root(json, source);
  root.expect_object();
  warn_unknown_keys(root, kTopLevelKeys, warnings);
  if (root.has("train_micro_batch_size_per_gpu")) {
    config.micro_batch_size = root.at("train_micro_batch_size_per_gpu").as_int(1, 1 << 20);
  }
  if (root.has("gradient_accumulation_steps")) {
    config.gradient_accumulation_steps = root.at("gradient_accumulation_steps").as_int(1, 1 << 20);
  }
  if (root.has("gradient_clipping")) {
    config.gradient_clipping = static_cast<float>(root.at("gradient_clipping").as_number(0.0, 1e30));
  }
  if (root.has("bf16")) {
    const JsonReader bf16 = root.at("bf16");
    warn_unknown_keys(bf16, {"enabled"}, warnings);
    if (bf16.has("enabled")) config.bf16 = bf16.at("enabled").as_bool();
  }
  if (root.has("optimizer")) parse_optimizer(root.at("optimizer"), config, warnings);
  if (root.has("zero_optimization")) parse_zero(root.at("zero_optimization"), config.zero, warnings);
  return config;
}

TrainConfig load_train_config(const std::string& path, std::vector<std::string>* warnings) {
  return parse_train_config(read_json_file(path), path, warnings);
}

nlohmann::json train_config_to_json(const TrainConfig& config) {
  const ZeroConfig& zero = config.zero;
  return {
      {"train_micro_batch_size_per_gpu", config.micro_batch_size},
      {"gradient_accumulation_steps", config.gradient_accumulation_steps},
      {"gradient_clipping", config.gradient_clipping},
      {"bf16", {{"enabled", config.bf16}}},
      {"optimizer",
       {{"type", "AdamW"},
        {"params",
         {{"lr", config.adamw.lr},
          {"betas", {config.adamw.beta1, config.adamw.beta2}},
          {"eps", config.adamw.eps},
          {"weight_decay", config.adamw.weight_decay}}}}},
      {"zero_optimization",
       {{"stage", zero.stage},
        {"stage3_prefetch_bucket_size", zero.prefetch_bucket_elements},
        {"stage3_max_live_parameters", zero.max_live_elements},
        {"stage3_max_reuse_distance", zero.max_reuse_distance},
        {"stage3_param_persistence_threshold", zero.persistence_threshold},
        {"reduce_bucket_size", zero.reduce_bucket_elements},
        {"overlap_comm", zero.overlap_comm},
        {"zero3_placeholder_policy", placeholder_policy_name(zero.placeholder)},
        {"zero3_leaf_modules", zero.leaf_modules}}},
  };
}

}  // namespace zero3
