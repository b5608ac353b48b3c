// Timelines of a replay: one track per rank and stream (compute, all-gather, reduce-scatter, other
// collectives) holding properly nested spans, plus a memory counter per rank. Written as Chrome
// trace JSON (opens in Perfetto or chrome://tracing) or as a self-contained SVG for people
// without a trace viewer.
//
//   Timeline timeline = build_timeline(result, "gpt2-124m @ 8 ranks");
//   timeline.device_memory_bytes = hardware.memory_bytes;  // the SVG's capacity line
//   timeline.device_name = hardware.name;
//   write_file_atomically("out.json", chrome_trace_json(timeline).dump());
//   write_file_atomically("out.svg", timeline_svg(timeline));
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "traces/replay/replay.h"

namespace zero3 {

enum TimelineTrack : int { kComputeTrack = 0, kAllGatherTrack = 1, kReduceScatterTrack = 2, kOtherCollectiveTrack = 3 };
inline constexpr int kTimelineTrackCount = 4;
const char* timeline_track_name(int track);

struct TimelineEvent {
  std::string name{};
  std::string category{};  // step, phase, forward, backward, optimizer, or the collective's op
  int rank = 0;
  int track = kComputeTrack;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  nlohmann::json args = nlohmann::json::object();
};

struct TimelineMemory {
  int rank = 0;
  std::vector<MemorySample> samples{};
};

struct Timeline {
  std::string title{};
  int world = 1;
  bool symmetric = false;  // one simulated rank stands for all
  std::vector<int> ranks{};
  std::vector<TimelineEvent> events{};  // sorted by (rank, track, start, longest first)
  std::vector<TimelineMemory> memory{};
  int64_t end_ns = 0;
  // The device the memory is judged against (HardwareChoice), set by the caller: the SVG draws it
  // as a line over the memory band. 0 when unknown: no line.
  double device_memory_bytes = 0;
  std::string device_name{};
};

Timeline build_timeline(const ShapeReplayResult& result, const std::string& title);
nlohmann::json chrome_trace_json(const Timeline& timeline);
std::string timeline_svg(const Timeline& timeline);

// "" when `trace` is valid Chrome trace JSON as zero3 writes it: every event has its required
// fields, and the complete ("X") events of each (pid, tid) track nest properly. Otherwise the
// first problem, naming the event.
std::string check_chrome_trace(const nlohmann::json& trace);

}  // namespace zero3
