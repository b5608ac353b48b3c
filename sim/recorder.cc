// Per-rank event logs, hashed as they grow.
#include "sim/recorder.h"

#include "core/base/atomic_file.h"
#include "core/base/errors.h"

namespace zero3 {

Recorder::Recorder(int world) : logs_(static_cast<size_t>(world)), rank_hashes_(static_cast<size_t>(world)) {
  ZERO3_CHECK(world >= 1, "recorder for world " + std::to_string(world));
}

void Recorder::check_rank(int rank, const char* doing) const {
  ZERO3_CHECK(rank >= 0 && rank < world(), std::string(doing) + " on rank " + std::to_string(rank));
}

void Recorder::record(int rank, nlohmann::json event) {
  check_rank(rank, "record");
  ZERO3_CHECK(event.is_object(), "events are JSON objects, got " + event.dump());
  // Hash at record time so that the fingerprint never needs the whole log in one string.
  Fnv1a& rank_hash = rank_hashes_[static_cast<size_t>(rank)];
  rank_hash.add_string(event.dump());
  rank_hash.add_string("\n");
  logs_[static_cast<size_t>(rank)].emplace_back(std::move(event));
}

void Recorder::record_every_rank(const nlohmann::json& event) {
  for (int rank = 0; rank < world(); ++rank) record(rank, event);
}

void Recorder::record_collective(int rank, CollectiveEvent event) {
  check_rank(rank, "record_collective");
  add_collective_event(rank_hashes_[static_cast<size_t>(rank)], event);
  logs_[static_cast<size_t>(rank)].emplace_back(std::move(event));
}

nlohmann::json Recorder::event_json(const Event& event) {
  if (const auto* collective = std::get_if<CollectiveEvent>(&event)) return collective_event_json(*collective);
  return std::get<nlohmann::json>(event);
}

void Recorder::for_each_collective(int rank, const std::function<void(const CollectiveEvent&)>& visit) const {
  check_rank(rank, "for_each_collective");
  for (const Event& event : logs_[static_cast<size_t>(rank)]) {
    if (const auto* collective = std::get_if<CollectiveEvent>(&event)) visit(*collective);
  }
}

std::vector<nlohmann::json> Recorder::events(int rank) const {
  check_rank(rank, "events");
  std::vector<nlohmann::json> events;
  events.reserve(logs_[static_cast<size_t>(rank)].size());
  for (const Event& event : logs_[static_cast<size_t>(rank)]) events.push_back(event_json(event));
  return events;
}

uint64_t Recorder::hash() const {
  Fnv1a combined;
  for (const Fnv1a& rank_hash : rank_hashes_) combined.add_string(hex64(rank_hash.value()));
  return combined.value();
}

nlohmann::json Recorder::to_json() const {
  nlohmann::json ranks = nlohmann::json::array();
  for (int rank = 0; rank < world(); ++rank) ranks.push_back(events(rank));
  return {{"world", world()}, {"hash", hex64(hash())}, {"ranks", std::move(ranks)}};
}

void Recorder::write_json(const std::string& path) const { write_file_atomically(path, to_json().dump(1) + "\n"); }

}  // namespace zero3
