// Building a timeline from a replay, writing it as Chrome trace JSON, and checking such JSON.
#include "traces/replay/timeline.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace zero3 {

namespace {

int64_t to_ns(double seconds) { return std::llround(seconds * 1e9); }

int track_of(const std::string& op) {
  if (op == "all_gather") return kAllGatherTrack;
  if (op == "reduce_scatter") return kReduceScatterTrack;
  return kOtherCollectiveTrack;
}

double to_us(int64_t ns) { return static_cast<double>(ns) / 1000.0; }

}  // namespace

const char* timeline_track_name(int track) {
  switch (track) {
    case kComputeTrack: return "compute";
    case kAllGatherTrack: return "all-gather";
    case kReduceScatterTrack: return "reduce-scatter";
    default: return "other collectives";
  }
}

Timeline build_timeline(const ShapeReplayResult& result, const std::string& title) {
  Timeline timeline{.title = title, .world = result.world, .symmetric = result.simulation == "symmetric"};
  for (const RankReplay& rank : result.ranks) {
    // A rank that shared another's simulation has its timeline: the same spans on its own tracks.
    const RankReplay& simulated = result.simulated(rank);
    timeline.ranks.push_back(rank.rank);
    for (const TimelineSpan& span : simulated.compute) {
      timeline.events.push_back({.name = span.name, .category = span.category, .rank = rank.rank, .track = kComputeTrack,
                                 .start_ns = to_ns(span.start_s), .end_ns = to_ns(span.end_s)});
    }
    for (const TraceCollective& call : result.collectives_of(rank)) {
      timeline.events.push_back(
          {.name = call.op + (call.module.empty() ? " (" + call.phase + ")" : " " + call.module),
           .category = call.op, .rank = rank.rank, .track = track_of(call.op), .start_ns = to_ns(call.start_s),
           .end_ns = to_ns(call.start_s + call.duration_s),
           .args = {{"sequence", call.sequence}, {"dtype", call.dtype}, {"count", call.count}, {"bytes", call.bytes},
                    {"phase", call.phase}, {"step", call.step}, {"group", call.group}, {"level", call.level}}});
    }
    timeline.memory.push_back({rank.rank, simulated.memory});
  }
  // Longest first among equal starts, so a parent comes before the children it encloses.
  std::stable_sort(timeline.events.begin(), timeline.events.end(), [](const TimelineEvent& a, const TimelineEvent& b) {
    if (a.rank != b.rank) return a.rank < b.rank;
    if (a.track != b.track) return a.track < b.track;
    if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
    return a.end_ns > b.end_ns;
  });
  for (const TimelineEvent& event : timeline.events) timeline.end_ns = std::max(timeline.end_ns, event.end_ns);
  return timeline;
}

nlohmann::json chrome_trace_json(const Timeline& timeline) {
  nlohmann::json events = nlohmann::json::array();
  for (int rank : timeline.ranks) {
    const std::string name = timeline.symmetric ? "rank " + std::to_string(rank) + " (stands for all " +
                                                      std::to_string(timeline.world) + " ranks)"
                                                : "rank " + std::to_string(rank);
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", rank}, {"tid", 0}, {"args", {{"name", name}}}});
    for (int track = 0; track < kTimelineTrackCount; ++track) {
      events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank}, {"tid", track},
                        {"args", {{"name", timeline_track_name(track)}}}});
    }
  }
  for (const TimelineEvent& event : timeline.events) {
    events.push_back({{"name", event.name}, {"cat", event.category}, {"ph", "X"}, {"pid", event.rank},
                      {"tid", event.track}, {"ts", to_us(event.start_ns)}, {"dur", to_us(event.end_ns - event.start_ns)},
                      {"args", event.args}});
  }
  for (const TimelineMemory& memory : timeline.memory) {
    for (const MemorySample& sample : memory.samples) {
      nlohmann::json args = nlohmann::json::object();
      for (int category = 0; category < kMemoryCategoryCount; ++category) {
        args[memory_category_name(static_cast<MemoryCategory>(category))] = sample.bytes[static_cast<size_t>(category)];
      }
      events.push_back({{"name", "memory bytes"}, {"ph", "C"}, {"pid", memory.rank}, {"ts", to_us(to_ns(sample.time_s))},
                        {"args", args}});
    }
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ns"},
          {"otherData", {{"title", timeline.title}, {"world", timeline.world},
                         {"simulation", timeline.symmetric ? "symmetric" : "full"}}}};
}

