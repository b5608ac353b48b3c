// Advice for unread config keys: a slip names the key meant, a real DeepSpeed key says what zero3
// does instead, anything else is ignored; short keys do not match each other.
#include "core/training/deepspeed_keys.h"
#include "core/training/train_config.h"

#include <algorithm>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace zero3 {
namespace {

// What train_config.cc reads in each section, as the parser passes it.
const std::vector<std::string>& kTopLevelReads = keys_zero3_reads("");
const std::vector<std::string>& kZeroReads = keys_zero3_reads("/zero_optimization");
const std::vector<std::string>& kAdamWReads = keys_zero3_reads("/optimizer/params");

TEST(DeepSpeedKeys, AMisspeltKeyNamesTheKeyMeant) {
  EXPECT_EQ(unused_key_advice("/zero_optimization", "stage3_param_persitence_threshold", kZeroReads),
            "/zero_optimization/stage3_param_persitence_threshold is not a DeepSpeed key: did you mean "
            "stage3_param_persistence_threshold?");
}

TEST(DeepSpeedKeys, SwappedLettersAreOneSlip) {
  EXPECT_EQ(unused_key_advice("/zero_optimization", "stgae", kZeroReads),
            "/zero_optimization/stgae is not a DeepSpeed key: did you mean stage?");
}

TEST(DeepSpeedKeys, ACapitalIsASlipToo) {
  EXPECT_EQ(unused_key_advice("/zero_optimization", "Stage", kZeroReads),
            "/zero_optimization/Stage is not a DeepSpeed key: did you mean stage?");
}

TEST(DeepSpeedKeys, ASlipOfAKeyZero3DoesNotReadSaysSo) {
  EXPECT_EQ(unused_key_advice("/activation_checkpointing", "cpu_checkpointnig",
                              keys_zero3_reads("/activation_checkpointing")),
            "/activation_checkpointing/cpu_checkpointnig is not a DeepSpeed key: did you mean cpu_checkpointing? "
            "(it is a DeepSpeed key zero3 does not implement yet)");
}

TEST(DeepSpeedKeys, ADeepSpeedKeyNotBuiltYetSaysWhatZero3DoesInstead) {
  EXPECT_EQ(unused_key_advice("/activation_checkpointing", "cpu_checkpointing",
                              keys_zero3_reads("/activation_checkpointing")),
            "/activation_checkpointing/cpu_checkpointing is a DeepSpeed key zero3 does not implement yet: "
            "checkpointed outputs stay on the device");
}

TEST(DeepSpeedKeys, TheGroupSizesAreReadNotAdvisedOn) {
  for (const char* key : {"mics_shard_size", "zero_hpz_partition_size"}) {
    EXPECT_NE(std::find(kZeroReads.begin(), kZeroReads.end(), key), kZeroReads.end()) << key;
  }
}

TEST(DeepSpeedKeys, ADeepSpeedKeyZero3DoesNotUseSaysWhatZero3DoesInstead) {
  EXPECT_EQ(unused_key_advice("", "steps_per_print", kTopLevelReads),
            "/steps_per_print is a DeepSpeed key zero3 does not use: zero3 train prints a step line every "
            "--log-every steps (default 1)");
  EXPECT_EQ(unused_key_advice("", "scheduler", kTopLevelReads),
            "/scheduler is a DeepSpeed key zero3 does not use: no LR scheduler: every step uses optimizer.params.lr");
}

TEST(DeepSpeedKeys, ADeepSpeedKeyIsNeverCalledASlip) {
  // model_persistence_threshold is within reach of param_persistence_threshold, which zero3 reads,
  // but it is a DeepSpeed key of its own: named as one, not as a slip.
  const std::string model = unused_key_advice("/zero_optimization", "model_persistence_threshold", kZeroReads);
  EXPECT_EQ(model.find("/zero_optimization/model_persistence_threshold is a DeepSpeed key zero3 does not use"), 0u)
      << model;
  for (const DeepSpeedKey& entry : unread_deepspeed_keys()) {
    const std::string advice = unused_key_advice(std::string(entry.section), std::string(entry.key), {});
    EXPECT_EQ(advice.find("not a DeepSpeed key"), std::string::npos) << advice;
  }
}

TEST(DeepSpeedKeys, AKeyDeepSpeedRemovedIsNamedAsRemoved) {
  EXPECT_EQ(unused_key_advice("", "amp", kTopLevelReads),
            "/amp was removed from DeepSpeed, and 0.19.8 refuses it; zero3 does not use it either: bf16.enabled "
            "gives bf16 compute with f32 master weights");
}

TEST(DeepSpeedKeys, AnUnrelatedKeyIsIgnored) {
  EXPECT_EQ(unused_key_advice("", "my_key", kTopLevelReads),
            "/my_key is neither a DeepSpeed key nor one zero3 reads; ignored");
  EXPECT_EQ(unused_key_advice("/optimizer/params", "mu", kAdamWReads),
            "/optimizer/params/mu is neither a DeepSpeed key nor one zero3 reads; ignored");
}

TEST(DeepSpeedKeys, ASectionWhoseDeepSpeedKeysAreNotListedClaimsNothingAboutDeepSpeed) {
  EXPECT_EQ(unused_key_advice("/comms_logger", "verbose", {}), "/comms_logger/verbose is not a key zero3 reads; ignored");
  EXPECT_EQ(unused_key_advice("/zero_optimization/leaf_module", "clases", {"classes"}),
            "/zero_optimization/leaf_module/clases is not a key zero3 reads: did you mean classes?");
}

TEST(DeepSpeedKeys, ShortUnrelatedKeysDoNotMatch) {
  EXPECT_EQ(closest_key("lr", {"eps", "betas", "weight_decay"}), "");
  EXPECT_EQ(closest_key("eps", {"lr"}), "");
  EXPECT_EQ(closest_key("fp16", {"bf16"}), "");  // two substitutions in four letters
  EXPECT_EQ(closest_key("ep", {"lr", "eps"}), "eps");
}

TEST(DeepSpeedKeys, TheThresholdIsOneSlipPerFiveLetters) {
  EXPECT_EQ(closest_key("ovrelap_comn", {"overlap_comm"}), "overlap_comm");  // 2 edits, 12 letters
  EXPECT_EQ(closest_key("ovrelap_cmon", {"overlap_comm"}), "");              // 3 edits
  EXPECT_EQ(closest_key("train-micro-batch-size-per-gpu", {"train_micro_batch_size_per_gpu"}),
            "train_micro_batch_size_per_gpu");
  EXPECT_EQ(closest_key("", {"lr"}), "");
  EXPECT_EQ(closest_key("lr", {}), "");
}

TEST(DeepSpeedKeys, TheNearestCandidateWinsAndTiesGoToTheFirst) {
  EXPECT_EQ(closest_key("stage3_modl_persistence_threshold",
                        {"stage3_param_persistence_threshold", "stage3_model_persistence_threshold"}),
            "stage3_model_persistence_threshold");
  EXPECT_EQ(closest_key("cycle_m_lr", {"cycle_min_lr", "cycle_max_lr"}), "cycle_min_lr");  // 2 edits each
  EXPECT_EQ(closest_key("cycle_m_lr", {"cycle_max_lr", "cycle_min_lr"}), "cycle_max_lr");
}

TEST(DeepSpeedKeys, EachSectionAndKeyIsListedOnce) {
  std::set<std::pair<std::string_view, std::string_view>> seen;
  for (const DeepSpeedKey& entry : unread_deepspeed_keys()) {
    EXPECT_TRUE(seen.insert({entry.section, entry.key}).second)
        << "listed twice: " << entry.section << "/" << entry.key;
  }
}

TEST(DeepSpeedKeys, NoListedKeyIsOneZero3Reads) {
  // The parser's lists are the word on what zero3 reads; a row for one of them would contradict it.
  const std::vector<std::pair<std::string_view, const std::vector<std::string>*>> reads = {
      {"", &kTopLevelReads}, {"/zero_optimization", &kZeroReads}, {"/optimizer/params", &kAdamWReads},
      {"/fp16", &keys_zero3_reads("/fp16")}, {"/bf16", &keys_zero3_reads("/bf16")},
      {"/optimizer", &keys_zero3_reads("/optimizer")}};
  for (const DeepSpeedKey& entry : unread_deepspeed_keys()) {
    for (const auto& [section, keys] : reads) {
      if (entry.section != section) continue;
      for (const std::string& key : *keys) EXPECT_NE(entry.key, key) << "zero3 reads " << section << "/" << key;
    }
  }
}

TEST(DeepSpeedKeys, EveryEntrySaysWhatZero3DoesInstead) {
  for (const DeepSpeedKey& entry : unread_deepspeed_keys()) {
    EXPECT_FALSE(entry.instead.empty()) << entry.section << "/" << entry.key;
    EXPECT_LE(entry.instead.size(), 100u) << "keep it short: " << entry.section << "/" << entry.key;
  }
}

}  // namespace
}  // namespace zero3
