// A DeepSpeed config is accepted as is; bad values name the file, the JSON path and the range.
#include "core/training/train_config.h"

#include <gtest/gtest.h>

#include "core/base/errors.h"

namespace zero3 {
namespace {

std::string error_of(const nlohmann::json& json) {
  try {
    parse_train_config(json, "ds_config.json", nullptr);
  } catch (const InputError& error) {
    return error.what();
  }
  return "";
}

TEST(TrainConfig, ReadsADeepSpeedStage3Config) {
  const auto json = nlohmann::json::parse(R"({
    "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4, "gradient_clipping": 0.5,
    "bf16": {"enabled": true},
    "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "betas": [0.8, 0.9], "eps": 1e-6, "weight_decay": 0.1}},
    "zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 5e7, "stage3_max_live_parameters": 1000,
                          "stage3_max_reuse_distance": 10, "stage3_param_persistence_threshold": 0,
                          "reduce_bucket_size": 64, "overlap_comm": false}})");
  std::vector<std::string> warnings;
  const TrainConfig config = parse_train_config(json, "ds_config.json", &warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(config.micro_batch_size, 2);
  EXPECT_EQ(config.gradient_accumulation_steps, 4);
  EXPECT_FLOAT_EQ(config.gradient_clipping, 0.5f);
  EXPECT_TRUE(config.bf16);
  EXPECT_FLOAT_EQ(config.adamw.lr, 0.01f);
  EXPECT_FLOAT_EQ(config.adamw.beta1, 0.8f);
  EXPECT_FLOAT_EQ(config.adamw.weight_decay, 0.1f);
  EXPECT_EQ(config.zero.prefetch_bucket_elements, 50'000'000);
  EXPECT_EQ(config.zero.max_live_elements, 1000);
  EXPECT_EQ(config.zero.reduce_bucket_elements, 64);
  EXPECT_FALSE(config.zero.overlap_comm);
}

// DeepSpeed keys zero3 has no use for (a Trainer config holds a dozen) are one warning, not a
// dozen that bury the one that matters; a key that is neither zero3's nor DeepSpeed's is its own.
TEST(TrainConfig, DeepSpeedKeysZero3DoesNotUseAreOneGroupedWarningWithTheirPaths) {
  std::vector<std::string> warnings;
  parse_train_config(nlohmann::json::parse(R"({"steps_per_print": 10, "zero_optimization": {"sub_group_size": 1},
                                               "my_own_key": 1})"),
                     "ds_config.json", &warnings);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("/my_own_key is neither a DeepSpeed key nor one zero3 reads"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[1].find("zero3 does not use 2 DeepSpeed keys of this config"), std::string::npos) << warnings[1];
  EXPECT_NE(warnings[1].find("/steps_per_print, /zero_optimization/sub_group_size"), std::string::npos) << warnings[1];
}

// DeepSpeed 0.19.8 validates zero_optimization (and its offload sections, bf16, fp16) strictly:
// a key it does not know there is an error in DeepSpeed, so it is one here, with the key meant.
TEST(TrainConfig, AKeyDeepSpeedWouldRefuseInAStrictSectionIsAnErrorWithDidYouMean) {
  const std::string typo = error_of(nlohmann::json::parse(R"({"zero_optimization": {"stage3_prefetch_bucket_sise": 5}})"));
  EXPECT_NE(typo.find("ds_config.json: at /zero_optimization/stage3_prefetch_bucket_sise: not a DeepSpeed key: "
                      "did you mean stage3_prefetch_bucket_size?"), std::string::npos) << typo;
  EXPECT_NE(typo.find("DeepSpeed 0.19.8 refuses"), std::string::npos) << typo;
  EXPECT_NE(error_of(nlohmann::json::parse(R"({"bf16": {"enabeld": true}})")).find("did you mean enabled?"),
            std::string::npos);
  EXPECT_NE(error_of(nlohmann::json::parse(R"({"zero_optimization": {"offload_param": {"devise": "cpu"}}})"))
                .find("/zero_optimization/offload_param/devise"),
            std::string::npos);
  // A key near none: refused with what was expected, never called "ignored" in an error.
  const std::string unknown = error_of(nlohmann::json::parse(R"({"zero_optimization": {"overlap_ce_threshold": 1}})"));
  EXPECT_NE(unknown.find("at /zero_optimization/overlap_ce_threshold: neither a DeepSpeed key nor one zero3 reads; "
                         "expected a key DeepSpeed accepts in zero_optimization"),
            std::string::npos) << unknown;
  EXPECT_EQ(unknown.find("ignored"), std::string::npos) << unknown;
  // A key DeepSpeed removed is refused by DeepSpeed too.
  EXPECT_NE(error_of(nlohmann::json::parse(R"({"zero_optimization": {"zeropp_loco_param": {}}})"))
                .find("/zero_optimization/zeropp_loco_param"),
            std::string::npos);
  // zero3's own keys in those sections stay readable, and the top level stays lenient as DeepSpeed's is.
  std::vector<std::string> warnings;
  parse_train_config(nlohmann::json::parse(R"({"zero_optimization": {"zero3_leaf_modules": ["moe"]}, "stepz": 1})"),
                     "ds_config.json", &warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("/stepz"), std::string::npos) << warnings[0];
}

