// Shape replay: model-state bytes against the ZeRO paper at GPT-3 scale, the paper's 7.5B example,
// rank-divergent MoE traces with and without the leaf policy, the symmetric shortcut against the
// full simulator, placeholder hits, trace invalidations, recorded runs replayed exactly, and the
// summary's verdict on whether the peak fits the device.
#include <gtest/gtest.h>

#include "core/sharding/partition.h"
#include "traces/replay/memory_estimates.h"
#include "traces/replay/replay.h"
#include "traces/replay/replay_report.h"
#include "traces/format/trace_recorder.h"

namespace zero3 {
namespace {

Trace shipped(const std::string& name) { return load_trace(std::string(ZERO3_TRACES_DIR) + "/models/" + name + ".json"); }

int64_t shard_elements(const Trace& trace, int world) {
  int64_t total = 0;
  for (const TraceParam& param : trace.params) total += shard_numel(shape_numel(param.shape), world);
  return total;
}

ReplayOptions bf16_options(int world) {
  ReplayOptions options;
  options.world = world;
  options.config.bf16 = true;
  return options;
}

int64_t peak(const ShapeReplayResult& result, MemoryCategory category) {
  return result.ranks.at(0).peaks[static_cast<size_t>(category)].bytes;
}

TEST(Replay, Gpt3At1024RanksHoldsThePapersModelStatesWithinPaddingPlusOurF32Gradients) {
  const Trace trace = shipped("gpt3-175b");
  const ShapeReplayResult result = replay_trace(trace, bf16_options(1024));
  ASSERT_FALSE(result.failure.has_value());
  EXPECT_EQ(result.simulation, "symmetric");
  const int64_t shards = shard_elements(trace, 1024);
  EXPECT_EQ(peak(result, MemoryCategory::param_shard), 2 * shards);
  EXPECT_EQ(peak(result, MemoryCategory::optimizer_state), 12 * shards);
  EXPECT_EQ(peak(result, MemoryCategory::grad_shard), 4 * shards);
  // At the paper's widths (2 + 2 + 12) our padded shards differ from (2+2+12)Ψ/W by padding only:
  // under 16 bytes per parameter tensor.
  const double paper = zero_paper_stage3_bytes(trace.parameter_elements(), 1024);
  const double ours_at_paper_widths = static_cast<double>(16 * shards);
  EXPECT_GE(ours_at_paper_widths, paper);
  EXPECT_LT(ours_at_paper_widths - paper, 16.0 * static_cast<double>(trace.params.size()));
  EXPECT_GT(result.ranks[0].counters.gathers, 0);
  EXPECT_EQ(result.ranks[0].step_end_s.size(), 2u);
}

TEST(Replay, TheZeroPapers7_5BModelAt64RanksNeedsAbout1_9GBOfModelStatesPerDevice) {
  const Trace trace = shipped("zero-paper-7.5b");
  const ShapeReplayResult result = replay_trace(trace, bf16_options(64));
  const int64_t shards = shard_elements(trace, 64);
  const double paper_widths_gb = 16.0 * static_cast<double>(shards) / 1e9;
  EXPECT_NEAR(paper_widths_gb, 1.9, 0.05);
  EXPECT_EQ(peak(result, MemoryCategory::param_shard) + peak(result, MemoryCategory::optimizer_state) +
                peak(result, MemoryCategory::grad_shard) / 2,
            16 * shards);
}

TEST(Replay, MixtralWhoseRanksRouteDifferentlyEndsInAMismatchNamingTheExpert) {
  const Trace trace = shipped("mixtral-8x7b");
  const ShapeReplayResult result = replay_trace(trace, bf16_options(0));
  EXPECT_EQ(result.simulation, "full");
  EXPECT_EQ(result.world, 2);
  ASSERT_TRUE(result.failure.has_value());
  EXPECT_EQ(result.failure->kind, "collective_mismatch");
  EXPECT_NE(result.failure->message.find("block_sparse_moe.experts."), std::string::npos) << result.failure->message;
  EXPECT_EQ(result.exit_code(), 3);
}

TEST(Replay, MixtralWithTheLeafPolicyOnItsMoeBlockReplaysClean) {
  const Trace trace = shipped("mixtral-8x7b");
  ReplayOptions options = bf16_options(4);
  options.config.zero.leaf_modules = {"MixtralSparseMoeBlock"};
  const ShapeReplayResult result = replay_trace(trace, options);
  EXPECT_FALSE(result.failure.has_value()) << result.failure->message;
  EXPECT_TRUE(result.findings.empty()) << result.findings.front().detail;
  EXPECT_EQ(result.exit_code(), 0);
  for (const RankReplay& rank : result.ranks) EXPECT_TRUE(rank.finished);
}

TEST(Replay, TheSymmetricShortcutPredictsWhatTheFullSimulatorDoesForAnSpmdTrace) {
  const Trace trace = shipped("gpt2-124m");
  ReplayOptions options = bf16_options(4);
  const ShapeReplayResult symmetric = replay_trace(trace, options);
  options.full_simulation = true;
  // Every rank on a fiber of its own, and the four identical ranks sharing one.
  for (const bool share : {false, true}) {
    options.share_identical_ranks = share;
    const ShapeReplayResult full = replay_trace(trace, options);
    ASSERT_EQ(full.simulation, "full");
    ASSERT_FALSE(full.failure.has_value());
    ASSERT_EQ(full.ranks.size(), 4u);
    for (const RankReplay& rank : full.ranks) {
      EXPECT_EQ(rank.step_end_s, symmetric.ranks[0].step_end_s) << "rank " << rank.rank << " share " << share;
      EXPECT_EQ(rank.peak_total.bytes, symmetric.ranks[0].peak_total.bytes) << "rank " << rank.rank << " share " << share;
    }
    EXPECT_EQ(full.collectives_of(full.ranks[3]).size(), symmetric.collectives[0].size()) << "share " << share;
  }
}

Trace trace_from(const char* text) { return read_trace(nlohmann::json::parse(text), "test.json"); }

TEST(Replay, ARawReadOfAPartitionedParameterIsReportedWithWhatThePolicyDoes) {
  const char* text = R"({"zero3_trace": 1, "modules": [["", "Net"], ["a", "Linear"], ["b", "Scale"]],
    "params": [[0, "a.weight", [4, 4]], [1, "b.scale", [4]]],
    "steps": [{"events": [["call", "a"], ["enter", "b"], ["raw", "b", "a.weight"], ["exit", "b"],
                          ["backward"], ["optimizer_step"]]}]})";
  ReplayOptions options = bf16_options(2);
  options.config.zero.persistence_threshold = 0;  // a.weight is released after a's forward
  const ShapeReplayResult result = replay_trace(trace_from(text), options);
  ASSERT_EQ(result.findings.size(), 1u);
  EXPECT_EQ(result.findings[0].kind, "raw_placeholder");
  EXPECT_EQ(result.findings[0].param, "a.weight");
  EXPECT_NE(result.findings[0].detail.find("'error'"), std::string::npos);
  EXPECT_EQ(result.exit_code(), 2);
}

