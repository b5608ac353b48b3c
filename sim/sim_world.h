// SimWorld: W ranks of one program in one process, deterministic and fault-injecting.
//
// Each rank runs the same program as a cooperative task (a Boost.Context fiber with a small lazily
// committed stack) driven by a seeded discrete-event scheduler: no OS threads, no wall clock. A
// rank's program sees an ordinary Communicator, Allocator and Kernels; a collective blocks only
// its fiber, so the engine never knows it is simulated. One seed derives everything through
// separate PRNG streams: "schedule" (interleaving, timing jitter), "faults", and "data" (for the
// program, via SimRank::data_rng()). Same seed + same build + same options => the same event log
// and the same SimResult::event_log_hash.
//
// What a run guarantees (see collective_matcher.h for the details):
//   - collectives move real data in NCCL's layout (meta tensors move none), sums in rank order;
//   - diverging ranks end in CollectiveMismatchError or DeadlockError on every rank, never a hang;
//   - a crashed or throwing rank ends its program; the others get PeerFailureError naming it;
//   - an async output is NaN until it completes, and reading it through kernels() earlier throws;
//   - each rank has a simulated clock: compute adds flops / peak, collectives the ring alpha-beta
//     time of HardwareProfile, completions ordered by simulated time plus seeded jitter.
//
// Ranks known to make the same calls can share one fiber (SimOptions::rank_groups): it runs as
// the group's lowest rank at the full world size, and results and reports list every rank, at
// the cost of one rank per group. A program that polls (Work::done) sees wake-ups from fewer
// fibers, so sharing is for programs that only wait.
//
//   SimOptions options{.world = 4, .seed = 7, .faults = FaultPlan::parse("late,reorder")};
//   SimResult result = SimWorld(options).run([](SimRank& sim) {
//     Tensor shard = Tensor::full({8}, float(sim.rank()));
//     Tensor full = Tensor::zeros({8 * sim.world()});
//     auto work = sim.comm().all_gather_async(shard, full, {.module = "h.0", .params = {}, .step = 0, .phase = ""});
//     sim.advance_compute(1e9);   // overlaps with the gather in simulated time
//     work->wait();
//   });
//   if (!result.all_ok()) std::puts(result.summary().c_str());   // root cause first
#pragma once
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/sharding/communicator.h"
#include "core/tensor/kernels.h"
#include "core/base/rng.h"
#include "sim/fault_plan.h"
#include "sim/hardware_profile.h"
#include "sim/rank_groups.h"
#include "core/base/fault_points.h"
#include "sim/sim_allocator.h"

namespace zero3 {

class CollectiveMatcher;
class FiberScheduler;
class HazardCheckingKernels;
class Recorder;
class SimCommunicator;

struct SimOptions {
  int world = 1;
  uint64_t seed = 0;
  FaultPlan faults{};
  HardwareProfile hardware{};
  double jitter_fraction = 0.1;         // a collective takes up to this fraction longer (schedule stream)
  size_t fiber_stack_bytes = 256 << 10;  // per rank; committed only as touched; overflow hits a guard page
  Kernels* kernels = nullptr;           // under the hazard checker; null: cpu_kernels()
  // Groups of ranks that make the same calls, each run once (rank_groups.h); empty: every rank
  // runs. Shared groups need a run without faults (one would hit one rank, which its group could
  // not show) and issue meta collectives only. Without jitter a shared run reports what the
  // unshared one does; with it, it is another sample (jitter and the tie-breaks share a stream,
  // and fewer fibers take fewer tie-breaks).
  std::vector<std::vector<int>> rank_groups{};
};

// What one rank's program sees. As FaultPoints it is where the plan's crash, stall and alloc
// faults fire outside the collectives (offload copies, checkpoint writes).
class SimRank final : public FaultPoints {
 public:
  SimRank(int rank, int task, const SimOptions& options, FiberScheduler& scheduler, CollectiveMatcher& matcher,
          FaultInjector& faults, Recorder& recorder);
  ~SimRank() override;

  bool armed() const override { return faults_.plan().any(); }
  void reach(const char* site_class, const std::string& where) override;
  void host_allocation(const char* site_class, int64_t bytes, const std::string& what) override;

