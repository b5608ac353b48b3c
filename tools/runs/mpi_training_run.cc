// One rank of an MPI training job (mpi_training_run.h).
#include "tools/runs/mpi_training_run.h"

#include <csignal>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "backend_cuda/mpi/mpi_world.h"
#include "core/base/errors.h"
#include "core/base/rng.h"
#include "sim/fault_plan.h"
#include "tools/runs/failure_kind.h"

namespace zero3 {

namespace {

// The crash fault under MPI: one seeded victim rank draws from the run's fault stream at each site
// it reaches (a collective of any group, a checkpoint write), and when the crash fires there the
// process kills itself, as a node failure would. Every other rank passes straight through. One per
// process, shared by the world's communicator, the groups split from it and the fault points, so
// the draws follow the order in which the victim reaches its sites.
class CrashFault {
 public:
  CrashFault(const FaultPlan& plan, uint64_t seed, int world)
      : faults_(plan, seed, nullptr),
        victim_(static_cast<int>(CounterRng(seed, 0xC7A54).next_u64() % static_cast<uint64_t>(world))) {}

  // `site_class` is what a plan's `crash@SITE` filter matches; `site()` says where, once it fires.
  void reach(int world_rank, const std::string& site_class, const std::function<std::string()>& site) {
    if (world_rank != victim_) return;
    if (!faults_.fire(FaultKind::crash, world_rank, site_class, site)) return;
    std::fflush(stdout);
    std::fprintf(stderr, "fault fired: %s; rank %d kills its own process (SIGKILL)\n",
                 describe(faults_.fired().back()).c_str(), world_rank);
    std::fflush(stderr);
    std::raise(SIGKILL);
  }

 private:
  FaultInjector faults_;
  int victim_;  // a world rank
};

// A communicator whose every collective and split is a site of the crash; a split's groups are too.
// A collective's site class is the simulator's (collective_site_class: "gather", "across-block
// all-reduce", "checkpoint", ...), so `crash@checkpoint` aims at the same sites under both.
class CrashingCommunicator final : public Communicator {
 public:
  CrashingCommunicator(std::unique_ptr<Communicator> inner, std::shared_ptr<CrashFault> crash, int world_rank)
      : inner_(std::move(inner)), crash_(std::move(crash)), world_rank_(world_rank) {}

  int rank() const override { return inner_->rank(); }
  int world() const override { return inner_->world(); }
  std::string group_name() const override { return inner_->group_name(); }
  std::unique_ptr<Communicator> split(int color, int key, const CallSite& site) override {
    maybe_crash("split", site);
    return std::make_unique<CrashingCommunicator>(inner_->split(color, key, site), crash_, world_rank_);
  }
  std::shared_ptr<Work> all_gather_async(const Tensor& send, Tensor& recv, const CallSite& site) override {
    maybe_crash("all_gather", site);
    return inner_->all_gather_async(send, recv, site);
  }
  std::shared_ptr<Work> reduce_scatter_async(const Tensor& send, Tensor& recv, ReduceOp op,
                                             const CallSite& site) override {
    maybe_crash("reduce_scatter", site);
    return inner_->reduce_scatter_async(send, recv, op, site);
  }
  std::shared_ptr<Work> all_reduce_async(Tensor& buffer, ReduceOp op, const CallSite& site) override {
    maybe_crash("all_reduce", site);
    return inner_->all_reduce_async(buffer, op, site);
  }
  std::shared_ptr<Work> broadcast_async(Tensor& buffer, int root, const CallSite& site) override {
    maybe_crash("broadcast", site);
    return inner_->broadcast_async(buffer, root, site);
  }
  std::shared_ptr<Work> barrier_async(const CallSite& site) override {
    maybe_crash("barrier", site);
    return inner_->barrier_async(site);
  }
  void synchronize() override { inner_->synchronize(); }
  void abort(const std::string& reason) override { inner_->abort(reason); }