// What PyTorch keeps, as tools/recorders/record_memory_trace.py measures it: each module's kept bytes held from
// its forward exit until its backward ends, and the transient peaks of its own ops in forward and
// backward on top of what is held then; the loss's (the backward event's) likewise. A module
// checkpointed as torch.utils.checkpoint (non-reentrant) does it keeps its inputs, and backward
// recomputes it before its own backward. The peaks below are worked out by hand from those rules.
const char* kTransientTrace = R"({"zero3_trace": 1, "modules": [["", "Net"], ["a", "Linear"], ["b", "Linear"]],
    "params": [[0, "a.weight", [4, 4]], [1, "b.weight", [4, 4]]],
    "steps": [{"events": [["enter", ""],
      ["call", "a", 0, 100, {"input_bytes": 10, "forward_transient": 50, "backward_transient": 70}],
      ["call", "b", 0, 200, {"input_bytes": 20, "forward_transient": 30, "backward_transient": 100}],
      ["exit", ""], ["backward", 40, {"forward_transient": 60, "backward_transient": 500}], ["optimizer_step"]]}]})";

TEST(Replay, TransientPeaksRideOnWhatIsHeldAndACheckpointedModuleKeepsItsInputs) {
  ReplayOptions options = bf16_options(2);
  // What the replay holds besides the recorded amounts (the loss scalar it backpropagates).
  nlohmann::json json = nlohmann::json::parse(kTransientTrace);
  json["steps"][0]["events"][1] = {"call", "a"};
  json["steps"][0]["events"][2] = {"call", "b"};
  json["steps"][0]["events"][4] = {"backward"};
  const int64_t base = peak(replay_trace(read_trace(json, "t.json"), options), MemoryCategory::activation);
  EXPECT_LE(base, 8);
  // Kept after a and b: 300; the loss's forward transient 360, its kept 340, its backward
  // transient on top: 840, the peak; b's backward 440 and a's 210 stay below.
  EXPECT_EQ(peak(replay_trace(trace_from(kTransientTrace), options), MemoryCategory::activation), base + 840);
  // b checkpointed: after b's forward 100 + b's 20 inputs = 120 held instead of 300, so the loss's
  // backward transient peaks at 120 + 40 + 500 = 660 (180 lower: b's 200 kept less its 20 inputs);
  // the recompute holds b's 200 again beside its inputs (100 + 20 + 40 + 200 = 360) and b's
  // backward transient 460 stays below.
  options.config.checkpoint_modules = {"b"};
  EXPECT_EQ(peak(replay_trace(trace_from(kTransientTrace), options), MemoryCategory::activation), base + 660);
  // A large backward transient in the recomputed module sets the peak after its recompute.
  json = nlohmann::json::parse(kTransientTrace);
  json["steps"][0]["events"][2][4]["backward_transient"] = 1000;
  EXPECT_EQ(peak(replay_trace(read_trace(json, "t.json"), options), MemoryCategory::activation), base + 360 + 1000);
  // What autograd frees as backward begins (the loss's log-probabilities) is not held through it:
  // with 30 of the loss's 40 released early and b's backward transient at 600, b's backward peaks
  // at 100 + 20 + 10 + 200 + 600 = 930 instead of 960.
  json["steps"][0]["events"][2][4]["backward_transient"] = 600;
  const int64_t held_through = peak(replay_trace(read_trace(json, "t.json"), options), MemoryCategory::activation);
  json["steps"][0]["events"][4][2]["released_at_backward_begin"] = 30;
  EXPECT_EQ(held_through, base + 960);
  EXPECT_EQ(peak(replay_trace(read_trace(json, "t.json"), options), MemoryCategory::activation), base + 930);
}

