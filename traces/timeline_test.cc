// Timelines: a demo-sized replay gives valid Chrome trace JSON whose spans nest per track, with a
// memory counter per rank; the checker catches what Perfetto would show wrongly; the SVG draws it.
#include <set>

#include <gtest/gtest.h>

#include "traces/replay.h"
#include "traces/timeline.h"

namespace zero3 {
namespace {

ShapeReplayResult demo_replay(int world) {
  ReplayOptions options;
  options.world = world;
  options.config.bf16 = true;
  options.config.zero.prefetch_bucket_elements = 2'000'000;  // several gathers per block, prefetched
  return replay_trace(load_trace(std::string(ZERO3_TRACES_DIR) + "/models/gpt2-124m.json"), options);
}

TEST(Timeline, ADemoReplayIsValidChromeTraceJsonWhoseSpansNestOnEveryTrack) {
  const ShapeReplayResult result = demo_replay(8);
  const nlohmann::json trace = chrome_trace_json(build_timeline(result, "gpt2 @ 8"));
  EXPECT_EQ(check_chrome_trace(trace), "");
  int compute = 0, gathers = 0, scatters = 0, counters = 0, names = 0;
  for (const auto& event : trace["traceEvents"]) {
    const std::string ph = event["ph"];
    if (ph == "X" && event["tid"] == kComputeTrack) ++compute;
    if (ph == "X" && event["tid"] == kAllGatherTrack) ++gathers;
    if (ph == "X" && event["tid"] == kReduceScatterTrack) ++scatters;
    if (ph == "C") ++counters;
    if (ph == "M") ++names;
  }
  EXPECT_GT(compute, 100);
  EXPECT_GT(gathers, 10);
  EXPECT_GT(scatters, 0);
  EXPECT_GT(counters, 10);
  EXPECT_EQ(names, 1 + kTimelineTrackCount);  // the rank's name and its four tracks
}

TEST(Timeline, AFullSimulationHasOneSetOfTracksPerRank) {
  ReplayOptions options;
  options.world = 3;
  options.full_simulation = true;
  const ShapeReplayResult result =
      replay_trace(load_trace(std::string(ZERO3_TRACES_DIR) + "/models/gpt2-124m.json"), options);
  const nlohmann::json trace = chrome_trace_json(build_timeline(result, "gpt2 @ 3"));
  EXPECT_EQ(check_chrome_trace(trace), "");
  std::set<int64_t> pids;
  for (const auto& event : trace["traceEvents"]) pids.insert(event["pid"].get<int64_t>());
  EXPECT_EQ(pids, (std::set<int64_t>{0, 1, 2}));
}

TEST(Timeline, AReplayThatEndsInAMismatchStillGivesANestedTimeline) {
  const ShapeReplayResult result =
      replay_trace(load_trace(std::string(ZERO3_TRACES_DIR) + "/models/mixtral-8x7b.json"), ReplayOptions{});
  ASSERT_TRUE(result.failure.has_value());
  const nlohmann::json trace = chrome_trace_json(build_timeline(result, "mixtral"));
  EXPECT_EQ(check_chrome_trace(trace), "");
  EXPECT_NE(trace.dump().find("step 0 (unfinished)"), std::string::npos);
}

TEST(Timeline, TheCheckerRejectsOverlapsThatDoNotNestAndMissingFields) {
  nlohmann::json trace = {{"traceEvents", nlohmann::json::array()}};
  trace["traceEvents"].push_back({{"name", "outer"}, {"ph", "X"}, {"pid", 0}, {"tid", 0}, {"ts", 0.0}, {"dur", 10.0}});
  trace["traceEvents"].push_back({{"name", "inner"}, {"ph", "X"}, {"pid", 0}, {"tid", 0}, {"ts", 2.0}, {"dur", 3.0}});
  trace["traceEvents"].push_back({{"name", "other track"}, {"ph", "X"}, {"pid", 0}, {"tid", 1}, {"ts", 5.0}, {"dur", 9.0}});
  EXPECT_EQ(check_chrome_trace(trace), "");
  trace["traceEvents"].push_back({{"name", "straddles"}, {"ph", "X"}, {"pid", 0}, {"tid", 0}, {"ts", 8.0}, {"dur", 5.0}});
  EXPECT_NE(check_chrome_trace(trace).find("straddles"), std::string::npos) << check_chrome_trace(trace);
  trace["traceEvents"].erase(trace["traceEvents"].end() - 1);
  trace["traceEvents"].push_back({{"name", "no duration"}, {"ph", "X"}, {"pid", 0}, {"tid", 0}, {"ts", 1.0}});
  EXPECT_NE(check_chrome_trace(trace).find("\"dur\""), std::string::npos) << check_chrome_trace(trace);
}

TEST(Timeline, TheSvgDrawsSpansLanesAndTheMemoryArea) {
  const std::string svg = timeline_svg(build_timeline(demo_replay(8), "gpt2 @ 8"));
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("fwd h.0.attn.qkv"), std::string::npos);
  EXPECT_NE(svg.find("all-gather"), std::string::npos);
  EXPECT_NE(svg.find("<polygon"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

}  // namespace
}  // namespace zero3
