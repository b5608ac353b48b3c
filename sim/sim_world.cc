// Wiring the scheduler, matcher, faults and recorder into ranks; capturing each rank's outcome.
#include "sim/sim_world.h"

#include <map>

#include <boost/context/fiber.hpp>

#include "core/base/errors.h"
#include "sim/collective_matcher.h"
#include "sim/fiber_scheduler.h"
#include "sim/hazard_checking_kernels.h"
#include "sim/rank_ranges.h"
#include "sim/recorder.h"
#include "sim/sim_communicator.h"

namespace zero3 {

SimRank::SimRank(int rank, int task, const SimOptions& options, FiberScheduler& scheduler, CollectiveMatcher& matcher,
                 FaultInjector& faults, Recorder& recorder)
    : rank_(rank), task_(task), world_(options.world), seed_(options.seed), hardware_(options.hardware),
      scheduler_(scheduler), matcher_(matcher), faults_(faults), recorder_(recorder), allocator_(rank, &faults),
      comm_(std::make_unique<SimCommunicator>(rank, options.world, task, matcher)),
      kernels_(std::make_unique<HazardCheckingKernels>(options.kernels ? *options.kernels : cpu_kernels(),
                                                       matcher.in_flight(task), rank)) {}

SimRank::~SimRank() = default;

Communicator& SimRank::comm() { return *comm_; }
Kernels& SimRank::kernels() { return *kernels_; }
void SimRank::record(nlohmann::json event) { recorder_.record(task_, std::move(event)); }
double SimRank::now_s() const { return scheduler_.now_s(task_); }

void SimRank::advance_compute(double flops) {
  ZERO3_CHECK(scheduler_.current() == task_, "advance_compute of rank " + std::to_string(rank_) + " from task " +
                                                 std::to_string(scheduler_.current()));
  matcher_.throw_if_crashed(task_, "computing");
  matcher_.inject_rank_faults(task_, "compute", "compute");
  scheduler_.advance(task_, compute_time_s(hardware_, flops));
  scheduler_.yield();
}

void SimRank::reach(const char* site_class, const std::string& where) {
  matcher_.throw_if_crashed(task_, where);
  matcher_.inject_rank_faults(task_, site_class, where);
}

void SimRank::host_allocation(const char* site_class, int64_t bytes, const std::string& what) {
  if (matcher_.failed()) return;  // as for the other faults: none once the run has failed
  if (faults_.fire(FaultKind::alloc, rank_, site_class, [&] { return std::string(site_class) + ": " + what; })) {
    throw OutOfMemoryError("out of host memory on rank " + std::to_string(rank_) + ": refused " +
                           std::to_string(bytes) + " bytes for " + what + " (injected allocation failure)");
  }
}

void SimRank::yield() {
  ZERO3_CHECK(scheduler_.current() == task_, "yield of rank " + std::to_string(rank_) + " from task " +
                                                 std::to_string(scheduler_.current()));
  scheduler_.yield();
}

CounterRng SimRank::data_rng() const { return CounterRng(seed_, mix64(stream_id("data"), rank_, 0)); }

int SimResult::exit_code() const {
  return all_ok() ? kExitOk : ranks[static_cast<size_t>(root_cause_rank)].exit_code;
}

const std::string& SimResult::root_cause() const {
  static const std::string none;
  return all_ok() ? none : ranks[static_cast<size_t>(root_cause_rank)].error;
}

const nlohmann::json& SimResult::event_log() const {
  ZERO3_CHECK(recorder != nullptr, "event_log() of a result without a recorder");
  if (!event_log_json_) event_log_json_ = std::make_shared<const nlohmann::json>(recorder->to_json());
  return *event_log_json_;
}

std::string SimResult::summary() const {
  std::string text = "sim world=" + std::to_string(world) + " seed=" + std::to_string(seed) + " faults=" + faults +
                     ": " + (all_ok() ? "ok" : "FAILED, exit " + std::to_string(exit_code()));
  if (!all_ok()) {
    text += "\nroot cause on rank " + std::to_string(root_cause_rank) + ": " + root_cause();
    // The other failed ranks, grouped by their error; the root cause's own text is not repeated.
    std::map<std::string, std::vector<int>> ranks_by_error;
    for (size_t rank = 0; rank < ranks.size(); ++rank) {
      if (ranks[rank].ok || static_cast<int>(rank) == root_cause_rank) continue;
      const std::string& error = ranks[rank].error;
      ranks_by_error[error == root_cause() ? "the same error" : error.substr(0, error.find('\n'))].push_back(
          static_cast<int>(rank));
    }
    for (const auto& [error, failed] : ranks_by_error) text += "\nalso failed, " + format_ranks(failed) + ": " + error;
  }
  for (const FiredFault& fault : fired) text += "\nfault fired: " + describe(fault);
  return text + "\nevent log hash " + hex64(event_log_hash);
}

namespace {

RankGroups checked_groups(const SimOptions& options) {
  if (options.world < 1) throw InputError("sim world size must be at least 1, got " + std::to_string(options.world));
  RankGroups groups(options.world, options.rank_groups);
  if (!groups.every_rank_alone() && options.faults.any()) {
    throw InputError("ranks that share a fiber cannot take faults (" + options.faults.to_string() +
                     "): a fault hits one rank, and the others it stands for would not show it");
  }
  return groups;
}

}  // namespace

SimWorld::SimWorld(SimOptions options) : options_(std::move(options)), groups_(checked_groups(options_)) {
  const int tasks = groups_.tasks();
  outcomes_.resize(static_cast<size_t>(tasks));
  recorder_ = std::make_shared<Recorder>(tasks);
  faults_ = std::make_unique<FaultInjector>(options_.faults, options_.seed, recorder_.get());
  scheduler_ = std::make_unique<FiberScheduler>(tasks, options_.seed, options_.fiber_stack_bytes);
  matcher_ = std::make_unique<CollectiveMatcher>(groups_, *scheduler_, *faults_, *recorder_, options_.hardware,
                                                 options_.jitter_fraction);
  for (int task = 0; task < tasks; ++task) {
    ranks_.push_back(std::make_unique<SimRank>(groups_.rank_of(task), task, options_, *scheduler_, *matcher_, *faults_,
                                               *recorder_));
  }
}

// Fibers still suspended (only when run() ended with an internal error) unwind their stacks when
// the scheduler goes; the ranks, matcher and recorder their code may touch must still exist then.
SimWorld::~SimWorld() { scheduler_.reset(); }

const SimRank& SimWorld::rank(int rank) const {
  ZERO3_CHECK(rank >= 0 && rank < options_.world, "rank " + std::to_string(rank));
  return *ranks_[static_cast<size_t>(groups_.task_of(rank))];
}

SimResult SimWorld::run(const std::function<void(SimRank&)>& program) {
  ZERO3_CHECK(!ran_, "a SimWorld runs once");
  ran_ = true;
  scheduler_->run([&](int task) { run_task(task, program); }, [&] { matcher_->on_stuck(); });
  return result();
}

void SimWorld::run_task(int task, const std::function<void(SimRank&)>& program) {
  std::exception_ptr error;
  try {
    program(*ranks_[static_cast<size_t>(task)]);
    matcher_->drain(task);
  } catch (const boost::context::detail::forced_unwind&) {
    throw;  // Boost.Context unwinding a fiber that is being destroyed: not the program's error.
  } catch (...) {
    error = std::current_exception();
  }
  finish_task(task, error);
}

void SimWorld::finish_task(int task, std::exception_ptr error) {
  RankOutcome& outcome = outcomes_[static_cast<size_t>(task)];
  outcome.end_s = scheduler_->now_s(task);
  if (!error) {
    matcher_->rank_exited(task);
    recorder_->record(task, {{"type", "exit"}, {"time_s", outcome.end_s}});
    return;
  }
  outcome.ok = false;
  outcome.exception = error;
  try {
    std::rethrow_exception(error);
  } catch (const PeerFailureError& failure) {
    outcome.secondary = true;
    outcome.exit_code = failure.exit_code();
    outcome.error = failure.what();
  } catch (const Zero3Error& failure) {
    outcome.exit_code = failure.exit_code();
    outcome.error = failure.what();
  } catch (const std::exception& failure) {
    outcome.exit_code = kExitCorrectness;
    outcome.error = std::string("internal error: ") + failure.what();
  } catch (...) {
    outcome.exit_code = kExitCorrectness;
    outcome.error = "internal error: an exception that is not a std::exception";
  }
  if (!outcome.secondary && root_cause_rank_ < 0) root_cause_rank_ = groups_.rank_of(task);
  matcher_->rank_failed(task, "failed: " + outcome.error);
  recorder_->record(task, {{"type", "error"},
                           {"time_s", outcome.end_s},
                           {"exit_code", outcome.exit_code},
                           {"message", outcome.error}});
}

SimResult SimWorld::result() const {
  SimResult result;
  result.world = options_.world;
  result.seed = options_.seed;
  result.faults = options_.faults.to_string();
  result.ranks = groups_.by_rank(outcomes_);
  result.fired = faults_->fired();
  result.root_cause_rank = root_cause_rank_;
  // Without a primary failure (no rank fails only secondarily, but a result must never read "all
  // ok" while a rank failed), the lowest failed rank stands in.
  for (size_t rank = 0; rank < result.ranks.size() && result.root_cause_rank < 0; ++rank) {
    if (!result.ranks[rank].ok) result.root_cause_rank = static_cast<int>(rank);
  }
  result.event_log_hash = recorder_->hash();
  result.recorder = recorder_;
  return result;
}

}  // namespace zero3