  int rank() const { return rank_; }
  // The fiber this rank runs on: the rank itself unless SimOptions::rank_groups shares it.
  int task() const { return task_; }
  int world() const { return world_; }
  uint64_t seed() const { return seed_; }
  Communicator& comm();
  SimAllocator& allocator() { return allocator_; }
  const SimAllocator& allocator() const { return allocator_; }
  Kernels& kernels();  // HazardCheckingKernels over SimOptions::kernels
  Recorder& recorder() { return recorder_; }
  void record(nlohmann::json event);  // recorder().record(task(), event)

  // The rank's clock advances by flops / peak_flops; a fault site (stall, crash); lets others run.
  void advance_compute(double flops);
  double now_s() const;
  // Lets the other ranks run; the clock does not move.
  void yield();
  // This rank's "data" stream: random values that depend only on (seed, rank, index).
  CounterRng data_rng() const;

 private:
  int rank_;
  int task_;
  int world_;
  uint64_t seed_;
  HardwareProfile hardware_;
  FiberScheduler& scheduler_;
  CollectiveMatcher& matcher_;
  FaultInjector& faults_;
  Recorder& recorder_;
  SimAllocator allocator_;
  std::unique_ptr<SimCommunicator> comm_;
  std::unique_ptr<HazardCheckingKernels> kernels_;
};

struct RankOutcome {
  bool ok = true;
  int exit_code = kExitOk;      // from Zero3Error; internal errors count as correctness (2)
  std::string error;            // what() of the error that ended the program
  std::exception_ptr exception;  // that error, to rethrow in tests
  bool secondary = false;       // a PeerFailureError: the consequence of another rank's failure
  double end_s = 0.0;           // simulated time the program ended
};

struct SimResult {
  int world = 1;
  uint64_t seed = 0;
  std::string faults;  // FaultPlan::to_string()
  std::vector<RankOutcome> ranks;  // by rank: a shared fiber's outcome once for each rank it ran as
  std::vector<FiredFault> fired;
  int root_cause_rank = -1;  // the first rank to fail with an error of its own; -1 when all ok
  uint64_t event_log_hash = 0;
  // The run's log, shared by every copy of this result. Its JSON form (Recorder::to_json(): one
  // log per fiber, so per rank unless shared) is built on the first call of event_log(): it costs
  // more than the run that made it, and most callers read only the hash or the collective totals.
  std::shared_ptr<const Recorder> recorder;
  const nlohmann::json& event_log() const;

  bool all_ok() const { return root_cause_rank < 0; }
  int exit_code() const;            // 0, or the root cause's exit code
  const std::string& root_cause() const;  // the root cause's error text; "" when all ok
  std::string summary() const;      // seed line, root cause, failed ranks grouped, fired faults, hash

 private:
  mutable std::shared_ptr<const nlohmann::json> event_log_json_;
};

class SimWorld {
 public:
  explicit SimWorld(SimOptions options);
  ~SimWorld();
  SimWorld(const SimWorld&) = delete;
  SimWorld& operator=(const SimWorld&) = delete;

  // Runs `program` on every rank to its end, once per world. Never throws for a rank's error: it is
  // captured in the result.
  SimResult run(const std::function<void(SimRank&)>& program);
  // A rank after (or during) the run: its allocator's peaks, its clock (its group's, when shared).
  const SimRank& rank(int rank) const;
  const SimOptions& options() const { return options_; }
  const RankGroups& groups() const { return groups_; }

 private:
  void run_task(int task, const std::function<void(SimRank&)>& program);
  void finish_task(int task, std::exception_ptr error);
  SimResult result() const;

  SimOptions options_;
  RankGroups groups_;
  std::shared_ptr<Recorder> recorder_;  // also held by the results of the run that made it
  std::unique_ptr<FaultInjector> faults_;
  std::unique_ptr<FiberScheduler> scheduler_;
  std::unique_ptr<CollectiveMatcher> matcher_;
  std::vector<std::unique_ptr<SimRank>> ranks_;  // by task
  std::vector<RankOutcome> outcomes_;           // by task
  int root_cause_rank_ = -1;
  bool ran_ = false;
};

}  // namespace zero3
