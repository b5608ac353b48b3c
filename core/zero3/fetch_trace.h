// The order in which modules fetched their parameters in the previous step, used to prefetch in
// the next one. The first step only records. Any later step follows the recorded order; the
// first fetch that differs (a branch taken differently, a module skipped) invalidates the trace
// for the rest of the step — the engine then waits and releases what it prefetched — and the
// step's own order is recorded for the next one.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace zero3 {

class Module;

struct FetchEvent {
  const Module* module = nullptr;
  std::vector<int64_t> param_ids;  // sorted
  bool operator==(const FetchEvent&) const = default;
};

class FetchTrace {
 public:
  // The previous step's record becomes the trace to follow (if that step completed cleanly).
  void begin_step();
  // Records fetch event `event`; returns false when it differs from what the trace expected.
  bool observe(const FetchEvent& event);
  // Adds a parameter to the last recorded event of `module` (an external parameter registered
  // during that module's forward), so the next step expects it in that module's fetch.
  void amend_last(const Module* module, int64_t param_id);
  // True while a trace exists and this step has matched it so far.
  bool following() const { return following_; }
  void invalidate() { following_ = false; }
  // Events the trace expects after the ones observed so far this step.
  std::vector<const FetchEvent*> upcoming(size_t max_events) const;
  // Elements that will be fetched before `param_id` is fetched again, or -1 if it is not again
  // this step (by the trace). `numel_by_id` gives every parameter's size.
  int64_t reuse_distance(int64_t param_id, const std::vector<int64_t>& numel_by_id) const;

 private:
  std::vector<FetchEvent> trace_;
  std::vector<FetchEvent> recording_;
  bool following_ = false;
  bool recording_complete_ = false;
};

}  // namespace zero3
