// Timelines: a demo-sized replay gives valid Chrome trace JSON whose spans nest per track, with a
// memory counter per rank; the checker catches what Perfetto would show wrongly; the SVG draws it,
// memory on a labelled y axis that reaches both the peak and the device's capacity line.
#include <algorithm>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "traces/replay/replay.h"
#include "traces/replay/timeline.h"

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


// One rank whose memory rises to `peak_bytes` halfway through, judged against `capacity_bytes`.
Timeline memory_timeline(int64_t peak_bytes, double capacity_bytes) {
  Timeline timeline;
  timeline.title = "memory";
  timeline.ranks = {0};
  timeline.end_ns = 1000;
  MemorySample start, peak;
  peak.time_s = 500e-9;
  peak.bytes[static_cast<size_t>(MemoryCategory::param_shard)] = peak_bytes;
  timeline.memory.push_back({.rank = 0, .samples = {start, peak}});
  timeline.device_memory_bytes = capacity_bytes;
  timeline.device_name = "H100 SXM5 80GB";
  return timeline;
}

// The y axis's labels, bottom to top.
std::vector<std::string> y_axis_labels(const std::string& svg) {
  static const std::regex label(R"(font-size="9" text-anchor="end">([^<]*)</text>)");
  std::vector<std::string> labels;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), label); it != std::sregex_iterator(); ++it) {
    labels.push_back((*it)[1]);
  }
  return labels;
}

// The y of the dashed capacity line, and the smallest y (the highest point) of the memory area.
double capacity_line_y(const std::string& svg) {
  std::smatch match;
  static const std::regex line(R"re(<line x1="[^"]*" y1="([^"]*)"[^>]*stroke-dasharray)re");
  return std::regex_search(svg, match, line) ? std::stod(match[1]) : -1.0;
}

double memory_area_top_y(const std::string& svg) {
  double top = 1e9;
  static const std::regex points(R"re(<polygon points="([^"]*)")re");
  static const std::regex point(R"(,([-0-9.e]+))");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), points); it != std::sregex_iterator(); ++it) {
    const std::string coordinates = (*it)[1];
    const auto end = std::sregex_iterator();
    for (auto at = std::sregex_iterator(coordinates.begin(), coordinates.end(), point); at != end; ++at) {
      top = std::min(top, std::stod((*at)[1]));
    }
  }
  return top;
}

TEST(Timeline, TheSvgMemoryAxisReachesTheCapacityOfADeviceTheRunIsFarUnder) {
  const std::string svg = timeline_svg(memory_timeline(1'000'000'000, 80e9));
  EXPECT_EQ(y_axis_labels(svg), (std::vector<std::string>{"0", "20 GB", "40 GB", "60 GB", "80 GB"}));
  EXPECT_NE(svg.find(">H100 SXM5 80GB: 80 GB</text>"), std::string::npos);
  EXPECT_GT(capacity_line_y(svg), 0.0);
  EXPECT_GT(memory_area_top_y(svg), capacity_line_y(svg)) << "a 1 GB peak is drawn below the 80 GB line";
}

TEST(Timeline, TheSvgMemoryAxisReachesAPeakOverTheCapacityAndDrawsItAboveTheLine) {
  const std::string svg = timeline_svg(memory_timeline(112'300'000'000, 80e9));
  EXPECT_EQ(y_axis_labels(svg), (std::vector<std::string>{"0", "50 GB", "100 GB", "150 GB"}));
  EXPECT_NE(svg.find(">H100 SXM5 80GB: 80 GB</text>"), std::string::npos);
  EXPECT_LT(memory_area_top_y(svg), capacity_line_y(svg)) << "the 112.3 GB peak rises over the 80 GB line";
}

TEST(Timeline, TheSvgDrawsNoCapacityLineWithoutADeviceMemorySizeAndScalesToThePeak) {
  const std::string svg = timeline_svg(memory_timeline(1'000'000'000, 0.0));
  EXPECT_EQ(y_axis_labels(svg), (std::vector<std::string>{"0", "250 MB", "500 MB", "750 MB", "1 GB"}));
  EXPECT_EQ(svg.find("stroke-dasharray"), std::string::npos);
  EXPECT_EQ(svg.find("H100 SXM5 80GB"), std::string::npos);
  EXPECT_EQ(capacity_line_y(svg), -1.0);
}

TEST(Timeline, TheSvgMemoryAxisHasThreeToFiveTicksEndingAtOrOverThePeak) {
  for (const int64_t peak : {int64_t{999}, int64_t{1'700}, int64_t{999'999'999}, int64_t{1'000'000'001},
                             int64_t{33'000'000'000}, int64_t{141'000'000'000}, int64_t{3'069'000'000'000}}) {
    const std::vector<std::string> labels = y_axis_labels(timeline_svg(memory_timeline(peak, 0.0)));
    EXPECT_GE(labels.size(), 3u) << peak;
    EXPECT_LE(labels.size(), 5u) << peak;
  }
  // A byte over 1 GB takes the next round step, so the area stays under the band's top edge.
  const std::string svg = timeline_svg(memory_timeline(1'000'000'001, 0.0));
  EXPECT_EQ(y_axis_labels(svg), (std::vector<std::string>{"0", "500 MB", "1 GB", "1.5 GB"}));
}

}  // namespace
}  // namespace zero3