TEST(Replay, AStepThatLeavesTheRecordedOrderInvalidatesThePrefetchTraceAndSaysWhere) {
  const char* text = R"({"zero3_trace": 1, "modules": [["", "Net"], ["a", "Linear"], ["b", "Linear"]],
    "params": [[0, "a.weight", [300, 400]], [1, "b.weight", [300, 400]]],
    "steps": [{"repeat": 2, "events": [["call", "a"], ["call", "b"], ["backward"], ["optimizer_step"]]},
              {"events": [["call", "b"], ["call", "a"], ["backward"], ["optimizer_step"]]}]})";
  const ShapeReplayResult result = replay_trace(trace_from(text), bf16_options(2));
  ASSERT_FALSE(result.findings.empty());
  EXPECT_EQ(result.findings[0].kind, "trace_invalidation");
  EXPECT_EQ(result.findings[0].step, 2);
  EXPECT_EQ(result.findings[0].module, "b");
}

TEST(Replay, ZeroSizedAndSmallerThanWorldParametersReplayCleanAndAreListed) {
  const Trace trace = shipped("fp-quant-like");
  const ShapeReplayResult result = replay_trace(trace, bf16_options(64));
  EXPECT_EQ(result.exit_code(), 0);
  const nlohmann::json report = replay_report(trace, bf16_options(64).config, default_hardware(), result);
  EXPECT_EQ(report["model"]["zero_sized_params"].size(), 28u);  // 4 layers x 7 quantized linears
  EXPECT_EQ(report["model"]["sub_world_params"].size(), 28u);   // their one-element global scales
}

TEST(Replay, ARecordedRunReplaysToExactlyTheCollectivesItIssued) {
  DistributedRunOptions options;
  options.model = "gpt-tiny";
  options.seed = 5;
  options.world = 2;
  options.steps = 2;
  options.config.zero.stage = 3;
  options.config.zero.prefetch_bucket_elements = 500;  // several buckets, and prefetching after step 0
  options.config.zero.persistence_threshold = 64;
  const DistributedRunResult run = run_distributed(options);
  ASSERT_TRUE(run.sim.all_ok()) << run.sim.summary();
  const Trace trace = record_training_trace(options, run.sim.event_log());
  ReplayOptions replay;
  replay.config = options.config;
  const ShapeReplayResult result = replay_trace(trace, replay);
  const nlohmann::json report = replay_report(trace, options.config, default_hardware(), result);
  const nlohmann::json& recorded = report["checks"]["recorded_collectives"];
  EXPECT_TRUE(recorded["compared"].get<bool>());
  EXPECT_TRUE(recorded["equal"].get<bool>()) << recorded.dump();
}