// train_batch_size as DeepSpeed reads it: derived factors where the file leaves them out, and an
// error where the three disagree; "auto" is what Trainer writes, micro-batch x accumulation x world.
TEST(TrainConfig, TrainBatchSizeIsCheckedAndCompletedAsDeepSpeedDoes) {
  std::vector<std::string> warnings;
  TrainConfig config = parse_train_config(
      nlohmann::json::parse(R"({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 8})"),
      "ds_config.json", &warnings);
  EXPECT_TRUE(warnings.empty());
  try {
    check_batch_sizes(config, 8, "ds_config.json");
    FAIL() << "64 against 4 x 8 x 8 was accepted";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("ds_config.json: at /train_batch_size: 64 is not train_micro_batch_size_per_gpu "
                                             "x gradient_accumulation_steps x world size = 4 x 8 x 8 = 256"),
              std::string::npos) << error.what();
  }
  config = parse_train_config(nlohmann::json::parse(R"({"train_batch_size": 64, "gradient_accumulation_steps": 2})"),
                              "ds_config.json", &warnings);
  check_batch_sizes(config, 8, "ds_config.json");
  EXPECT_EQ(config.micro_batch_size, 4);  // 64 / 2 / 8, as DeepSpeed derives it
  config = parse_train_config(nlohmann::json::parse(R"({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": 3})"),
                              "ds_config.json", &warnings);
  check_batch_sizes(config, 8, "ds_config.json");
  EXPECT_EQ(config.train_batch_size, 24);
  EXPECT_NE(auto_resolutions(config).find("train_batch_size=24"), std::string::npos) << auto_resolutions(config);
}

// "auto" bucket sizes as transformers' DeepSpeed integration fills them from the hidden size.
TEST(TrainConfig, AutoBucketSizesFollowTheHiddenSizeAsHuggingFaceTrainerFillsThem) {
  std::vector<std::string> warnings;
  TrainConfig config = parse_train_config(nlohmann::json::parse(R"({"zero_optimization": {"reduce_bucket_size": "auto",
      "stage3_prefetch_bucket_size": "auto", "stage3_param_persistence_threshold": "auto"}})"), "c", &warnings);
  EXPECT_TRUE(resolve_auto_from_hidden_size(config, 4096));
  EXPECT_EQ(config.zero.reduce_bucket_elements, 16'777'216);
  EXPECT_EQ(config.zero.prefetch_bucket_elements, 15'099'494);
  EXPECT_EQ(config.zero.persistence_threshold, 40'960);
  // A number the file gives stays; no hidden size fills nothing.
  config = parse_train_config(nlohmann::json::parse(R"({"zero_optimization": {"reduce_bucket_size": 7}})"), "c", &warnings);
  EXPECT_FALSE(resolve_auto_from_hidden_size(config, 4096));
  EXPECT_EQ(config.zero.reduce_bucket_elements, 7);
}

