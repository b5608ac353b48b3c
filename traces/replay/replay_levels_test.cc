// Two-level replays: HSDP's and hpZ's groups priced by the link their ranks share, the degenerate
// group sizes that are flat ZeRO-3, the symmetric shortcut against the full simulator with groups,
// and the report's bytes per step by level.
#include <algorithm>
#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "traces/replay/hardware_catalog.h"
#include "traces/replay/replay.h"
#include "traces/replay/replay_report.h"
#include "traces/replay/timeline.h"
#include "traces/format/trace_recorder.h"

namespace zero3 {
namespace {

Trace gpt2() { return load_trace(std::string(ZERO3_TRACES_DIR) + "/models/gpt2-124m.json"); }

ReplayOptions h100_options(int world) {
  ReplayOptions options;
  options.world = world;
  options.config.bf16 = true;
  // GPT-2 fits the default live budget whole, and then the last step gathers nothing in backward;
  // with no reuse every module gathers again in backward, as a large model does.
  options.config.zero.max_reuse_distance = 0;
  options.config.zero.max_live_elements = 10'000'000;
  options.hardware = load_hardware("h100", world).profile;
  return options;
}

// What a collective is and when it runs, the log's sequence numbering aside.
void expect_same_collectives(const std::vector<TraceCollective>& a, const std::vector<TraceCollective>& b,
                             const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(a[i].op == b[i].op && a[i].count == b[i].count && a[i].bytes == b[i].bytes &&
                a[i].module == b[i].module && a[i].phase == b[i].phase && a[i].group == b[i].group &&
                a[i].level == b[i].level)
        << what << " #" << i << ": " << a[i].op << " " << a[i].group << " " << a[i].level << " vs " << b[i].op << " "
        << b[i].group << " " << b[i].level;
    EXPECT_NEAR(a[i].duration_s, b[i].duration_s, 1e-12 + 1e-9 * b[i].duration_s) << what << " #" << i;
  }
}

// A block of the whole world (HSDP) and blocks of one rank (hpZ) are flat ZeRO-3: the same
// collectives at the same times, all on the world, as the run without either.
TEST(ReplayLevels, HsdpOverTheWholeWorldAndHpzOfOneRankAreFlatZero3) {
  const Trace trace = gpt2();
  const ShapeReplayResult flat = replay_trace(trace, h100_options(16));
  ReplayOptions hsdp = h100_options(16);
  hsdp.config.zero.shard_group_size = 16;
  ReplayOptions hpz = h100_options(16);
  hpz.config.zero.hpz_group_size = 1;
  for (const ReplayOptions* options : {&hsdp, &hpz}) {
    const ShapeReplayResult result = replay_trace(trace, *options);
    ASSERT_FALSE(result.failure.has_value());
    EXPECT_EQ(result.collectives.at(0), flat.collectives.at(0));
    EXPECT_EQ(result.ranks[0].step_end_s, flat.ranks[0].step_end_s);
    EXPECT_EQ(result.ranks[0].peak_total.bytes, flat.ranks[0].peak_total.bytes);
  }
  for (const TraceCollective& call : flat.collectives.at(0)) {
    EXPECT_EQ(call.group, "world");
    EXPECT_EQ(call.level, "inter-node");  // 16 ranks on nodes of 8
  }
}

// With groups, every rank runs its own engine in the full simulation; each rank's collectives and
// step times are what the one representative predicted (the simulator's group-forming exchanges
// at setup aside: the symmetric replay knows the groups without them).
TEST(ReplayLevels, TheSymmetricShortcutAgreesWithTheFullSimulatorForHsdpAndHpz) {
  const Trace trace = gpt2();
  for (const bool use_hpz : {false, true}) {
    ReplayOptions options = h100_options(16);
    (use_hpz ? options.config.zero.hpz_group_size : options.config.zero.shard_group_size) = 8;
    const ShapeReplayResult symmetric = replay_trace(trace, options);
    options.full_simulation = true;
    const ShapeReplayResult full = replay_trace(trace, options);
    ASSERT_FALSE(full.failure.has_value()) << full.failure->message;
    ASSERT_EQ(full.ranks.size(), 16u);
    for (const int rank : {0, 9, 15}) {
      std::vector<TraceCollective> calls = full.collectives_of(full.ranks[static_cast<size_t>(rank)]);
      std::erase_if(calls, [](const TraceCollective& call) { return call.phase == "setup"; });
      expect_same_collectives(calls, symmetric.collectives.at(0),
                              std::string(use_hpz ? "hpz" : "hsdp") + " rank " + std::to_string(rank));
      const RankReplay& full_rank = full.ranks[static_cast<size_t>(rank)];
      ASSERT_EQ(full_rank.step_end_s.size(), symmetric.ranks[0].step_end_s.size());
      for (size_t step = 0; step < full_rank.step_end_s.size(); ++step) {
        const double expected_s = symmetric.ranks[0].step_end_s[step] - symmetric.ranks[0].step_start_s[step];
        EXPECT_NEAR(full_rank.step_end_s[step] - full_rank.step_start_s[step], expected_s, 1e-9 * expected_s)
            << "rank " << rank << " step " << step;
      }
      EXPECT_EQ(full_rank.peak_total.bytes, symmetric.ranks[0].peak_total.bytes);
    }
  }
}

// The report splits the last step's buffer bytes by level: flat ZeRO-3 past one node is all
// inter-node; hpZ moves backward's gathers into the node; HSDP keeps only the all-reduce outside.
TEST(ReplayLevels, TheReportCountsTheLastStepsBytesByLevelAndGroup) {
  const Trace trace = gpt2();
  const HardwareChoice h100 = load_hardware("h100", 16);
  auto levels = [&](int hsdp, int hpz) {
    ReplayOptions options = h100_options(16);
    options.config.zero.shard_group_size = hsdp;
    options.config.zero.hpz_group_size = hpz;
    const ShapeReplayResult result = replay_trace(trace, options);
    const nlohmann::json report = replay_report(trace, options.config, h100, result);
    const nlohmann::json& out = report.at("communication").at("bytes_per_step_by_level");
    int64_t last_step_bytes = 0;
    for (const TraceCollective& call : result.collectives.at(0)) {
      if (call.step == result.steps - 1) last_step_bytes += call.bytes;
    }
    EXPECT_EQ(out.at("intra_node_bytes").get<int64_t>() + out.at("inter_node_bytes").get<int64_t>(), last_step_bytes);
    return out;
  };
  const nlohmann::json flat = levels(0, 1);
  EXPECT_EQ(flat.at("intra_node_bytes"), 0);
  EXPECT_GT(flat.at("inter_node_bytes").get<int64_t>(), 0);
  EXPECT_EQ(flat.at("by_group").size(), 1u);
  EXPECT_EQ(flat.at("by_group").at("world").at("level"), "inter-node");

  const nlohmann::json hpz = levels(0, 8);
  EXPECT_GT(hpz.at("intra_node_bytes").get<int64_t>(), 0);
  EXPECT_EQ(hpz.at("by_group").at("block").at("level"), "intra-node");
  // Backward's gathers left the network: about a third of flat ZeRO-3's three passes.
  const double moved = static_cast<double>(hpz.at("intra_node_bytes").get<int64_t>()) /
                       static_cast<double>(flat.at("inter_node_bytes").get<int64_t>());
  EXPECT_GT(moved, 0.2);
  EXPECT_LT(moved, 0.45);
  // The same bytes in all, but for the padding of shards over 8 ranks instead of 16.
  const double hpz_total = hpz.at("intra_node_bytes").get<double>() + hpz.at("inter_node_bytes").get<double>();
  const double flat_total = flat.at("inter_node_bytes").get<double>();
  EXPECT_NEAR(hpz_total, flat_total, 1e-3 * flat_total);

  const nlohmann::json hsdp = levels(8, 1);
  EXPECT_EQ(hsdp.at("by_group").at("block").at("level"), "intra-node");
  EXPECT_EQ(hsdp.at("by_group").at("across blocks").at("level"), "inter-node");
  // Only the loss's scalar all-reduce is left on the world.
  const nlohmann::json none = {{"buffer_bytes", 0}};
  EXPECT_LT(hsdp.at("by_group").value("world", none).at("buffer_bytes").get<int64_t>(), 64);
}

// A recorded HSDP or hpZ run replays to the collectives it issued, on the same groups; the
// simulator's group-forming exchanges at setup are left out of the comparison. HSDP's come in the
// same order. hpZ's come in the same order in the replay, but not always in the recording: the
// simulator starts a block's gather once the block's ranks have issued it, ahead of a world
// gather this rank issued earlier that other ranks have not reached yet (jitter), so the recorded
// log may hold the two swapped, where NCCL on one stream would keep issue order. There the same
// collectives are compared as a multiset.
TEST(ReplayLevels, ARecordedHierarchicalRunReplaysToTheCollectivesItIssued) {
  for (const bool use_hpz : {false, true}) {
    DistributedRunOptions options;
    options.model = "gpt-tiny";
    options.seed = 5;
    options.world = 4;
    options.steps = 2;
    (use_hpz ? options.config.zero.hpz_group_size : options.config.zero.shard_group_size) = 2;
    options.config.zero.max_reuse_distance = 0;  // backward gathers again (from hpZ's secondary copy)
    options.config.zero.persistence_threshold = 0;
    const DistributedRunResult run = run_distributed(options);
    ASSERT_TRUE(run.sim.all_ok()) << run.sim.summary();
    const Trace trace = record_training_trace(options, run.sim.event_log());
    std::set<std::string> groups;
    for (const TraceCollective& call : trace.collectives.at(0)) groups.insert(call.group);
    EXPECT_TRUE(groups.contains(use_hpz ? "block" : "across blocks")) << (use_hpz ? "hpz" : "hsdp");
    ReplayOptions replay;
    replay.config = options.config;
    for (const bool full : {false, true}) {
      replay.full_simulation = full;
      const ShapeReplayResult result = replay_trace(trace, replay);
      const nlohmann::json report = replay_report(trace, options.config, default_hardware(), result);
      const nlohmann::json& recorded = report["checks"]["recorded_collectives"];
      if (!use_hpz) {
        EXPECT_TRUE(recorded["equal"].get<bool>()) << "hsdp " << full << " " << recorded.dump();
        continue;
      }
      auto sorted = [](const std::vector<TraceCollective>& calls) {
        std::vector<std::string> out;
        for (const TraceCollective& call : calls) {
          if (call.phase == "setup") continue;
          out.push_back(call.op + " " + std::to_string(call.count) + " " + call.phase + " " + call.group + " " +
                        std::to_string(call.step));
        }
        std::sort(out.begin(), out.end());
        return out;
      };
      EXPECT_EQ(sorted(result.collectives_of(result.ranks[0])), sorted(trace.collectives.at(0))) << "hpz " << full;
    }
  }
}

// The timeline's collective spans carry the group and level, and the SVG's hover text the level.
TEST(ReplayLevels, TimelineCollectiveSpansCarryTheirGroupAndLevel) {
  ReplayOptions options = h100_options(16);
  options.config.zero.hpz_group_size = 8;
  const Timeline timeline = build_timeline(replay_trace(gpt2(), options), "hpz");
  int block_spans = 0, world_spans = 0;
  for (const TimelineEvent& event : timeline.events) {
    if (!event.args.contains("level")) continue;
    if (event.args.at("group") == "block") {
      EXPECT_EQ(event.args.at("level"), "intra-node");
      ++block_spans;
    } else {
      EXPECT_EQ(event.args.at("level"), "inter-node");
      ++world_spans;
    }
  }
  EXPECT_GT(block_spans, 0);
  EXPECT_GT(world_spans, 0);
  const std::string svg = timeline_svg(timeline);
  EXPECT_NE(svg.find(", intra-node)</title>"), std::string::npos);
  EXPECT_NE(svg.find(", inter-node)</title>"), std::string::npos);
}

// ZeRO++'s secondary copy exists to keep backward's gathers in a node: a block that spans nodes is
// refused, naming the key, the value, the world and the node; one that divides a node is fine.
TEST(ReplayLevels, AnHpzBlockSpanningNodesIsRefusedNamingTheKeyAndTheNode) {
  const HardwareChoice h100 = load_hardware("h100", 64);
  EXPECT_NO_THROW(check_hpz_within_nodes(8, 64, h100, "ds.json"));
  EXPECT_NO_THROW(check_hpz_within_nodes(4, 64, h100, "ds.json"));
  EXPECT_NO_THROW(check_hpz_within_nodes(1, 64, h100, "ds.json"));
  EXPECT_NO_THROW(check_hpz_within_nodes(3, 6, h100, "ds.json"));  // six ranks: one node
  for (const int size : {16, 3}) {
    try {
      check_hpz_within_nodes(size, 48, h100, "ds.json");
      ADD_FAILURE() << "hpZ block of " << size << " accepted";
    } catch (const InputError& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find("ds.json: /zero_optimization/zero_hpz_partition_size = " + std::to_string(size)),
                std::string::npos) << message;
      EXPECT_NE(message.find("world size 48"), std::string::npos) << message;
      EXPECT_NE(message.find("gpus_per_node 8"), std::string::npos) << message;
    }
  }
}

}  // namespace
}  // namespace zero3
