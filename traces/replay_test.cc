// Shape replay: model-state bytes against the ZeRO paper at GPT-3 scale, the paper's 7.5B example,
// rank-divergent MoE traces with and without the leaf policy, the symmetric shortcut against the
// full simulator, placeholder hits, trace invalidations, and recorded runs replayed exactly.
#include <gtest/gtest.h>

#include "core/sharding/partition.h"
#include "traces/memory_estimates.h"
#include "traces/replay.h"
#include "traces/replay_report.h"
#include "traces/trace_recorder.h"

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

}  // namespace
}  // namespace zero3