TEST(TrainConfig, InvalidValuesNameFilePathAndRange) {
  const std::string negative = error_of(nlohmann::json::parse(R"({"gradient_accumulation_steps": 0})"));
  EXPECT_NE(negative.find("ds_config.json"), std::string::npos);
  EXPECT_NE(negative.find("/gradient_accumulation_steps"), std::string::npos);
  EXPECT_NE(negative.find("[1,"), std::string::npos);

  const std::string stage = error_of(nlohmann::json::parse(R"({"zero_optimization": {"stage": 4}})"));
  EXPECT_NE(stage.find("/zero_optimization/stage"), std::string::npos);

  const std::string betas = error_of(nlohmann::json::parse(R"({"optimizer": {"params": {"betas": [0.9]}}})"));
  EXPECT_NE(betas.find("/optimizer/params/betas"), std::string::npos);

  const std::string type = error_of(nlohmann::json::parse(R"({"bf16": {"enabled": "yes"}})"));
  EXPECT_NE(type.find("/bf16/enabled"), std::string::npos);
  EXPECT_NE(type.find("true or false"), std::string::npos);
}

TEST(TrainConfig, AutoIsAcceptedWhereHuggingFaceWritesItAndResolvedByTheCaller) {
  const auto json = nlohmann::json::parse(R"({
    "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
    "bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"},
    "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
    "zero_optimization": {"stage": 3, "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
                          "stage3_param_persistence_threshold": "auto"}})");
  std::vector<std::string> warnings;
  const TrainConfig config = parse_train_config(json, "ds_config.json", &warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(config.auto_keys.size(), 12u);
  EXPECT_EQ(config.micro_batch_origin, SettingOrigin::file_auto);
  EXPECT_EQ(config.gas_origin, SettingOrigin::file_auto);
  EXPECT_EQ(config.precision_origin, SettingOrigin::file_auto);
  EXPECT_EQ(config.micro_batch_size, TrainConfig{}.micro_batch_size);  // left for the caller to resolve
  const std::string resolved = auto_resolutions(config);
  EXPECT_NE(resolved.find("train_micro_batch_size_per_gpu=4"), std::string::npos) << resolved;
  EXPECT_NE(resolved.find("bf16/enabled=false"), std::string::npos) << resolved;
  EXPECT_NE(resolved.find("optimizer/params/lr=0.003,"), std::string::npos) << resolved;  // the float's shortest form
  EXPECT_NE(resolved.find("optimizer/params/betas=[0.9, 0.95]"), std::string::npos) << resolved;
}

TEST(TrainConfig, AutoElsewhereIsAnErrorNamingThePath) {
  const std::string stage = error_of(nlohmann::json::parse(R"({"zero_optimization": {"stage": "auto"}})"));
  EXPECT_NE(stage.find("/zero_optimization/stage"), std::string::npos) << stage;
  const std::string overlap = error_of(nlohmann::json::parse(R"({"zero_optimization": {"overlap_comm": "auto"}})"));
  EXPECT_NE(overlap.find("/zero_optimization/overlap_comm: expected true or false, got \"auto\""), std::string::npos)
      << overlap;
}

TEST(TrainConfig, Fp16IsRefusedNotComputedAsF32) {
  const std::string fp16 = error_of(nlohmann::json::parse(R"({"fp16": {"enabled": true, "loss_scale": 0}})"));
  EXPECT_NE(fp16.find("/fp16/enabled"), std::string::npos) << fp16;
  EXPECT_NE(fp16.find("bf16"), std::string::npos) << fp16;
  std::vector<std::string> warnings;
  const TrainConfig off = parse_train_config(nlohmann::json::parse(R"({"fp16": {"enabled": false}})"), "c", &warnings);
  EXPECT_FALSE(off.bf16);
  EXPECT_EQ(off.precision_origin, SettingOrigin::file);
}

TEST(TrainConfig, OriginsSayWhichSettingsTheFileGave) {
  std::vector<std::string> warnings;
  const TrainConfig none = parse_train_config(nlohmann::json::object(), "c", &warnings);
  EXPECT_EQ(none.micro_batch_origin, SettingOrigin::unset);
  EXPECT_EQ(none.precision_origin, SettingOrigin::unset);
  const TrainConfig given = parse_train_config(
      nlohmann::json::parse(R"({"train_micro_batch_size_per_gpu": 8, "bf16": {"enabled": false}})"), "c", &warnings);
  EXPECT_EQ(given.micro_batch_origin, SettingOrigin::file);
  EXPECT_EQ(given.gas_origin, SettingOrigin::unset);
  EXPECT_EQ(given.precision_origin, SettingOrigin::file);
}