TEST(Replay, ARecordedRunReplaysToTheMemoryPeaksItMeasuredOnEveryRank) {
  // The replay drives the same engine over meta tensors and counts gradients and activations by the
  // recorded events; the run counted them from real tensors. Every category and the total must
  // agree, per rank:
  // for an SPMD model (one representative rank) and for MoE routing that differs by rank (a
  // per-rank trace, every rank simulated).
  for (const std::string model : {"gpt-tiny", "kitchen-sink"}) {
    for (const bool bf16 : {false, true}) {
      const std::string what = model + (bf16 ? " bf16" : " f32");
      DistributedRunOptions options;
      options.model = model;
      options.seed = 5;
      options.world = 3;
      options.steps = 2;
      options.config.bf16 = bf16;
      options.config.gradient_accumulation_steps = 2;
      options.config.zero.prefetch_bucket_elements = 500;
      options.config.zero.reduce_bucket_elements = 700;  // gradients reduced in several buckets
      options.config.zero.persistence_threshold = 64;
      options.config.zero.leaf_modules = {"moe"};
      const DistributedRunResult run = run_distributed(options);
      ASSERT_TRUE(run.sim.all_ok()) << what << ": " << run.sim.summary();
      const Trace trace = record_training_trace(options, run.sim.event_log());
      ReplayOptions replay;
      replay.config = options.config;
      const ShapeReplayResult result = replay_trace(trace, replay);
      ASSERT_FALSE(result.failure.has_value()) << what << ": " << result.failure->message;
      EXPECT_EQ(trace.divergent(), model == "kitchen-sink") << what << ": its MoE routes differently per rank";
      EXPECT_EQ(result.simulation, trace.divergent() ? "full" : "symmetric") << what;
      for (const RankReplay& rank : result.ranks) {
        const RankMemory& measured = run.memory[static_cast<size_t>(rank.rank)];
        for (int category = 0; category < kMemoryCategoryCount; ++category) {
          const auto which = static_cast<MemoryCategory>(category);
          EXPECT_EQ(rank.peaks[static_cast<size_t>(category)].bytes, measured.peak_bytes[static_cast<size_t>(category)])
              << what << " rank " << rank.rank << " " << memory_category_name(which);
        }
        EXPECT_EQ(rank.peak_total.bytes, measured.peak_total_bytes) << what << " rank " << rank.rank << " total";
      }
    }
  }
}


// A profile as the shipped ones are written, with the memory size a test needs.
HardwareChoice test_hardware(double memory_bytes, int world) {
  const nlohmann::json profile = {{"name", "Test GPU"}, {"source", "this test"}, {"peak_flops", 1e15},
                                  {"flops_efficiency", 0.5}, {"memory_bytes", memory_bytes}, {"gpus_per_node", 8},
                                  {"nvlink", {{"bytes_per_s", 4e11}, {"latency_s", 2e-6}}},
                                  {"infiniband", {{"bytes_per_s", 5e10}, {"latency_s", 5e-6}}}};
  return hardware_from_json(profile, "test profile", world);
}

// The summary's line that starts with `prefix`, with its newline; "" when there is none.
std::string line_starting(const std::string& summary, const std::string& prefix) {
  const size_t at = summary.rfind("\n" + prefix);
  if (at == std::string::npos) return "";
  return summary.substr(at + 1, summary.find('\n', at + 1) - at);
}

