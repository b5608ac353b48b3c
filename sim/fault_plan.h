// Fault plans and the seeded fault injector, BUGGIFY style: each fault kind is switched on for a
// run (explicitly, or with a probability drawn once per run), then fires at each site it guards
// with its own probability. Every draw comes from the run's "faults" PRNG stream.
//
//   FaultPlan plan = FaultPlan::parse("late,crash=0.1,stall?");  // stall: on in half of the runs
//   FaultInjector faults(plan, seed, &recorder);
//   if (faults.fire(FaultKind::stall, rank, "compute", [&] { return std::string("compute"); })) ...
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/errors.h"
#include "core/base/rng.h"

namespace zero3 {

class Recorder;

enum class FaultKind : uint8_t {
  late,     // a collective completes later than the cost model says (delays the ones after it)
  reorder,  // a collective's completion is held back so that later ones complete first
  stall,    // a rank stops making progress for a while, then continues
  crash,    // a rank's program ends with RankCrashedError; the others get PeerFailureError
  alloc,    // SimAllocator refuses an acquire with OutOfMemoryError
};
inline constexpr int kFaultKindCount = 5;
const char* fault_kind_name(FaultKind kind);

// The crashed rank's own error: its program ends here, as if the process died.
class RankCrashedError : public LivenessError {
 public:
  explicit RankCrashedError(const std::string& message) : LivenessError(message) {}
};

struct FaultPlan {
  // Chance that each kind is switched on for a run: 0 off, 1 on (explicit), in between BUGGIFY.
  std::array<double, kFaultKindCount> enable_probability{};
  // Chance that an enabled kind fires at one site (one collective, one compute step, one acquire).
  // The destructive kinds are rare per event so that most faulted runs still train: gpt-tiny at W=4
  // makes thousands of acquires and collectives in 5 steps, and `--faults all` then trains in about
  // 6 runs of 10 (the fault campaign, `zero3 fuzz --fault-campaign`, measures it).
  std::array<double, kFaultKindCount> fire_probability{0.25, 0.25, 0.05, 0.0003, 0.0002};
  // Where an enabled kind may fire: only at sites whose class (FiredFault::site_class) starts with
  // this; "" everywhere. `crash@checkpoint` aims crashes at checkpoint saves.
  std::array<std::string, kFaultKindCount> site_filter{};
  // Extra delay of a late or reordered completion: uniform in (0, delay_s_max]; a stall lasts up
  // to ten times this.
  double delay_s_max = 1e-3;

  // Comma-separated items: `kind` (on), `kind?` (on with probability 1/2 per run), either with an
  // optional `@site` (site_filter) and an optional `=fire_probability`; `all` / `all?` for every
  // kind; `none` or "" for no faults. Kinds: late, reorder, stall, crash, alloc. Throws InputError
  // naming the bad item.
  static FaultPlan parse(const std::string& text);
  // The parseable form, e.g. "late=0.25,crash?=0.01"; "none" when no kind can be on.
  std::string to_string() const;
  bool any() const;
};

struct FiredFault {
  FaultKind kind;
  int rank;          // -1: the fault hit one collective of every rank
  std::string site{};  // e.g. "all_gather #7 (module 'h.0')", "compute", "acquire gathered_param ..."
  // What kind of place, for per-site tables and plan filters: "gather", "recompute gather",
  // "across-block all-reduce", "compute", "memory gathered_param", "checkpoint write", ...
  std::string site_class{};
};
std::string describe(const FiredFault& fault);

class FaultInjector {
 public:
  FaultInjector(const FaultPlan& plan, uint64_t seed, Recorder* recorder);

  bool enabled(FaultKind kind) const { return enabled_[static_cast<size_t>(kind)]; }
  // Draws whether `kind` fires at this site; a fired fault is listed and recorded in the event log
  // of `rank` (of every rank for -1). `site()` is only called when the fault fires. A site the
  // plan's filter excludes draws nothing.
  template <class SiteFn>
  bool fire(FaultKind kind, int rank, std::string_view site_class, SiteFn&& site) {
    if (!enabled(kind) || !site_admitted(kind, site_class)) return false;
    if (rng_.next_uniform() >= plan_.fire_probability[static_cast<size_t>(kind)]) return false;
    note_fired(FiredFault{kind, rank, site(), std::string(site_class)});
    return true;
  }
  // Uniform in (0, delay_s_max].
  double draw_delay_s();
  double delay_s_max() const { return plan_.delay_s_max; }
  const std::vector<FiredFault>& fired() const { return fired_; }
  const FaultPlan& plan() const { return plan_; }

 private:
  void note_fired(FiredFault fault);
  bool site_admitted(FaultKind kind, std::string_view site_class) const;

  FaultPlan plan_;
  CounterRng rng_;
  std::array<bool, kFaultKindCount> enabled_{};
  Recorder* recorder_;
  std::vector<FiredFault> fired_;
};

}  // namespace zero3
