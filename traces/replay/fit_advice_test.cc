// The fit search: the largest micro-batch that fits is the boundary (it fits, one more does not,
// checked by replaying both), and for a run that does not fit each single lever is tried, the
// repeated block's checkpointing among them, with its own peak.
#include <gtest/gtest.h>

#include "traces/replay/fit_advice.h"

namespace zero3 {
namespace {

Trace llama() { return load_trace(std::string(ZERO3_TRACES_DIR) + "/models/llama-2-7b.json"); }

ReplayOptions options_on(const HardwareChoice& hardware, int world) {
  ReplayOptions options;
  options.world = world;
  options.config.bf16 = true;
  options.hardware = hardware.profile;
  return options;
}

int64_t peak_at(const Trace& recorded, int64_t micro_batch, const ReplayOptions& options) {
  const ShapeReplayResult result = replay_trace(rescale_trace(recorded, {.batch = micro_batch}, "t"), options);
  return result.ranks.at(0).peak_total.bytes;
}

TEST(FitAdvice, TheLargestMicroBatchFitsAndOneMoreDoesNot) {
  const Trace recorded = llama();
  const HardwareChoice hardware = load_hardware("h100", 8);
  const ReplayOptions options = options_on(hardware, 8);
  const FitAdvice advice = advise_fit(recorded, {.batch = 4}, options, hardware, "t");
  EXPECT_FALSE(advice.fits) << "Llama-2-7B at 4 x 4,096 tokens keeps over 100 GB of activations";
  ASSERT_GT(advice.largest_micro_batch, 0);
  ASSERT_LT(advice.largest_micro_batch, 4);
  EXPECT_LE(static_cast<double>(peak_at(recorded, advice.largest_micro_batch, options)), hardware.usable_bytes());
  EXPECT_GT(static_cast<double>(peak_at(recorded, advice.largest_micro_batch + 1, options)), hardware.usable_bytes());
  EXPECT_EQ(advice.at_largest.peak_bytes, peak_at(recorded, advice.largest_micro_batch, options));
  bool checkpointing_fits = false;
  for (const FitProbe& probe : advice.levers) {
    if (probe.change == "--checkpoint-activations LlamaDecoderLayer") checkpointing_fits = probe.fits;
    EXPECT_GT(probe.step_s, 0.0) << probe.change;
  }
  EXPECT_TRUE(checkpointing_fits) << "checkpointing every decoder layer is the lever that fits";
  const nlohmann::json json = fit_advice_json(advice);
  EXPECT_EQ(json["largest_micro_batch"], advice.largest_micro_batch);
  EXPECT_NE(fit_advice_lines(advice).find("would fit with one change:\n  --checkpoint-activations LlamaDecoderLayer"),
            std::string::npos) << fit_advice_lines(advice);
}

TEST(FitAdvice, ARunThatFitsGetsTheLargestMicroBatchAndNoLevers) {
  const Trace recorded = llama();
  const HardwareChoice hardware = load_hardware("h200", 8);
  const FitAdvice advice = advise_fit(recorded, {.batch = 1}, options_on(hardware, 8), hardware, "t");
  EXPECT_TRUE(advice.fits);
  EXPECT_GE(advice.largest_micro_batch, 1);
  EXPECT_TRUE(advice.levers.empty());
}

}  // namespace
}  // namespace zero3
