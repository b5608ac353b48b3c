// CollectiveEvent: one rank's record of a completed collective in the event log (recorder.h). It
// keeps the fields and shares the call site with the call itself; the JSON object and the hash
// encoding are made from it here, the one place that knows both forms.
//
//   {"type": "collective", "seq": 3, "op": "all_gather", "dtype": "f32", "count": 4, "bytes": 64,
//    "meta": false, "module": "h.0", "params": ["h.0.w"], "step": 1, "phase": "forward",
//    "issue_s": ..., "start_s": ..., "end_s": ...}   plus "root" (broadcast) or "reduce"
//   (reduce-scatter, all-reduce), and "group" and "level" for a process group's collective
#pragma once
#include <cstdint>
#include <memory>

#include <nlohmann/json.hpp>

#include "core/base/hash.h"
#include "core/sharding/communicator.h"

namespace zero3 {

struct CollectiveEvent {
  int64_t sequence = 0;
  CollectiveSignature signature{};
  int64_t bytes = 0;  // collective_buffer_bytes at the world size
  bool meta = false;
  std::shared_ptr<const CallSite> site{};  // never null
  double issue_s = 0.0;
  double start_s = 0.0;
  double end_s = 0.0;
  // A process group's collective: its kind ("block", "across blocks", "group") and level
  // ("intra-node", "inter-node"), static strings; null for the world's, whose JSON and hash
  // therefore stay as they were before groups had levels.
  const char* group = nullptr;
  const char* level = nullptr;
};

nlohmann::json collective_event_json(const CollectiveEvent& event);
// Adds the event's canonical encoding to `hash`: a tag byte that no JSON dump starts with, then a
// 64-bit digest of every field of the JSON form in a fixed order (small fields packed into one
// word, strings and lists prefixed by their length, times as their bits), mixed a word at a time.
void add_collective_event(Fnv1a& hash, const CollectiveEvent& event);

}  // namespace zero3
