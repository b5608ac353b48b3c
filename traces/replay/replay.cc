// Running a shape replay: the rank program, the symmetric and the full simulation, and the checks
// that compare ranks (traces/replay/replay.h).
#include "traces/replay/replay.h"

#include "core/base/errors.h"
#include "core/zero3/zero3_engine.h"
#include "sim/sim_world.h"
#include "sim/observed_communicator.h"
#include "traces/replay/symmetric_communicator.h"
#include "traces/format/trace_recorder.h"

namespace zero3 {

namespace {

int64_t total_steps(const Trace& trace) {
  int64_t steps = 0;
  for (const TraceStep& step : trace.steps) steps += step.repeat;
  return steps;
}

void collect(const TrackingAllocator& memory, const Zero3Engine& engine, RankReplay& out) {
  for (int category = 0; category < kMemoryCategoryCount; ++category) {
    out.peaks[static_cast<size_t>(category)] = memory.peak(static_cast<MemoryCategory>(category));
  }
  out.peak_total = memory.peak_total();
  out.memory = memory.samples();
  out.counters = engine.counters();
}

// One rank's whole replay. The same program runs alone (symmetric) or on every SimWorld fiber.
void replay_rank(const Trace& trace, const ReplayOptions& options, Communicator& base_comm, Allocator& base_allocator,
                 ReplayClock& clock, Kernels& kernels, RankReplay& out) {
  TraceModel model(trace);
  model.initialize(0, Device::meta);
  TrackingAllocator memory(base_allocator, clock);
  ReplayDriver* driver_for_listener = nullptr;
  ObservedCommunicator comm(base_comm, memory, [&](CollectiveOp op, const CallSite& site) {
    if (driver_for_listener) driver_for_listener->on_collective(op, site);
  });
  Zero3Engine engine(model, comm, memory, kernels, options.config);
  Context ctx(kernels, &engine, comm.rank());
  ctx.set_checkpointed(select_modules(model, options.config.checkpoint_modules, kCheckpointModulesKey));
  ReplayDriver driver(trace, options.config, options.hardware, options.kernel_rates, model, engine, ctx, clock, memory,
                      out);
  driver_for_listener = &driver;
  const int64_t steps = total_steps(trace);
  int64_t step_index = 0;
  try {
    for (const TraceStep& step : trace.steps) {
      for (int64_t repeat = 0; repeat < step.repeat; ++repeat) {
        driver.run_step(step, step_index++);
        if (out.rank == 0 && options.on_progress) options.on_progress(step_index, steps);
      }
    }
    out.finished = true;
  } catch (...) {
    driver.close_open_spans();
    collect(memory, engine, out);  // what happened up to the failure is still worth reporting
    throw;
  }
  collect(memory, engine, out);
}

ReplayFailure failure_of(const RankOutcome& outcome) {
  ReplayFailure failure{.kind = "error", .message = outcome.error, .exit_code = outcome.exit_code};
  try {
    std::rethrow_exception(outcome.exception);
  } catch (const CollectiveMismatchError&) {
    failure.kind = "collective_mismatch";
  } catch (const DeadlockError&) {
    failure.kind = "deadlock";
  } catch (const PeerFailureError&) {
    failure.kind = "peer_failure";
  } catch (const OutOfMemoryError&) {
    failure.kind = "out_of_memory";
  } catch (...) {
  }
  return failure;
}

// Collectives that match in signature but move different parameters: NCCL would not hang, it
// would silently hand one rank's expert to another. The matcher checks signatures only.
// `task_logs` has one event log per fiber; the groups are in rank order, so the first group that
// differs from rank 0's holds the lowest rank that does.
void check_same_parameters(const nlohmann::json& task_logs, const RankGroups& groups, ShapeReplayResult& result) {
  std::vector<std::vector<const nlohmann::json*>> by_task;
  for (const auto& events : task_logs) {
    by_task.emplace_back();
    for (const auto& event : events) {
      if (event.value("type", "") == "collective") by_task.back().push_back(&event);
    }
  }
  for (size_t seq = 0; !by_task.empty() && seq < by_task[0].size(); ++seq) {
    for (size_t task = 1; task < by_task.size(); ++task) {
      if (seq >= by_task[task].size()) continue;
      const nlohmann::json& a = *by_task[0][seq];
      const nlohmann::json& b = *by_task[task][seq];
      if (a.at("params") == b.at("params")) continue;
      const int rank = groups.rank_of(static_cast<int>(task));
      result.findings.push_back(
          {.kind = "silent_divergence", .rank = rank, .step = b.at("step").get<int64_t>(),
           .module = b.at("module").get<std::string>(), .param = "",
           .detail = "collective #" + std::to_string(seq) + " " + a.at("op").get<std::string>() + " has the same "
                     "signature on every rank but moves different parameters: rank 0 at module '" +
                     a.at("module").get<std::string>() + "' " + a.at("params").dump() + ", rank " +
                     std::to_string(rank) + " at module '" + b.at("module").get<std::string>() + "' " +
                     b.at("params").dump()});
      return;  // the first is the root cause; later ones follow from it
    }
  }
}

void replay_symmetric(const Trace& trace, const ReplayOptions& options, ShapeReplayResult& result) {
  StreamClock clock(options.hardware);
  SymmetricCommunicator comm(0, result.world, clock);
  CountingAllocator counting;
  result.ranks.resize(1);
  replay_rank(trace, options, comm, counting, clock, cpu_kernels(), result.ranks[0]);
  result.collectives = {comm.log()};
}

// What a rank that shared `simulated`'s fiber reports: the same results under its own number. The
// timeline (compute spans, memory samples) is the simulated rank's, so it is not copied per rank.
RankReplay sharing_rank(const RankReplay& simulated, int rank) {
  RankReplay out{.rank = rank, .simulated_rank = simulated.rank, .compute = {}, .step_start_s = simulated.step_start_s,
                 .step_end_s = simulated.step_end_s, .compute_busy_s = simulated.compute_busy_s,
                 .step_compute_s = simulated.step_compute_s, .step_model_flops = simulated.step_model_flops,
                 .step_recompute_flops = simulated.step_recompute_flops, .peaks = simulated.peaks,
                 .peak_total = simulated.peak_total, .memory = {}, .findings = simulated.findings,
                 .counters = simulated.counters, .finished = simulated.finished};
  for (Finding& finding : out.findings) finding.rank = rank;
  return out;
}

void replay_full(const Trace& trace, const ReplayOptions& options, ShapeReplayResult& result) {
  SimOptions sim_options;
  sim_options.world = result.world;
  sim_options.hardware = options.hardware;
  sim_options.jitter_fraction = 0.0;        // the prediction is the cost model's, not a sample
  sim_options.fiber_stack_bytes = 1 << 20;  // the engine and the driver run on the fiber stacks
  // Hierarchical sharding splits the world, and the matcher offers groups only to ranks that are
  // tasks of their own (collective_matcher.h): then every rank runs its own engine.
  const ZeroConfig& zero = options.config.zero;
  const bool splits = zero.shard_ranks(result.world) < result.world || zero.keeps_secondary(result.world);
  if (options.share_identical_ranks && !splits) sim_options.rank_groups = ranks_by_event_stream(trace, result.world);
  SimWorld world(sim_options);
  const RankGroups& groups = world.groups();
  std::vector<RankReplay> simulated(static_cast<size_t>(groups.tasks()));
  const SimResult sim = world.run([&](SimRank& rank) {
    RankReplay& out = simulated[static_cast<size_t>(rank.task())];
    out.rank = rank.rank();
    out.simulated_rank = rank.rank();
    SimClock clock(rank, options.hardware);
    replay_rank(trace, options, rank.comm(), rank.allocator(), clock, rank.kernels(), out);
  });
  if (!sim.all_ok()) result.failure = failure_of(sim.ranks[static_cast<size_t>(sim.root_cause_rank)]);
  const nlohmann::json& logs = sim.event_log().at("ranks");  // one per fiber
  result.ranks.resize(static_cast<size_t>(result.world));
  result.collectives.resize(static_cast<size_t>(result.world));
  for (int task = 0; task < groups.tasks(); ++task) {
    const size_t lowest = static_cast<size_t>(groups.rank_of(task));
    result.ranks[lowest] = std::move(simulated[static_cast<size_t>(task)]);
    result.collectives[lowest] = collectives_from_event_log(logs.at(static_cast<size_t>(task)));
    // The event log names the level of group collectives only; the world's is the world's size.
    for (TraceCollective& call : result.collectives[lowest]) {
      if (call.level.empty()) call.level = link_level_name(world_level(options.hardware, result.world));
    }
    for (int rank : groups.ranks_of(task)) {
      if (static_cast<size_t>(rank) == lowest) continue;
      result.ranks[static_cast<size_t>(rank)] = sharing_rank(result.ranks[lowest], rank);
    }
  }
  check_same_parameters(logs, groups, result);
}

}  // namespace

const RankReplay& ShapeReplayResult::simulated(const RankReplay& rank) const {
  return ranks.at(static_cast<size_t>(rank.simulated_rank));
}

const std::vector<TraceCollective>& ShapeReplayResult::collectives_of(const RankReplay& rank) const {
  static const std::vector<TraceCollective> none;
  const size_t index = static_cast<size_t>(rank.simulated_rank);
  return index < collectives.size() ? collectives[index] : none;
}

int ShapeReplayResult::exit_code() const {
  if (failure) return failure->exit_code;
  for (const Finding& finding : findings) {
    if (finding.kind == "silent_divergence") return kExitLiveness;
  }
  for (const Finding& finding : findings) {
    if (finding.kind == "raw_placeholder") return kExitCorrectness;
  }
  return kExitOk;
}

int replay_world(const Trace& trace, int requested) {
  if (requested > 0) return requested;
  return trace.world > 0 ? trace.world : 1;
}

ShapeReplayResult replay_trace(const Trace& trace, const ReplayOptions& options) {
  if (!trace.has_events()) throw InputError("trace '" + trace.name + "' has no events to replay in shape mode");
  if (options.config.zero.stage < 1) {
    throw InputError("replay drives the ZeRO engine: zero_optimization.stage must be 1, 2 or 3, got " +
                     std::to_string(options.config.zero.stage));
  }
  ShapeReplayResult result;
  result.world = replay_world(trace, options.world);
  result.steps = total_steps(trace);
  const bool full = trace.divergent() || options.full_simulation;
  result.simulation = full ? "full" : "symmetric";
  if (full) replay_full(trace, options, result);
  else replay_symmetric(trace, options, result);
  std::vector<Finding> cross_rank = std::move(result.findings);
  result.findings.clear();
  for (const RankReplay& rank : result.ranks) result.findings.insert(result.findings.end(), rank.findings.begin(), rank.findings.end());
  result.findings.insert(result.findings.end(), cross_rank.begin(), cross_rank.end());
  return result;
}

}  // namespace zero3