namespace {

std::string check_fields(const nlohmann::json& event, size_t index) {
  const std::string where = "traceEvents[" + std::to_string(index) + "]";
  if (!event.is_object()) return where + " is not an object";
  for (const char* key : {"name", "ph"}) {
    if (!event.contains(key) || !event.at(key).is_string()) return where + " has no string \"" + key + "\"";
  }
  const std::string ph = event.at("ph").get<std::string>();
  if (!event.contains("pid") || !event.at("pid").is_number_integer()) return where + " has no integer \"pid\"";
  if (ph == "M") return event.contains("args") && event.at("args").contains("name") ? "" : where + " (M) has no args.name";
  if (!event.contains("ts") || !event.at("ts").is_number() || event.at("ts").get<double>() < 0) {
    return where + " has no non-negative \"ts\"";
  }
  if (ph == "X") {
    if (!event.contains("tid") || !event.at("tid").is_number_integer()) return where + " (X) has no integer \"tid\"";
    if (!event.contains("dur") || !event.at("dur").is_number() || event.at("dur").get<double>() < 0) {
      return where + " (X) has no non-negative \"dur\"";
    }
    return "";
  }
  if (ph == "C") {
    if (!event.contains("args") || !event.at("args").is_object()) return where + " (C) has no args object";
    for (const auto& [key, value] : event.at("args").items()) {
      if (!value.is_number()) return where + " (C) args." + key + " is not a number";
    }
    return "";
  }
  return where + " has phase \"" + ph + "\"; zero3 writes only X, C and M events";
}

}  // namespace

std::string check_chrome_trace(const nlohmann::json& trace) {
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace.at("traceEvents").is_array()) {
    return "not an object with a \"traceEvents\" array";
  }
  struct Span {
    int64_t start_ns, end_ns;
    size_t index;
  };
  std::map<std::pair<int64_t, int64_t>, std::vector<Span>> tracks;
  const nlohmann::json& events = trace.at("traceEvents");
  for (size_t i = 0; i < events.size(); ++i) {
    const std::string problem = check_fields(events[i], i);
    if (!problem.empty()) return problem;
    if (events[i].at("ph") != "X") continue;
    const int64_t start_ns = std::llround(events[i].at("ts").get<double>() * 1000.0);
    const int64_t end_ns = start_ns + std::llround(events[i].at("dur").get<double>() * 1000.0);
    tracks[{events[i].at("pid").get<int64_t>(), events[i].at("tid").get<int64_t>()}].push_back({start_ns, end_ns, i});
  }
  for (auto& [track, spans] : tracks) {
    std::stable_sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
      return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
    });
    std::vector<Span> open;
    for (const Span& span : spans) {
      while (!open.empty() && span.start_ns >= open.back().end_ns) open.pop_back();
      if (!open.empty() && span.end_ns > open.back().end_ns) {
        return "traceEvents[" + std::to_string(span.index) + "] (" + events[span.index].at("name").get<std::string>() +
               ") overlaps traceEvents[" + std::to_string(open.back().index) + "] (" +
               events[open.back().index].at("name").get<std::string>() + ") on pid " + std::to_string(track.first) +
               " tid " + std::to_string(track.second) + " without nesting inside it";
      }
      open.push_back(span);
    }
  }
  return "";
}

}  // namespace zero3
