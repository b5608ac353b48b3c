// Replay prices recorded kernel work with the profile's rates (kernel_rates.h): forward, backward
// and the loss from their own work, not a backward of twice the forward; without the rates, or
// without recorded work, as before. And the profile file's rates, with their errors.
#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "traces/replay/hardware_catalog.h"
#include "traces/replay/replay.h"

namespace zero3 {
namespace {

// One linear module of 8 x 4 at 8 tokens, with recorded work, at world 1.
nlohmann::json worked_trace() {
  return nlohmann::json::parse(R"({
    "zero3_trace": 1, "name": "priced", "dtype": "f32", "tokens": 8,
    "modules": [["", "Net"], ["a", "Linear"]],
    "params": [[0, "a.weight", [8, 4]]],
    "steps": [{"ranks": "all", "repeat": 1, "events": [
      ["enter", ""],
      ["call", "a", null, 0, {"forward_work": {"flops": 1000, "bytes": 4000, "transcendentals": 50, "calls": 3},
                              "backward_work": {"flops": 5000, "bytes": 2000, "calls": 7}}],
      ["exit", ""],
      ["backward", 0, {"forward_work": {"bytes": 600, "transcendentals": 30, "calls": 2},
                      "backward_work": {"bytes": 800, "calls": 1}}],
      ["bwd_enter", ""], ["bwd_exit", ""], ["optimizer_step"]]}]
  })");
}

ReplayOptions toy_options(const KernelRates& rates) {
  ReplayOptions options;
  options.world = 1;
  options.config.bf16 = false;
  options.hardware.peak_flops = 1e3;  // 1 s per 1000 flops: every term is easy to tell apart
  options.kernel_rates = rates;
  return options;
}

double step_compute_s(const Trace& trace, const ReplayOptions& options) {
  const ShapeReplayResult result = replay_trace(trace, options);
  EXPECT_FALSE(result.failure.has_value()) << result.failure->message;
  return result.ranks.at(0).step_compute_s.at(0);
}

TEST(KernelWorkPricing, ModulesAndTheLossArePricedFromTheirRecordedWorkAtEachRate) {
  const Trace trace = read_trace(worked_trace(), "priced.json");
  const KernelRates rates{.memory_bytes_per_s = 100.0, .transcendentals_per_s = 10.0, .call_s = 0.5};
  // forward: 1 + 40 + 5 + 1.5; backward: 5 + 20 + 0 + 3.5; loss forward 6 + 3 + 1, backward 8 + 0.5.
  const double modules_and_loss = (1.0 + 40.0 + 5.0 + 1.5) + (5.0 + 20.0 + 3.5) + (6.0 + 3.0 + 1.0) + (8.0 + 0.5);
  // The optimizer step's passes over the 32 f32 shard elements: the norm reads 4 bytes, the refresh
  // casts 4 into 4, the zeroing writes 4; a cast and a zeroing for the one parameter, one norm.
  const double optimizer = 32.0 * (4.0 + 8.0 + 4.0) / 100.0 + 3 * 0.5;
  EXPECT_DOUBLE_EQ(step_compute_s(trace, toy_options(rates)), modules_and_loss + optimizer);
  const ShapeReplayResult result = replay_trace(trace, toy_options(rates));
  EXPECT_DOUBLE_EQ(result.ranks[0].step_model_flops.at(0), 6000.0) << "the recorded GEMM flops, forward and backward";
}

TEST(KernelWorkPricing, TheOptimizerPassesStreamAtTheirOwnBandwidthWhenTheProfileMeasuredIt) {
  const Trace trace = read_trace(worked_trace(), "priced.json");
  KernelRates rates{.memory_bytes_per_s = 100.0, .transcendentals_per_s = 10.0, .call_s = 0.5};
  const double at_memory_bandwidth = step_compute_s(trace, toy_options(rates));
  rates.optimizer_passes_bytes_per_s = 25.0;  // a shard past the caches: four times slower
  // The same 32 x 16 bytes of passes, now at 25 B/s instead of 100; the modules' work unchanged.
  EXPECT_DOUBLE_EQ(step_compute_s(trace, toy_options(rates)) - at_memory_bandwidth,
                   32.0 * 16.0 / 25.0 - 32.0 * 16.0 / 100.0);
}

TEST(KernelWorkPricing, WithoutTheRatesOrWithoutRecordedWorkTheFlopsAreDerivedAndBackwardIsTwiceForward) {
  // 2 flops per weight element and token: 2 x 8 x 32 = 512 forward, 1024 backward.
  const double derived = (512.0 + 1024.0) / 1e3;
  const Trace worked = read_trace(worked_trace(), "priced.json");
  EXPECT_DOUBLE_EQ(step_compute_s(worked, toy_options({})), derived) << "a profile without memory_bandwidth";
  nlohmann::json old = worked_trace();
  old["steps"][0]["events"][1] = {"call", "a"};
  old["steps"][0]["events"][3] = {"backward"};
  const Trace plain = read_trace(old, "old.json");
  const KernelRates rates{.memory_bytes_per_s = 100.0, .transcendentals_per_s = 10.0, .call_s = 0.5};
  EXPECT_DOUBLE_EQ(step_compute_s(plain, toy_options(rates)), derived) << "a trace without recorded work";
}

nlohmann::json profile() {
  return nlohmann::json::parse(R"({
    "name": "toy", "source": "test", "peak_flops": 1e10, "flops_efficiency": 1.0, "memory_bytes": 1e9,
    "gpus_per_node": 8, "nvlink": {"bytes_per_s": 1e10, "latency_s": 1e-6, "source": "test"},
    "memory_bandwidth": {"bytes_per_s": 2e10, "source": "a copy"},
    "transcendentals": {"per_s": 3e8, "source": "a gelu"},
    "kernel_call": {"seconds": 4e-6, "source": "a tiny scale"}
  })");
}

