// The harness's properties as functions of a case (see properties.h).
#include "props/properties.h"

#include <memory>

#include "core/training/checkpoint.h"
#include "core/base/errors.h"
#include "core/base/hash.h"
#include "core/models/model_zoo.h"
#include "props/lifecycle/lifecycle_checker.h"
#include "props/model_facts.h"
#include "props/scratch_folder.h"

namespace zero3 {

namespace {

Verdict fail(std::string message) {
  while (!message.empty() && message.back() == '\n') message.pop_back();
  return {.ok = false, .message = std::move(message)};
}

std::string root_cause_text(const SimResult& sim) {
  return "rank " + std::to_string(sim.root_cause_rank) + ": " + sim.root_cause();
}

template <class Error>
bool is_error(const std::exception_ptr& error) {
  if (!error) return false;
  try {
    std::rethrow_exception(error);
  } catch (const Error&) {
    return true;
  } catch (...) {
    return false;
  }
}

bool is_collective_report(const std::exception_ptr& error) {
  return is_error<CollectiveMismatchError>(error) || is_error<DeadlockError>(error);
}

// Empty when equal; otherwise why not. A failed reference is a harness bug: it must only
// generate cases the unsharded reference can train.
std::string differences_between_runs(const DistributedRunResult& zero3, const DistributedRunResult& reference) {
  if (!reference.sim.all_ok()) return "the DDP reference itself failed, " + root_cause_text(reference.sim);
  const StateComparison comparison = compare_runs(zero3, reference);
  if (comparison.bitwise_equal) return "";
  return "ZeRO-3 differs from the DDP reference (#wrong " + std::to_string(comparison.wrong) + ", max diff " +
         std::to_string(comparison.max_abs_diff) + "):\n" + comparison.first_differences;
}

std::string differences_from_reference(const FuzzCase& fuzz_case, const DistributedRunResult& zero3) {
  return differences_between_runs(zero3, run_distributed(reference_options(fuzz_case)));
}

// Two full states (master weights and moments by id) bit for bit; empty when equal.
std::string state_differences(std::vector<OptimizerSlot> actual, std::vector<OptimizerSlot> expected) {
  DistributedRunResult a, b;
  a.final_state = std::move(actual);
  b.final_state = std::move(expected);
  const StateComparison comparison = compare_runs(a, b);
  if (comparison.bitwise_equal) return "";
  return "#wrong " + std::to_string(comparison.wrong) + ", max diff " + std::to_string(comparison.max_abs_diff) +
         ":\n" + comparison.first_differences;
}

}  // namespace

const char* run_outcome_name(RunOutcome outcome) {
  switch (outcome) {
    case RunOutcome::equal: return "equal";
    case RunOutcome::specific_error: return "specific error";
    case RunOutcome::silent_mismatch: return "silent mismatch";
    case RunOutcome::unspecific_error: return "unspecific error";
  }
  return "unknown";
}

namespace {

// Counts placeholder reads; one per rank, so failures on any rank leave the count intact.
class PlaceholderReadCounter : public EngineObserver {
 public:
  void on_placeholder_read(const Parameter&, ParamStatus) override { ++reads; }
  int64_t reads = 0;
};

}  // namespace

ClassifiedRun classify_run(const FuzzCase& fuzz_case) {
  DistributedRunOptions options = run_options(fuzz_case);
  std::vector<PlaceholderReadCounter> counters(static_cast<size_t>(fuzz_case.world));
  options.observer_for_rank = [&](int rank) { return &counters[static_cast<size_t>(rank)]; };
  const DistributedRunResult zero3 = run_distributed(options);
  int64_t reads = 0;
  for (const PlaceholderReadCounter& counter : counters) reads += counter.reads;
  if (!zero3.sim.all_ok()) {
    const RankOutcome& root = zero3.sim.ranks[static_cast<size_t>(zero3.sim.root_cause_rank)];
    const bool typed = is_error<Zero3Error>(root.exception);
    return {typed ? RunOutcome::specific_error : RunOutcome::unspecific_error, root_cause_text(zero3.sim), reads};
  }
  const DistributedRunResult reference = run_distributed(reference_options(fuzz_case));
  const std::string differences = differences_between_runs(zero3, reference);
  if (!reference.sim.all_ok()) return {RunOutcome::unspecific_error, differences, reads};
  return {differences.empty() ? RunOutcome::equal : RunOutcome::silent_mismatch, differences, reads};
}

Verdict check_equivalence(const FuzzCase& fuzz_case) {
  const DistributedRunResult zero3 = run_distributed(run_options(fuzz_case));
  if (!zero3.sim.all_ok()) return fail("ZeRO-3 failed where DDP trains, " + root_cause_text(zero3.sim));
  const std::string differences = differences_from_reference(fuzz_case, zero3);
  if (!differences.empty()) return fail(differences);
  return {};
}

Verdict check_device_agreement(const FuzzCase& fuzz_case) {
  FuzzCase on_cpu = fuzz_case;
  on_cpu.device = Device::cpu;
  FuzzCase on_opaque = fuzz_case;
  on_opaque.device = Device::opaque;
  const DistributedRunResult cpu = run_distributed(run_options(on_cpu));
  if (!cpu.sim.all_ok()) return fail("the run on cpu failed, " + root_cause_text(cpu.sim));
  const DistributedRunResult opaque = run_distributed(run_options(on_opaque));
  if (!opaque.sim.all_ok()) return fail("the run on the opaque device failed where cpu trains, " + root_cause_text(opaque.sim));
  const StateComparison comparison = compare_runs(opaque, cpu);
  if (!comparison.bitwise_equal) return fail("the opaque device differs from cpu:\n" + comparison.first_differences);
  return {};
}

Verdict check_no_silent_failure(const FuzzCase& fuzz_case) {
  return no_silent_failure_verdict(classify_run(fuzz_case));
}

Verdict no_silent_failure_verdict(const ClassifiedRun& run) {
  if (run.outcome == RunOutcome::silent_mismatch) return fail("silent failure: the run completed, but " + run.detail);
  if (run.outcome == RunOutcome::unspecific_error) return fail("the run ended in an unspecific error, " + run.detail);
  return {};
}

Verdict check_lifecycle(const FuzzCase& fuzz_case) {
  const ModelFacts facts = model_facts(fuzz_case.model_spec, fuzz_case.config.zero.leaf_modules);
  std::vector<std::unique_ptr<LifecycleChecker>> checkers(static_cast<size_t>(fuzz_case.world));
  DistributedRunOptions options = run_options(fuzz_case);
  // Called on each rank's fiber; the fibers share one thread, so filling the vector is safe.
  options.observer_for_rank = [&](int rank) {
    auto& checker = checkers[static_cast<size_t>(rank)];
    checker = std::make_unique<LifecycleChecker>(fuzz_case.config, facts);
    return checker.get();
  };
  const DistributedRunResult result = run_distributed(options);
  for (size_t rank = 0; rank < checkers.size(); ++rank) {
    if (checkers[rank] && !checkers[rank]->violations().empty()) {
      return fail("lifecycle invariant broken on rank " + std::to_string(rank) + ": " +
                  checkers[rank]->violations().front());
    }
  }
  if (!result.sim.all_ok()) return fail("ZeRO-3 failed where DDP trains, " + root_cause_text(result.sim));
  return {};
}

Verdict check_collective_agreement(const FuzzCase& fuzz_case) {
  const DistributedRunResult reference = run_distributed(reference_options(fuzz_case));
  const DistributedRunResult diverged = run_distributed(run_options(fuzz_case));
  if (diverged.sim.all_ok()) {
    // Routing may agree on every rank; then the run is SPMD after all and must be exact.
    const std::string differences = differences_between_runs(diverged, reference);
    if (!differences.empty()) {
      return fail("the rank-divergent run completed without a collective report, with corrupted state: " +
                  differences);
    }
  } else {
    for (size_t rank = 0; rank < diverged.sim.ranks.size(); ++rank) {
      const RankOutcome& outcome = diverged.sim.ranks[rank];
      if (outcome.ok || !is_error<LivenessError>(outcome.exception)) {
        return fail("rank " + std::to_string(rank) + " did not get the collective report: " +
                    (outcome.ok ? std::string("it finished") : outcome.error));
      }
    }
    const RankOutcome& root = diverged.sim.ranks[static_cast<size_t>(diverged.sim.root_cause_rank)];
    if (!is_collective_report(root.exception)) {
      return fail("the rank-divergent run ended without a mismatch or deadlock report, " +
                  root_cause_text(diverged.sim));
    }
    // Under HSDP every collective after the split runs in a block or across blocks, so the report
    // must say which group's ranks diverged ("in group 1 (ranks 2,3)"), not blame the world.
    const bool blocks = fuzz_case.config.zero.shard_ranks(fuzz_case.world) < fuzz_case.world;
    if (blocks && root.error.find(" in group ") == std::string::npos) {
      return fail("the rank-divergent HSDP run's report does not name the group it diverged in, " +
                  root_cause_text(diverged.sim));
    }
  }
  FuzzCase with_leaf = fuzz_case;
  with_leaf.config.zero.leaf_modules = {"moe"};
  const DistributedRunResult leaf = run_distributed(run_options(with_leaf));
  if (!leaf.sim.all_ok()) return fail("with zero3_leaf_modules [\"moe\"] the run failed, " + root_cause_text(leaf.sim));
  const std::string differences = differences_between_runs(leaf, reference);
  if (!differences.empty()) return fail("with zero3_leaf_modules [\"moe\"]: " + differences);
  return {};
}

Verdict check_determinism(const FuzzCase& fuzz_case) {
  const DistributedRunResult first = run_distributed(run_options(fuzz_case));
  const DistributedRunResult second = run_distributed(run_options(fuzz_case));
  if (first.sim.event_log_hash != second.sim.event_log_hash) {
    return fail("the same case gave event-log hashes " + hex64(first.sim.event_log_hash) + " and " +
                hex64(second.sim.event_log_hash));
  }
  if (first.sim.root_cause_rank != second.sim.root_cause_rank || first.sim.root_cause() != second.sim.root_cause()) {
    return fail("the same case ended differently: '" + first.sim.root_cause() + "' vs '" + second.sim.root_cause() +
                "'");
  }
  if (first.sim.all_ok()) {
    const StateComparison comparison = compare_runs(first, second);
    if (!comparison.bitwise_equal)
      return fail("the same case trained to different states:\n" + comparison.first_differences);
  }
  return {};
}

Verdict check_checkpoint_round_trip(const FuzzCase& fuzz_case) {
  const CheckpointPlan& plan = fuzz_case.checkpoint;
  if (plan.save_at_step < 1 || plan.save_at_step >= fuzz_case.steps) {
    return fail("the case has no checkpoint between its steps (save_at_step " + std::to_string(plan.save_at_step) +
                " of " + std::to_string(fuzz_case.steps) + ")");
  }
  const std::string at_k = "step " + std::to_string(plan.save_at_step);
  const ScratchFolder scratch;

  // ZeRO-3 on W1 saves at step k and trains on; the DDP reference does the same.
  DistributedRunOptions zero3_saving = run_options(fuzz_case);
  zero3_saving.save_checkpoint = scratch / "zero3";
  zero3_saving.save_at_step = plan.save_at_step;
  DistributedRunOptions reference_saving = reference_options(fuzz_case);
  reference_saving.save_checkpoint = scratch / "reference";
  reference_saving.save_at_step = plan.save_at_step;
  const DistributedRunResult uninterrupted = run_distributed(zero3_saving);
  if (!uninterrupted.sim.all_ok()) {
    return fail("ZeRO-3 failed in the run that saves at " + at_k + ", " + root_cause_text(uninterrupted.sim));
  }
  const DistributedRunResult reference = run_distributed(reference_saving);
  std::string differences = differences_between_runs(uninterrupted, reference);
  if (!differences.empty()) return fail("the run that saved at " + at_k + ": " + differences);

  // Consolidation: the sharded checkpoint, rewritten whole, holds the reference's state at step k.
  // A checkpoint ZeRO-3 wrote that its own reader refuses is a verdict on the engine (a refused
  // reference checkpoint stays a harness error: it is thrown on).
  try {
    consolidate_checkpoint(scratch / "zero3", scratch / "consolidated");
  } catch (const InputError& error) {
    return fail("the checkpoint ZeRO-3 saved at " + at_k + " is refused when read: " + error.what());
  }
  differences = state_differences(read_checkpoint(scratch / "consolidated").full,
                                  read_checkpoint(scratch / "reference").full);
  if (!differences.empty()) {
    return fail("the consolidated checkpoint differs from the DDP reference at " + at_k + " (" + differences + ")");
  }

  // Resume on W2: ZeRO-3 from its sharded checkpoint, the reference from its own.
  FuzzCase resumed_case = fuzz_case;
  resumed_case.world = plan.resume_world;
  DistributedRunOptions zero3_resuming = run_options(resumed_case);
  zero3_resuming.load_checkpoint = scratch / "zero3";
  DistributedRunOptions reference_resuming = reference_options(resumed_case);
  reference_resuming.load_checkpoint = scratch / "reference";
  const std::string resumed_on = "resumed at " + at_k + " on W=" + std::to_string(plan.resume_world);
  const DistributedRunResult resumed = run_distributed(zero3_resuming);
  if (!resumed.sim.all_ok()) return fail("ZeRO-3 " + resumed_on + " failed, " + root_cause_text(resumed.sim));
  differences = differences_between_runs(resumed, run_distributed(reference_resuming));
  if (!differences.empty()) return fail("ZeRO-3 " + resumed_on + ": " + differences);
  if (plan.resume_world == fuzz_case.world) {
    DistributedRunResult later_steps = uninterrupted;
    later_steps.steps.erase(later_steps.steps.begin(), later_steps.steps.begin() + plan.save_at_step);
    const StateComparison comparison = compare_runs(resumed, later_steps);
    if (!comparison.bitwise_equal) {
      return fail("ZeRO-3 " + resumed_on + " differs from the uninterrupted run:\n" + comparison.first_differences);
    }
  }
  return {};
}

}  // namespace zero3
