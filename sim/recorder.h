// Recorder: the per-rank event log of a simulated run (collectives, faults, errors, and whatever
// the engine records: status changes, memory events) and its 64-bit fingerprint.
//
// Most events are JSON objects. Completed collectives, one per rank per collective and the bulk
// of every log, are kept as CollectiveEvent fields instead and become JSON objects only when the
// log is read (events(), to_json()), so that recording one costs no allocation and no formatting.
//
// The fingerprint is FNV-1a per rank over each event's canonical encoding, then FNV-1a over the
// per-rank hashes in rank order. A JSON event is encoded as its compact dump (keys sorted, as
// nlohmann::json orders them) followed by '\n'; a collective event as a tag byte that no dump
// starts with, then its fields in binary (collective_event.cc), so the encoding of a log is
// unambiguous. Events hold no pointers and no wall-clock time, so the same seed, build and config
// give the same hash.
//
//   recorder.record(rank, {{"type", "status"}, {"param", "h.0.w"}, {"to", "AVAILABLE"}});
//   uint64_t fingerprint = recorder.hash();
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/base/hash.h"
#include "sim/collective_event.h"

namespace zero3 {

class Recorder {
 public:
  explicit Recorder(int world);

  int world() const { return static_cast<int>(logs_.size()); }
  // Appends `event` (a JSON object) to the log of `rank`.
  void record(int rank, nlohmann::json event);
  void record_every_rank(const nlohmann::json& event);
  // Appends a completed collective to the log of `rank` (as JSON: collective_event_json()).
  void record_collective(int rank, CollectiveEvent event);

  // The log of `rank` as JSON objects, built on each call.
  std::vector<nlohmann::json> events(int rank) const;
  // The completed collectives of `rank`'s log in order, without making JSON of them.
  void for_each_collective(int rank, const std::function<void(const CollectiveEvent&)>& visit) const;
  uint64_t hash() const;
  // {"world": W, "hash": "<16 hex digits>", "ranks": [[event, ...], ...]}
  nlohmann::json to_json() const;
  // Writes to_json() atomically (temporary file + rename).
  void write_json(const std::string& path) const;

 private:
  using Event = std::variant<nlohmann::json, CollectiveEvent>;
  static nlohmann::json event_json(const Event& event);
  void check_rank(int rank, const char* doing) const;

  std::vector<std::vector<Event>> logs_;
  std::vector<Fnv1a> rank_hashes_;
};

}  // namespace zero3