TEST(TrainConfig, UnreadKeysGetAdviceATypoItsKeyAndADeepSpeedKeyWhatZero3DoesInstead) {
  std::vector<std::string> warnings;
  parse_train_config(nlohmann::json::parse(R"({"optimizer": {"params": {"lrr": 0.1}},
      "zero_optimization": {"offload_optimizer": {"device": "cpu", "ratio": 0.5}}})"), "ds_config.json", &warnings);
  ASSERT_EQ(warnings.size(), 2u);  // in the JSON object's key order
  EXPECT_NE(warnings[0].find("did you mean lr?"), std::string::npos) << warnings[0];
  // A feature zero3 has not built is said on its own: the run it predicts differs from DeepSpeed's.
  EXPECT_NE(warnings[1].find("/zero_optimization/offload_optimizer/ratio is a DeepSpeed key zero3 does not implement yet"),
            std::string::npos) << warnings[1];
}

TEST(TrainConfig, ReadsEachStage3SettingUnderEitherOfDeepSpeedsNames) {
  std::vector<std::string> warnings;
  const TrainConfig config = parse_train_config(
      nlohmann::json::parse(R"({"zero_optimization": {"prefetch_bucket_size": 7, "param_persistence_threshold": 9}})"),
      "c", &warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(config.zero.prefetch_bucket_elements, 7);
  EXPECT_EQ(config.zero.persistence_threshold, 9);
  const std::string both = error_of(nlohmann::json::parse(
      R"({"zero_optimization": {"max_live_parameters": 1, "stage3_max_live_parameters": 2}})"));
  EXPECT_NE(both.find("/zero_optimization/max_live_parameters"), std::string::npos) << both;
}

TEST(TrainConfig, RoundTripsThroughItsJsonForm) {
  TrainConfig config;
  config.gradient_accumulation_steps = 3;
  config.zero.placeholder = PlaceholderPolicy::scalar;
  std::vector<std::string> warnings;
  const TrainConfig again = parse_train_config(train_config_to_json(config), "roundtrip", &warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(again.gradient_accumulation_steps, 3);
  EXPECT_EQ(again.zero.placeholder, PlaceholderPolicy::scalar);
  EXPECT_EQ(again.adamw.lr, config.adamw.lr);
  // Floats are written as the shortest decimal that reads back as the same float.
  EXPECT_EQ(train_config_to_json(config).at("optimizer").at("params").at("lr").dump(), "0.003");
}

TEST(TrainConfig, ReadsOffloadDevicesAndCheckpointedModules) {
  std::vector<std::string> warnings;
  const TrainConfig config = parse_train_config(nlohmann::json::parse(R"({
      "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": true},
                            "offload_param": {"device": "cpu"}},
      "activation_checkpointing": {"zero3_modules": ["block", "h.0"], "partition_activations": false}})"),
                                                "ds_config.json", &warnings);
  EXPECT_EQ(config.zero.offload_optimizer, OffloadDevice::cpu);
  EXPECT_EQ(config.zero.offload_param, OffloadDevice::cpu);
  EXPECT_EQ(config.checkpoint_modules, (std::vector<std::string>{"block", "h.0"}));
  // DeepSpeed's tuning keys are read by DeepSpeed, not by zero3: said, not silently taken.
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("/activation_checkpointing/partition_activations"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[1].find("/zero_optimization/offload_optimizer/pin_memory"), std::string::npos) << warnings[1];
  const TrainConfig again = parse_train_config(train_config_to_json(config), "roundtrip", &warnings);
  EXPECT_EQ(again.zero.offload_optimizer, OffloadDevice::cpu);
  EXPECT_EQ(again.checkpoint_modules, config.checkpoint_modules);
}

