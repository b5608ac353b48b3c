// Recorder: the per-rank event log of a simulated run (collectives, faults, errors, and whatever
// the engine records: status changes, memory events) and its 64-bit fingerprint.
//
// Each event is a JSON object. The fingerprint is FNV-1a over a canonical serialisation: per rank,
// each event's compact dump (keys sorted, as nlohmann::json orders them) followed by '\n'; then
// FNV-1a over the per-rank hashes in rank order. Events must hold no pointers and no wall-clock
// time, so the same seed, build and config give the same hash.
//
//   recorder.record(rank, {{"type", "status"}, {"param", "h.0.w"}, {"to", "AVAILABLE"}});
//   uint64_t fingerprint = recorder.hash();
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/base/hash.h"

namespace zero3 {

class Recorder {
 public:
  explicit Recorder(int world);

  int world() const { return static_cast<int>(logs_.size()); }
  // Appends `event` (a JSON object) to the log of `rank`.
  void record(int rank, nlohmann::json event);
  void record_every_rank(const nlohmann::json& event);

  const std::vector<nlohmann::json>& events(int rank) const;
  uint64_t hash() const;
  // {"world": W, "hash": "<16 hex digits>", "ranks": [[event, ...], ...]}
  nlohmann::json to_json() const;
  // Writes to_json() atomically (temporary file + rename).
  void write_json(const std::string& path) const;

 private:
  std::vector<std::vector<nlohmann::json>> logs_;
  std::vector<Fnv1a> rank_hashes_;
};

}  // namespace zero3