TEST(KernelWorkPricing, TheProfileFilesRatesAreReadAndBadOnesNameTheirPath) {
  const HardwareChoice choice = hardware_from_json(profile(), "toy.json", 2);
  EXPECT_EQ(choice.kernel_rates.memory_bytes_per_s, 2e10);
  EXPECT_EQ(choice.kernel_rates.transcendentals_per_s, 3e8);
  EXPECT_EQ(choice.kernel_rates.call_s, 4e-6);
  EXPECT_EQ(choice.kernel_rates.optimizer_passes_bytes_per_s, 0.0) << "absent: the passes at memory_bandwidth";
  nlohmann::json with_passes = profile();
  with_passes["optimizer_passes"] = {{"bytes_per_s", 5e9}, {"source", "a shard-sized norm, cast and zeroing"}};
  EXPECT_EQ(hardware_from_json(with_passes, "toy.json", 2).kernel_rates.optimizer_passes_bytes_per_s, 5e9);
  EXPECT_FALSE(load_hardware("h100", 8).kernel_rates.prices_work()) << "datasheet profiles say no such rates";
  const auto error_of = [](const nlohmann::json& json) {
    try {
      hardware_from_json(json, "toy.json", 2);
    } catch (const InputError& error) {
      return std::string(error.what());
    }
    return std::string();
  };
  nlohmann::json bad = profile();
  bad["memory_bandwidth"]["bytes_per_s"] = -5;
  EXPECT_NE(error_of(bad).find("toy.json: at /memory_bandwidth/bytes_per_s"), std::string::npos) << error_of(bad);
  bad = profile();
  bad["kernel_call"].erase("source");
  EXPECT_NE(error_of(bad).find("toy.json: at /kernel_call: missing required key 'source'"), std::string::npos)
      << error_of(bad);
  bad = profile();
  bad.erase("memory_bandwidth");
  EXPECT_NE(error_of(bad).find("memory_bandwidth"), std::string::npos) << error_of(bad);
}

}  // namespace
}  // namespace zero3