TEST(ReplaySummary, SaysAfterThePeakWhetherItFitsTheDeviceItWasJudgedOn) {
  const Trace trace = shipped("gpt2-124m");
  const ShapeReplayResult result = replay_trace(trace, bf16_options(8));
  const int64_t peak = result.ranks.at(0).peak_total.bytes;
  ASSERT_GT(peak, 0);
  const nlohmann::json roomy = replay_report(trace, bf16_options(8).config, test_hardware(2.0 * peak, 8), result);
  const std::string fits = replay_summary(roomy);
  EXPECT_NE(line_starting(fits, "fits: ").find(" (50 %) on Test GPU; "), std::string::npos) << fits;
  EXPECT_TRUE(line_starting(fits, "fits: ").ends_with(" to spare\n")) << fits;
  EXPECT_EQ(line_starting(fits, "does NOT fit: "), "") << fits;
  EXPECT_LT(fits.find("\npeak "), fits.find("\nfits: ")) << "the verdict follows the peak lines";
  EXPECT_EQ(fits.find("assumed"), std::string::npos) << fits;
  const nlohmann::json& verdict = roomy["memory"]["verdict"];
  EXPECT_EQ(verdict["fits"], true);
  EXPECT_EQ(verdict["peak_bytes"].get<int64_t>(), peak);
  EXPECT_EQ(verdict["capacity_bytes"].get<double>(), 2.0 * peak);
  EXPECT_DOUBLE_EQ(verdict["fraction"].get<double>(), 0.5);
  EXPECT_EQ(verdict["hardware"], "Test GPU");
  EXPECT_EQ(verdict["assumed"], false);
  EXPECT_EQ(roomy["memory"]["fits_device_memory"], true);  // the older keys stay

  const nlohmann::json tight = replay_report(trace, bf16_options(8).config, test_hardware(peak / 2.0, 8), result);
  const std::string does_not = replay_summary(tight);
  EXPECT_NE(line_starting(does_not, "does NOT fit: ").find(" (200 %) on Test GPU; "), std::string::npos) << does_not;
  EXPECT_TRUE(line_starting(does_not, "does NOT fit: ").ends_with(" over\n")) << does_not;
  EXPECT_EQ(line_starting(does_not, "fits: "), "") << does_not;
  EXPECT_EQ(tight["memory"]["verdict"]["fits"], false);
  EXPECT_EQ(tight["memory"]["fits_device_memory"], false);
}

TEST(ReplaySummary, TheVerdictGivesThePeakAndCapacityInDecimalGigabytesAndAWholePercent) {
  const Trace trace = shipped("gpt2-124m");
  const ShapeReplayResult result = replay_trace(trace, bf16_options(8));
  nlohmann::json report = replay_report(trace, bf16_options(8).config, test_hardware(80e9, 8), result);
  nlohmann::json& verdict = report["memory"]["verdict"];
  verdict = {{"fits", true}, {"peak_bytes", 61.2e9}, {"capacity_bytes", 80e9}, {"fraction", 61.2 / 80},
             {"hardware", "H100 SXM5 80GB"}, {"assumed", false}};
  EXPECT_EQ(line_starting(replay_summary(report), "fits: "), "fits: 61.2 GB of 80 GB (77 %) on H100 SXM5 80GB\n");
  verdict["fits"] = false;
  verdict["peak_bytes"] = 112.3e9;
  verdict["fraction"] = 112.3 / 80;
  EXPECT_EQ(line_starting(replay_summary(report), "does NOT fit: "),
            "does NOT fit: 112.3 GB of 80 GB (140 %) on H100 SXM5 80GB\n");
  verdict["capacity_bytes"] = 141e9;  // a capacity of whole gigabytes reads as the datasheet writes it
  verdict["peak_bytes"] = 250e6;
  verdict["fraction"] = 250e6 / 141e9;
  verdict["fits"] = true;
  EXPECT_EQ(line_starting(replay_summary(report), "fits: "), "fits: 250.0 MB of 141 GB (0 %) on H100 SXM5 80GB\n");
}

// The verdict judges the peak against the device less a named reserve (the CUDA context and the
// caching allocator's fragmentation, each with its source in the profile), and says by how much it
// fits or misses.
TEST(ReplaySummary, TheVerdictSubtractsTheReserveAndSaysByHowMuch) {
  const Trace trace = shipped("gpt2-124m");
  const ShapeReplayResult result = replay_trace(trace, bf16_options(8));
  const int64_t peak = result.ranks.at(0).peak_total.bytes;
  // A device 10 % larger than the peak: without a reserve it fits, with 5 % + a context of 10 %
  // of the peak (15.5 % of the device) it does not.
  HardwareChoice hardware = test_hardware(1.1 * peak, 8);
  EXPECT_EQ(replay_report(trace, bf16_options(8).config, hardware, result)["memory"]["verdict"]["fits"], true);
  hardware.reserve_context_bytes = 0.1 * peak;
  hardware.reserve_fragmentation_fraction = 0.05;
  hardware.reserve_source = "this test";
  const nlohmann::json report = replay_report(trace, bf16_options(8).config, hardware, result);
  const nlohmann::json& verdict = report["memory"]["verdict"];
  EXPECT_EQ(verdict["fits"], false);
  EXPECT_NEAR(verdict["usable_bytes"].get<double>(), 1.1 * peak - 0.1 * peak - 0.05 * 1.1 * peak, 1.0);
  EXPECT_NEAR(verdict["margin_bytes"].get<double>(), -0.055 * peak, 1.0);
  EXPECT_EQ(verdict["reserve"]["source"], "this test");
  const std::string line = line_starting(replay_summary(report), "does NOT fit: ");
  EXPECT_NE(line.find(" over after a "), std::string::npos) << line;
  EXPECT_NE(line.find("allocator fragmentation 5 % of the device"), std::string::npos) << line;
  // The shipped profiles carry a reserve with its source.
  const HardwareChoice h100 = load_hardware("h100", 8);
  EXPECT_GT(h100.reserve_context_bytes, 0.0);
  EXPECT_GT(h100.reserve_fragmentation_fraction, 0.0);
  EXPECT_NE(h100.reserve_source.find("discuss.pytorch.org"), std::string::npos);
}

