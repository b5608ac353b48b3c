// Resume differences: nothing for the same seed and config (any world size), and one line naming
// the setting and both values for each seed or config change.
#include "core/training/resume_differences.h"

#include <gtest/gtest.h>

namespace zero3 {
namespace {

CheckpointManifest saved_with(uint64_t seed, const TrainConfig& config) {
  CheckpointManifest manifest;
  manifest.world = 4;
  manifest.seed = seed;
  manifest.train_config = train_config_to_json(config);
  return manifest;
}

TEST(ResumeDifferences, TheSameSeedAndConfigAreNoDifference) {
  const TrainConfig config;
  EXPECT_TRUE(resume_differences(saved_with(7, config), 7, config).empty());
}

TEST(ResumeDifferences, EachChangedSettingIsOneLineWithItsPathAndBothValues) {
  const TrainConfig saved;
  TrainConfig now = saved;
  now.gradient_accumulation_steps = saved.gradient_accumulation_steps + 1;
  now.zero.reduce_bucket_elements = 123;
  const std::vector<std::string> lines = resume_differences(saved_with(7, saved), 8, now);
  ASSERT_EQ(lines.size(), 3u) << ::testing::PrintToString(lines);
  EXPECT_EQ(lines[0], "seed: 7 in the checkpoint, 8 now (the data stream differs from the saved run's)");
  EXPECT_EQ(lines[1], "train_config /gradient_accumulation_steps: " +
                          std::to_string(saved.gradient_accumulation_steps) + " in the checkpoint, " +
                          std::to_string(now.gradient_accumulation_steps) + " now");
  EXPECT_NE(lines[2].find("/zero_optimization/reduce_bucket_size: "), std::string::npos) << lines[2];
  EXPECT_NE(lines[2].find(", 123 now"), std::string::npos) << lines[2];
}

TEST(ResumeDifferences, AKeyOnlyOneSideHasIsReportedAsUnsetOnTheOther) {
  TrainConfig config;
  CheckpointManifest saved = saved_with(1, config);
  saved.train_config["from_an_older_zero3"] = 5;
  const std::vector<std::string> lines = resume_differences(saved, 1, config);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "train_config /from_an_older_zero3: 5 in the checkpoint, unset now");
}

}  // namespace
}  // namespace zero3
