// Per-rank event logs, hashed as they grow.
#include "sim/recorder.h"

#include "core/base/atomic_file.h"
#include "core/base/errors.h"

namespace zero3 {

Recorder::Recorder(int world) : logs_(static_cast<size_t>(world)), rank_hashes_(static_cast<size_t>(world)) {
  ZERO3_CHECK(world >= 1, "recorder for world " + std::to_string(world));
}

void Recorder::record(int rank, nlohmann::json event) {
  ZERO3_CHECK(rank >= 0 && rank < world(), "record on rank " + std::to_string(rank));
  ZERO3_CHECK(event.is_object(), "events are JSON objects, got " + event.dump());
  // Hash at record time so that the fingerprint never needs the whole log in one string.
  Fnv1a& rank_hash = rank_hashes_[static_cast<size_t>(rank)];
  rank_hash.add_string(event.dump());
  rank_hash.add_string("\n");
  logs_[static_cast<size_t>(rank)].push_back(std::move(event));
}

void Recorder::record_every_rank(const nlohmann::json& event) {
  for (int rank = 0; rank < world(); ++rank) record(rank, event);
}

const std::vector<nlohmann::json>& Recorder::events(int rank) const {
  ZERO3_CHECK(rank >= 0 && rank < world(), "events of rank " + std::to_string(rank));
  return logs_[static_cast<size_t>(rank)];
}

uint64_t Recorder::hash() const {
  Fnv1a combined;
  for (const Fnv1a& rank_hash : rank_hashes_) combined.add_string(hex64(rank_hash.value()));
  return combined.value();
}

nlohmann::json Recorder::to_json() const {
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& log : logs_) ranks.push_back(log);
  return {{"world", world()}, {"hash", hex64(hash())}, {"ranks", std::move(ranks)}};
}

void Recorder::write_json(const std::string& path) const { write_file_atomically(path, to_json().dump(1) + "\n"); }

}  // namespace zero3