// Throughput: tokens per second over the ranks, and model flops per GPU against the datasheet peak
// (MFU); with checkpointing the recompute counts toward HFU only.
TEST(ReplayReport, ThroughputCountsModelFlopsAgainstThePeakAndTheRecomputeOnlyInHfu) {
  const Trace trace = shipped("gpt2-124m");
  ReplayOptions options = bf16_options(8);
  const HardwareChoice hardware = test_hardware(80e9, 8);
  options.hardware = hardware.profile;
  const nlohmann::json plain = replay_report(trace, options.config, hardware, replay_trace(trace, options));
  const nlohmann::json& throughput = plain["throughput"];
  const double step_s = plain["time"]["predicted_step_s"].get<double>();
  EXPECT_NEAR(throughput["tokens_per_s"].get<double>(), 8.0 * static_cast<double>(trace.tokens) / step_s, 1e-6);
  // Forward and backward of 2 x tokens x every matmul weight at least: 6N per token, N without embeddings.
  const double at_least = 6.0 * static_cast<double>(trace.tokens) * (124.44e6 - 38.6e6 - 0.8e6);
  EXPECT_GT(throughput["model_flops_per_gpu_per_step"].get<double>(), at_least);
  EXPECT_NEAR(throughput["mfu"].get<double>(), throughput["model_flops_per_gpu_per_step"].get<double>() / step_s / 1e15, 1e-9);
  EXPECT_EQ(throughput["mfu"], throughput["hfu"]);
  options.config.checkpoint_modules = {"Block"};
  const nlohmann::json checkpointed = replay_report(trace, options.config, hardware, replay_trace(trace, options));
  EXPECT_EQ(checkpointed["throughput"]["model_flops_per_gpu_per_step"], throughput["model_flops_per_gpu_per_step"]);
  EXPECT_GT(checkpointed["throughput"]["hfu"].get<double>(), checkpointed["throughput"]["mfu"].get<double>());
}

TEST(ReplaySummary, AnAssumedDeviceSaysHowToChooseOne) {
  const Trace trace = shipped("gpt2-124m");
  const ShapeReplayResult result = replay_trace(trace, bf16_options(8));
  HardwareChoice hardware = test_hardware(80e9, 8);
  hardware.assumed = true;
  const nlohmann::json report = replay_report(trace, bf16_options(8).config, hardware, result);
  const std::string line = line_starting(replay_summary(report), "fits: ");
  EXPECT_NE(line.find(" on Test GPU (assumed: pass --hardware h100|h200|a100|FILE); "), std::string::npos) << line;
  EXPECT_EQ(report["memory"]["verdict"]["assumed"], true);
  EXPECT_EQ(report["time"]["hardware"]["assumed"], true);
}

TEST(ReplaySummary, ADeviceWithoutAMemorySizeGivesAnUnknownVerdictNotAFit) {
  const Trace trace = shipped("gpt2-124m");
  const ShapeReplayResult result = replay_trace(trace, bf16_options(8));
  for (const HardwareChoice& hardware : {default_hardware(), test_hardware(0.0, 8)}) {
    const nlohmann::json report = replay_report(trace, bf16_options(8).config, hardware, result);
    const std::string summary = replay_summary(report);
    EXPECT_EQ(line_starting(summary, "fit unknown: "), "fit unknown: " + hardware.name + " has no memory size\n")
        << summary;
    EXPECT_EQ(line_starting(summary, "fits: "), "") << summary;
    EXPECT_EQ(line_starting(summary, "does NOT fit: "), "") << summary;
    const nlohmann::json& verdict = report["memory"]["verdict"];
    EXPECT_TRUE(verdict["fits"].is_null());
    EXPECT_TRUE(verdict["capacity_bytes"].is_null());
    EXPECT_TRUE(verdict["fraction"].is_null());
    EXPECT_FALSE(report["memory"].contains("fits_device_memory"));
  }
}

}  // namespace
}  // namespace zero3