 private:
  void maybe_crash(const char* op, const CallSite& site) {
    const int64_t sequence = sequence_++;
    crash_->reach(world_rank_, collective_site_class(site), [&] {
      return std::string(op) + " #" + std::to_string(sequence) + " of " + group_name() + " (" + describe(site) + ")";
    });
  }

  std::unique_ptr<Communicator> inner_;
  std::shared_ptr<CrashFault> crash_;
  int world_rank_;
  int64_t sequence_ = 0;  // the MPI communicator's own numbering, which its timeouts name
};

// The fault points of an MPI process: the crash may fire at a checkpoint write, as at a collective.
// Host allocations never fail here: the alloc fault is the simulator's (SimAllocator).
class CrashPoints final : public FaultPoints {
 public:
  CrashPoints(std::shared_ptr<CrashFault> crash, int world_rank) : crash_(std::move(crash)), world_rank_(world_rank) {}
  bool armed() const override { return true; }  // made only for a plan with crash on
  void reach(const char* site_class, const std::string& where) override {
    crash_->reach(world_rank_, site_class, [&] { return std::string(site_class) + " (" + where + ")"; });
  }
  void host_allocation(const char*, int64_t, const std::string&) override {}

 private:
  std::shared_ptr<CrashFault> crash_;
  int world_rank_;
};

void silence_stdout() {
  std::fflush(stdout);
  if (!std::freopen("/dev/null", "w", stdout)) std::fprintf(stderr, "warning: stdout of this rank not silenced\n");
}

}  // namespace

MpiTrainingRank mpi_training_rank(const TrainOptions& options) {
  const FaultPlan plan = FaultPlan::parse(options.faults);
  for (int kind = 0; kind < kFaultKindCount; ++kind) {
    if (static_cast<FaultKind>(kind) != FaultKind::crash && plan.enable_probability[static_cast<size_t>(kind)] > 0) {
      throw InputError("--faults " + options.faults + ": under --backend mpi only crash can fire (" +
                       fault_kind_name(static_cast<FaultKind>(kind)) + " is the simulator's)");
    }
  }
  std::unique_ptr<Communicator> comm =
      MpiWorld::start().communicator({.timeout_seconds = options.collective_timeout_s});
  if (!plan.any()) return {.comm = std::make_unique<TimedCommunicator>(std::move(comm)), .faults = nullptr};
  const int world_rank = comm->rank();
  auto crash = std::make_shared<CrashFault>(plan, options.seed, comm->world());
  return {.comm = std::make_unique<TimedCommunicator>(
              std::make_unique<CrashingCommunicator>(std::move(comm), crash, world_rank)),
          .faults = std::make_unique<CrashPoints>(crash, world_rank)};
}

void run_as_mpi_process(const std::function<void()>& body) {
  MpiWorld& mpi = MpiWorld::start();
  if (mpi.rank() == 0) {
    for (const std::string& warning : mpi.launch().warnings) std::fprintf(stderr, "warning: %s\n", warning.c_str());
  } else {
    silence_stdout();
  }
  try {
    body();
  } catch (const std::exception& error) {
    const int exit_code = failure_exit_code(error);
    std::fflush(stdout);
    std::fprintf(stderr, "error: rank %d of %d: %s\n", mpi.rank(), mpi.world(), error.what());
    mpi.abort_job(exit_code);
  }
}

TrainOutcome run_training_as_mpi_process(const TrainOptions& requested,
                                         const std::function<TrainOutcome(const TrainOptions&)>& train) {
  TrainOutcome outcome;
  run_as_mpi_process([&] {
    const int world = MpiWorld::start().world();
    if (requested.ranks != 1 && requested.ranks != world) {
      throw InputError("--ranks " + std::to_string(requested.ranks) + " but the launcher started " +
                       std::to_string(world) + " processes; under --backend mpi the world size is mpirun -np's");
    }
    TrainOptions options = requested;
    options.ranks = world;
    outcome = train(options);
  });
  return outcome;
}

}  // namespace zero3
