// One rank of an MPI training job (mpi_training_run.h).
#include "tools/runs/mpi_training_run.h"

#include <csignal>
#include <cstdio>

#include "backend_cuda/mpi/mpi_world.h"
#include "core/base/errors.h"
#include "core/base/rng.h"
#include "sim/fault_plan.h"
#include "tools/runs/failure_kind.h"

namespace zero3 {

namespace {

// The crash fault under MPI: before each collective the victim rank draws from the run's fault
// stream, and when the crash fires the process kills itself, as a node failure would. Every other
// rank passes straight through.
class CrashingCommunicator final : public Communicator {
 public:
  CrashingCommunicator(std::unique_ptr<Communicator> inner, const FaultPlan& plan, uint64_t seed)
      : inner_(std::move(inner)), faults_(plan, seed, nullptr),
        victim_(static_cast<int>(CounterRng(seed, 0xC7A54).next_u64() % static_cast<uint64_t>(inner_->world()))) {}

  int rank() const override { return inner_->rank(); }
  int world() const override { return inner_->world(); }
  std::string group_name() const override { return inner_->group_name(); }
  // The split itself may crash; the group's own collectives are the inner group's, without
  // injection (the training run splits nothing today).
  std::unique_ptr<Communicator> split(int color, int key, const CallSite& site) override {
    maybe_crash("split", site);
    return inner_->split(color, key, site);
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
    if (rank() != victim_) return;
    const bool fires = faults_.fire(FaultKind::crash, rank(), collective_site_class(site), [&] {
      return std::string(op) + " #" + std::to_string(sequence) + " (" + describe(site) + ")";
    });
    if (!fires) return;
    std::fflush(stdout);
    std::fprintf(stderr, "fault fired: %s; rank %d kills its own process (SIGKILL)\n",
                 describe(faults_.fired().back()).c_str(), rank());
    std::fflush(stderr);
    std::raise(SIGKILL);
  }

  std::unique_ptr<Communicator> inner_;
  FaultInjector faults_;
  int victim_;
  int64_t sequence_ = 0;
};

void silence_stdout() {
  std::fflush(stdout);
  if (!std::freopen("/dev/null", "w", stdout)) std::fprintf(stderr, "warning: stdout of this rank not silenced\n");
}

}  // namespace

std::unique_ptr<Communicator> mpi_training_communicator(const TrainOptions& options) {
  const FaultPlan plan = FaultPlan::parse(options.faults);
  for (int kind = 0; kind < kFaultKindCount; ++kind) {
    if (static_cast<FaultKind>(kind) != FaultKind::crash && plan.enable_probability[static_cast<size_t>(kind)] > 0) {
      throw InputError("--faults " + options.faults + ": under --backend mpi only crash can fire (" +
                       fault_kind_name(static_cast<FaultKind>(kind)) + " is the simulator's)");
    }
  }
  std::unique_ptr<Communicator> comm =
      MpiWorld::start().communicator({.timeout_seconds = options.collective_timeout_s});
  if (!plan.any()) return comm;
  return std::make_unique<CrashingCommunicator>(std::move(comm), plan, options.seed);
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