TEST(TrainConfig, NvmeOffloadIsRefusedNamingTheKeyAndWhatToUse) {
  const std::string nvme =
      error_of(nlohmann::json::parse(R"({"zero_optimization": {"offload_param": {"device": "nvme"}}})"));
  EXPECT_NE(nvme.find("ds_config.json: at /zero_optimization/offload_param/device"), std::string::npos) << nvme;
  EXPECT_NE(nvme.find("not built"), std::string::npos) << nvme;
  const std::string other =
      error_of(nlohmann::json::parse(R"({"zero_optimization": {"offload_optimizer": {"device": "gpu"}}})"));
  EXPECT_NE(other.find("/zero_optimization/offload_optimizer/device"), std::string::npos) << other;
}

TEST(TrainConfig, CombinationsDeepSpeedRefusesAreInputErrorsNamingTheKey) {
  TrainConfig config;
  config.zero.stage = 2;
  config.zero.offload_param = OffloadDevice::cpu;
  try {
    check_lever_combinations(config, "ds_config.json");
    FAIL() << "offload_param at stage 2 accepted";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("/zero_optimization/offload_param/device: \"cpu\" needs stage 3"),
              std::string::npos) << error.what();
  }
  config.zero.offload_param = OffloadDevice::none;
  config.zero.offload_optimizer = OffloadDevice::cpu;
  EXPECT_NO_THROW(check_lever_combinations(config, "ds_config.json"));
  config.zero.stage = 0;
  EXPECT_THROW(check_lever_combinations(config, "ds_config.json"), InputError);
}

TEST(TrainConfig, ReadsTheGroupSizesUnderDeepSpeedsNamesWithTheirOffValues) {
  std::vector<std::string> warnings;
  const TrainConfig defaults = parse_train_config(nlohmann::json::object(), "c", &warnings);
  EXPECT_EQ(defaults.zero.shard_group_size, 0);
  EXPECT_EQ(defaults.zero.hpz_group_size, 1);
  const TrainConfig hsdp = parse_train_config(
      nlohmann::json::parse(R"({"zero_optimization": {"mics_shard_size": 8}})"), "c", &warnings);
  EXPECT_EQ(hsdp.zero.shard_group_size, 8);
  const TrainConfig off = parse_train_config(
      nlohmann::json::parse(R"({"zero_optimization": {"mics_shard_size": -1, "zero_hpz_partition_size": 0}})"), "c",
      &warnings);
  EXPECT_EQ(off.zero.shard_group_size, 0);
  EXPECT_EQ(off.zero.hpz_group_size, 1);
  EXPECT_TRUE(warnings.empty());
  EXPECT_NE(error_of(nlohmann::json::parse(R"({"zero_optimization": {"mics_shard_size": 0}})")).find(
                "/zero_optimization/mics_shard_size"),
            std::string::npos);
  // Written back as read: the round trip keeps them.
  std::vector<std::string> none;
  const TrainConfig again = parse_train_config(train_config_to_json(hsdp), "c", &none);
  EXPECT_EQ(again.zero.shard_group_size, 8);
  EXPECT_TRUE(none.empty());
}

TEST(TrainConfig, GroupSizesMustDivideTheWorldNeedStageThreeAndComeOneAtATime) {
  TrainConfig config;
  const auto message = [&](int world) {
    try {
      check_group_sizes(config, world, "ds.json");
    } catch (const InputError& error) {
      return std::string(error.what());
    }
    return std::string();
  };
  config.zero.shard_group_size = 4;
  EXPECT_EQ(message(8), "");
  EXPECT_NE(message(6).find("ds.json: /zero_optimization/mics_shard_size = 4 does not divide the world size 6"),
            std::string::npos) << message(6);
  EXPECT_NE(message(2).find("exceeds the world size 2"), std::string::npos) << message(2);
  config.zero.stage = 2;
  EXPECT_NE(message(8).find("needs stage 3"), std::string::npos) << message(8);
  config.zero.stage = 3;
  config.zero.hpz_group_size = 2;
  EXPECT_NE(message(8).find("choose one"), std::string::npos) << message(8);
  config.zero.shard_group_size = 0;
  EXPECT_EQ(message(8), "");
  EXPECT_NE(message(3).find("/zero_optimization/zero_hpz_partition_size = 2 does not divide the world size 3"),
            std::string::npos) << message(3);
}

}  // namespace
}  // namespace zero3
