// Target cases: generating them, and writing and reading their case directories (target_case.h).
#include "props/target/target_case.h"

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <ostream>

#include "core/base/atomic_file.h"
#include "core/base/json_reader.h"
#include "core/models/model_zoo.h"
#include "core/tensor/safetensors.h"
#include "props/model_facts.h"
#include "props/target/memory_verdict.h"

namespace zero3 {

namespace {

constexpr int kCaseVersion = 1;  // PROTOCOL.md's zero3_case
const std::vector<std::string> kCaseKeys = {"zero3_case", "model", "world", "steps", "seed", "micro_batch", "gas",
                                            "dtype", "optimizer", "gradient_clipping", "loss_scaling", "zero",
                                            "torch", "timeout_s"};
const std::vector<std::string> kOptimizerKeys = {"type", "lr", "betas", "eps", "weight_decay", "bias_correction"};
const std::vector<std::string> kZeroKeys = {"stage", "param_persistence_threshold", "prefetch_bucket_size",
                                            "reduce_bucket_size", "max_live_parameters", "max_reuse_distance",
                                            "overlap_comm", "leaf_modules"};

constexpr int64_t kElementsMax = int64_t{1} << 40;

// torch's optimizers and DDP refuse a model with nothing to train, as they should: no case has one.
bool has_trainable_parameter(const nlohmann::json& spec) {
  const BuiltModel built = build_model_from_spec(spec, "model_spec", {});
  for (const Parameter* param : built.model->parameters()) {
    if (param->requires_grad()) return true;
  }
  return false;
}

// Cross-entropy does not change when every logit moves by the same amount, so a last layer that
// adds one value to all of them (a sum_residual, a bias of one element) has a true gradient of 0,
// and AdamW turns each side's rounding noise (~1e-8) into steps of about lr in directions that
// differ: the references then "disagree" on weights nothing trained. Such a model trains on mse.
void avoid_shift_invariant_loss(nlohmann::json& spec) {
  const nlohmann::json& layers = spec.at("layers");
  if (spec.at("loss") != "cross_entropy" || layers.empty()) return;
  const nlohmann::json& last = layers.back();
  const bool shifts = last.at("type") == "sum_residual" ||
                      (last.at("type") == "bias" && shape_numel(last.at("shape").get<Shape>()) == 1);
  if (shifts) spec["loss"] = "mse";
}

// TargetSpace::levers: each lever off in most cases; the first choice of each draw is off, and
// RapidCheck shrinks a weighted element toward its first choice.
void draw_target_levers(const ModelFacts& facts, int world, TrainConfig& config) {
  ZeroConfig& zero = config.zero;
  zero.stage = *gen_weighted_element<int>({{6, 3}, {1, 1}, {1, 2}});
  zero.offload_optimizer = *gen_weighted_element<OffloadDevice>({{3, OffloadDevice::none}, {1, OffloadDevice::cpu}});
  if (zero.stage == 3) {
    // DeepSpeed offloads parameters at stage 3 only, and hpZ is a stage-3 scheme beside HSDP.
    zero.offload_param = *gen_weighted_element<OffloadDevice>({{3, OffloadDevice::none}, {1, OffloadDevice::cpu}});
    const std::vector<int> inner = divisors_inside(world);
    if (zero.shard_group_size == 0 && !inner.empty() && *gen_weighted_element<bool>({{1, false}, {1, true}})) {
      zero.hpz_group_size = *rc::gen::elementOf(inner);
    }
  }
  std::vector<std::string> types;
  std::copy_if(kCheckpointableTypes.begin(), kCheckpointableTypes.end(), std::back_inserter(types),
               [&](const std::string& type) {
                 return std::find(facts.checkpoint_candidates.begin(), facts.checkpoint_candidates.end(), type) !=
                        facts.checkpoint_candidates.end();
               });
  if (!types.empty() && *gen_weighted_element<bool>({{2, false}, {1, true}})) {
    const int64_t count = *gen_weighted_element<int64_t>({{3, 1}, {1, 2}});
    for (int64_t i = 0; i < count; ++i) {
      const std::string type = *rc::gen::elementOf(types);
      if (std::find(config.checkpoint_modules.begin(), config.checkpoint_modules.end(), type) ==
          config.checkpoint_modules.end()) {
        config.checkpoint_modules.push_back(type);
      }
    }
  }
}

const char* offload_name(OffloadDevice device) { return device == OffloadDevice::cpu ? "cpu" : "none"; }

OffloadDevice read_offload(const JsonReader& reader) {
  return reader.as_choice({"none", "cpu"}) == "cpu" ? OffloadDevice::cpu : OffloadDevice::none;
}

}  // namespace

rc::Gen<TargetCase> gen_target_case(const GenLimits& limits, const TargetSpace& space) {
  return rc::gen::exec([=] {
    TargetCase target_case;
    FuzzCase& run = target_case.run;
    const int max_ranks = std::max(1, limits.max_ranks);
    // W = 2 is where a runner's ranks are cheapest and most bugs already show. HSDP needs a block
    // strictly inside the world: under --target-hsdp, worlds that have one (4, 6, 8, ...).
    std::vector<int> worlds_with_blocks;
    for (int world = 4; world <= max_ranks; ++world) {
      if (!divisors_inside(world).empty()) worlds_with_blocks.push_back(world);
    }
    run.world = space.shard_groups && !worlds_with_blocks.empty()
                    ? *rc::gen::elementOf(worlds_with_blocks)
                    : *rc::gen::weightedOneOf<int>(
                          {{3, rc::gen::just(std::min(2, max_ranks))}, {2, rc::gen::inRange(1, max_ranks + 1)}});
    run.model_spec = *rc::gen::suchThat(
        gen_model_spec(run.world, {.moe = true, .raw_foreign = true, .require_moe = false, .transformer = space.transformer},
                       /*trap_motif=*/true),
        has_trainable_parameter);
    avoid_shift_invariant_loss(run.model_spec);
    const ModelFacts facts = model_facts(run.model_spec, {});
    // MoE routes differently on each rank: a leaf on W > 1, as a DeepSpeed user must make it. The
    // levers are drawn below, for the runners' case.json fields only (TargetSpace::levers).
    run.config = *gen_train_config(facts, {.require_moe_leaf = facts.has_moe && run.world > 1, .levers = false});
    run.config.bf16 = false;
    // Only "moe" maps onto the runners' torch modules (their containers are named otherwise than
    // zero3's sequential bodies), so other leaf choices stay with the zero3-only properties.
    std::erase_if(run.config.zero.leaf_modules, [](const std::string& leaf) { return leaf != "moe"; });
    // The config draws no group (no world given): HSDP here, hpZ with the levers below.
    if (space.shard_groups) {
      // HSDP blocks strictly inside the world (G = 1 and G = W are DDP and flat sharding), in 2 of
      // 3 cases where there are any; shrinks toward flat sharding.
      const std::vector<int> inner = divisors_inside(run.world);
      if (!inner.empty() && *gen_weighted_element<bool>({{1, false}, {2, true}})) {
        run.config.zero.shard_group_size = *rc::gen::elementOf(inner);
      }
    }
    run.seed = static_cast<uint64_t>(*rc::gen::noShrink(gen_uniform(0, 1'000'000'000)));
    run.steps = *gen_weighted_element<int64_t>({{2, 1}, {3, 2}, {1, 3}});
    // The cached reference bypasses every framework's view of the read (issue #930's class), where
    // DeepSpeed gathers an attribute read on access: drawn five times as often as each other way.
    target_case.raw_access = *gen_weighted_element<std::string>(
        {{5, kRawAccessWays[0]}, {1, kRawAccessWays[1]}, {1, kRawAccessWays[2]}, {1, kRawAccessWays[3]}});
    if (space.levers) draw_target_levers(facts, run.world, run.config);
    if (space.bf16) run.config.bf16 = *gen_weighted_element<bool>({{2, false}, {1, true}});
    if (space.memory) target_case.measure_memory = *gen_weighted_element<bool>({{3, false}, {1, true}});
    if (target_case.measure_memory) run.steps = std::max(run.steps, kMemoryStepsMin);
    return target_case;
  });
}

nlohmann::json target_case_json(const TargetCase& target_case) {
  const FuzzCase& run = target_case.run;
  const TrainConfig& config = run.config;
  const ZeroConfig& zero = config.zero;
  nlohmann::json json = {
      {"zero3_case", kCaseVersion},
      {"model", run.model_spec},
      {"world", run.world},
      {"steps", run.steps},
      {"seed", run.seed},
      {"micro_batch", config.micro_batch_size},
      {"gas", config.gradient_accumulation_steps},
      {"dtype", config.bf16 ? "bf16" : "f32"},
      {"optimizer",
       {{"type", "AdamW"},
        {"lr", config.adamw.lr},
        {"betas", {config.adamw.beta1, config.adamw.beta2}},
        {"eps", config.adamw.eps},
        {"weight_decay", config.adamw.weight_decay},
        {"bias_correction", true}}},
      {"gradient_clipping", config.gradient_clipping},
      {"loss_scaling", "off"},
      {"zero",
       {{"stage", zero.stage},
        {"param_persistence_threshold", zero.persistence_threshold},
        {"prefetch_bucket_size", zero.prefetch_bucket_elements},
        {"reduce_bucket_size", zero.reduce_bucket_elements},
        {"max_live_parameters", zero.max_live_elements},
        {"max_reuse_distance", zero.max_reuse_distance},
        {"overlap_comm", zero.overlap_comm},
        {"leaf_modules", zero.leaf_modules}}},
      {"torch", {{"raw_access", target_case.raw_access}, {"raw_gradient", target_case.raw_gradient}}},
      {"timeout_s", target_case.timeout_s},
  };
  // Optional (PROTOCOL.md), written only when on: a case without them stays byte for byte what it
  // was before they existed.
  if (zero.shard_group_size > 0) json["zero"]["shard_group_size"] = zero.shard_group_size;
  if (zero.offload_optimizer != OffloadDevice::none) json["zero"]["offload_optimizer"] = offload_name(zero.offload_optimizer);
  if (zero.offload_param != OffloadDevice::none) json["zero"]["offload_param"] = offload_name(zero.offload_param);
  if (zero.hpz_group_size > 1) json["zero"]["hpz_partition_size"] = zero.hpz_group_size;
  if (!config.checkpoint_modules.empty()) json["activation_checkpointing"] = config.checkpoint_modules;
  if (target_case.measure_memory) json["measure_memory"] = true;
  return json;
}

TargetCase target_case_from_json(const nlohmann::json& json, const std::string& source) {
  const JsonReader root(json, source);
  std::vector<std::string> case_keys = kCaseKeys;
  case_keys.push_back("activation_checkpointing");  // optional: layer types run under checkpointing
  case_keys.push_back("measure_memory");            // optional: per-step tensor bytes (memory_verdict.h)
  root.expect_only_keys(case_keys);
  for (const std::string& key : kCaseKeys) root.at(key);  // every key is required
  if (root.at("zero3_case").as_int(0, 1 << 20) != kCaseVersion) root.at("zero3_case").fail("1");
  const bool bf16 = root.at("dtype").as_choice({"f32", "bf16"}) == "bf16";
  root.at("loss_scaling").as_choice({"off"});
  TargetCase target_case;
  FuzzCase& run = target_case.run;
  root.at("model").expect_object();
  run.model_spec = json.at("model");
  run.world = static_cast<int>(root.at("world").as_int(1, 1024));
  run.steps = root.at("steps").as_int(1, 1'000'000);
  run.seed = static_cast<uint64_t>(root.at("seed").as_int(0, int64_t{1} << 62));
  TrainConfig& config = run.config;
  config.bf16 = bf16;
  config.micro_batch_size = root.at("micro_batch").as_int(1, 1 << 20);
  config.gradient_accumulation_steps = root.at("gas").as_int(1, 1 << 20);
  config.gradient_clipping = static_cast<float>(root.at("gradient_clipping").as_number(0.0, 1e30));

  const JsonReader optimizer = root.at("optimizer");
  optimizer.expect_only_keys(kOptimizerKeys);
  optimizer.at("type").as_choice({"AdamW"});
  if (!optimizer.at("bias_correction").as_bool()) optimizer.at("bias_correction").fail("true");
  config.adamw.lr = static_cast<float>(optimizer.at("lr").as_number(0.0, 1e6));
  if (optimizer.at("betas").size() != 2) optimizer.at("betas").fail("[beta1, beta2]");
  config.adamw.beta1 = static_cast<float>(optimizer.at("betas").at(size_t{0}).as_number(0.0, 1.0));
  config.adamw.beta2 = static_cast<float>(optimizer.at("betas").at(size_t{1}).as_number(0.0, 1.0));
  config.adamw.eps = static_cast<float>(optimizer.at("eps").as_number(0.0, 1.0));
  config.adamw.weight_decay = static_cast<float>(optimizer.at("weight_decay").as_number(0.0, 1e6));

  const JsonReader zero_json = root.at("zero");
  std::vector<std::string> zero_keys = kZeroKeys;
  // Optional: HSDP's block, the offloads, hpZ's block.
  zero_keys.insert(zero_keys.end(), {"shard_group_size", "offload_optimizer", "offload_param", "hpz_partition_size"});
  zero_json.expect_only_keys(zero_keys);
  ZeroConfig& zero = config.zero;
  zero.stage = static_cast<int>(zero_json.at("stage").as_int(1, 3));
  zero.persistence_threshold = zero_json.at("param_persistence_threshold").as_int(0, kElementsMax);
  zero.prefetch_bucket_elements = zero_json.at("prefetch_bucket_size").as_int(0, kElementsMax);
  zero.reduce_bucket_elements = zero_json.at("reduce_bucket_size").as_int(1, kElementsMax);
  zero.max_live_elements = zero_json.at("max_live_parameters").as_int(0, kElementsMax);
  zero.max_reuse_distance = zero_json.at("max_reuse_distance").as_int(0, kElementsMax);
  zero.overlap_comm = zero_json.at("overlap_comm").as_bool();
  const JsonReader leaves = zero_json.at("leaf_modules");
  for (size_t index = 0; index < leaves.size(); ++index) zero.leaf_modules.push_back(leaves.at(index).as_string());
  if (zero_json.has("shard_group_size")) {
    const JsonReader group = zero_json.at("shard_group_size");
    zero.shard_group_size = static_cast<int>(group.as_int(0, run.world));
    if (zero.shard_group_size > 0 && run.world % zero.shard_group_size != 0) group.fail("0 or a divisor of /world");
  }
  if (zero_json.has("offload_optimizer")) zero.offload_optimizer = read_offload(zero_json.at("offload_optimizer"));
  if (zero_json.has("offload_param")) {
    zero.offload_param = read_offload(zero_json.at("offload_param"));
    if (zero.offload_param != OffloadDevice::none && zero.stage != 3) {
      zero_json.at("offload_param").fail("\"none\" below stage 3 (parameters are offloaded at stage 3 only)");
    }
  }
  if (zero_json.has("hpz_partition_size")) {
    const JsonReader hpz = zero_json.at("hpz_partition_size");
    zero.hpz_group_size = std::max(1, static_cast<int>(hpz.as_int(0, run.world)));
    const bool inside = zero.hpz_group_size > 1;
    if (inside && (run.world % zero.hpz_group_size != 0 || zero.hpz_group_size == run.world)) {
      hpz.fail("0, 1 or a divisor of /world below it");
    }
    if (inside && (zero.stage != 3 || zero.shard_group_size > 0)) hpz.fail("0 or 1 unless stage 3 without shard_group_size");
  }
  if (root.has("measure_memory")) {
    target_case.measure_memory = root.at("measure_memory").as_bool();
    if (target_case.measure_memory && run.steps < kMemoryStepsMin) {
      root.at("measure_memory").fail("false with fewer than " + std::to_string(kMemoryStepsMin) +
                                     " /steps (memory growth is judged over 4 steps or more)");
    }
  }
  if (root.has("activation_checkpointing")) {
    const JsonReader modules = root.at("activation_checkpointing");
    for (size_t index = 0; index < modules.size(); ++index) {
      config.checkpoint_modules.push_back(modules.at(index).as_choice(kCheckpointableTypes));
    }
  }

  const JsonReader torch = root.at("torch");
  torch.expect_only_keys({"raw_access", "raw_gradient"});
  target_case.raw_access = torch.at("raw_access").as_choice(kRawAccessWays);
  target_case.raw_gradient = torch.at("raw_gradient").as_bool();
  target_case.timeout_s = root.at("timeout_s").as_number(1.0, 86'400.0);
  // The model must build: a bad spec is the case file's error, not the framework's.
  build_model_from_spec(run.model_spec, source + ": /model", {.seed = run.seed});
  return target_case;
}

TargetCase read_target_case(const std::string& path) {
  const nlohmann::json json = read_json_file(path);
  // A saved finding (traces/findings/) holds its case under "case", beside its signature.
  if (json.is_object() && !json.contains("zero3_case") && json.contains("case")) {
    return target_case_from_json(json["case"], path + " (its \"case\")");
  }
  return target_case_from_json(json, path);
}

void write_target_case(const TargetCase& target_case, const std::string& directory) {
  const FuzzCase& run = target_case.run;
  std::filesystem::create_directories(directory);
  const std::filesystem::path root(directory);
  BuiltModel built = build_model_from_spec(
      run.model_spec, "model_spec", {.seed = run.seed, .micro_steps_per_step = run.config.gradient_accumulation_steps});
  initialize_model(built, run.seed);
  std::vector<NamedTensor> weights;
  for (const Parameter* param : built.model->parameters()) weights.push_back({param->name(), param->data});
  write_safetensors((root / "init.safetensors").string(), weights, {{"format", "pt"}});
  const int64_t rows = run.world * run.config.micro_batch_size;
  write_safetensors((root / "data.safetensors").string(),
                    global_batch_tensors(built, run.steps, run.config.gradient_accumulation_steps, rows));
  // case.json last: a directory with a case.json is a whole case.
  write_file_atomically((root / "case.json").string(), target_case_json(target_case).dump(1) + "\n");
}

std::string describe(const TargetCase& target_case) {
  return describe(target_case.run) + ", " + target_case.raw_access + (target_case.measure_memory ? ", memory measured" : "");
}

void showValue(const TargetCase& target_case, std::ostream& os) { os << target_case_json(target_case).dump(); }

}  // namespace zero3
