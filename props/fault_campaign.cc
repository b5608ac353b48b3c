// Runs and classifies the fault campaign (fault_campaign.h).
#include "props/fault_campaign.h"

#include <chrono>
#include <map>
#include <sstream>

#include "core/base/errors.h"
#include "core/zero3/bug_injection.h"
#include "sim/distributed_training.h"
#include "sim/fault_plan.h"

namespace zero3 {

namespace {

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace

std::string fired_kinds(const std::vector<FiredFault>& fired) {
  std::map<std::string, int64_t> counts;
  for (const FiredFault& fault : fired) ++counts[fault_kind_name(fault.kind)];
  std::string text;
  for (const auto& [kind, count] : counts) text += (text.empty() ? "" : ", ") + kind + " x" + std::to_string(count);
  return text.empty() ? "none" : text;
}

namespace {

bool fired(const std::vector<FiredFault>& faults, FaultKind kind) {
  for (const FiredFault& fault : faults) {
    if (fault.kind == kind) return true;
  }
  return false;
}

}  // namespace

FaultRunOutcome classify_failed_run(const DistributedRunResult& result) {
  FaultRunOutcome outcome;
  const std::vector<FiredFault>& faults = result.sim.fired;
  const RankOutcome& root = result.sim.ranks.at(static_cast<size_t>(result.sim.root_cause_rank));
  try {
    std::rethrow_exception(root.exception);
  } catch (const OutOfMemoryError& error) {
    outcome.outcome = fired(faults, FaultKind::alloc) ? FaultOutcome::specific_error : FaultOutcome::unexplained_error;
    outcome.error = "OutOfMemoryError: " + first_line(error.what());
  } catch (const RankCrashedError& error) {
    outcome.outcome = fired(faults, FaultKind::crash) ? FaultOutcome::specific_error : FaultOutcome::unexplained_error;
    outcome.error = "RankCrashedError: " + first_line(error.what());
  } catch (const PeerFailureError& error) {
    outcome.outcome = fired(faults, FaultKind::crash) || fired(faults, FaultKind::alloc)
                          ? FaultOutcome::specific_error
                          : FaultOutcome::unexplained_error;
    outcome.error = "PeerFailureError: " + first_line(error.what());
  } catch (const DeadlockError& error) {
    outcome.outcome = FaultOutcome::hang;
    outcome.error = "DeadlockError: " + first_line(error.what());
  } catch (const CollectiveMismatchError& error) {
    outcome.outcome = FaultOutcome::hang;
    outcome.error = "CollectiveMismatchError: " + first_line(error.what());
  } catch (const std::exception& error) {
    outcome.outcome = FaultOutcome::unexplained_error;
    outcome.error = std::string("error: ") + first_line(error.what());
  } catch (...) {
    outcome.outcome = FaultOutcome::unexplained_error;
    outcome.error = "a non-standard exception";
  }
  return outcome;
}

namespace {

DistributedRunOptions run_options(const FaultCampaignOptions& options) {
  DistributedRunOptions run;
  run.model = options.model;
  run.seed = options.seed;
  run.world = options.world;
  run.steps = options.steps;
  run.config.zero.stage = 3;
  run.config.zero.persistence_threshold = 0;  // every parameter sharded, gathered and released
  return run;
}

}  // namespace

const char* fault_outcome_name(FaultOutcome outcome) {
  switch (outcome) {
    case FaultOutcome::correct: return "correct result";
    case FaultOutcome::specific_error: return "specific error";
    case FaultOutcome::hang: return "hang";
    case FaultOutcome::silent_corruption: return "silent corruption";
    case FaultOutcome::unexplained_error: return "unexplained error";
  }
  return "?";
}

bool FaultCampaign::reliable() const {
  return counts[static_cast<size_t>(FaultOutcome::hang)] == 0 &&
         counts[static_cast<size_t>(FaultOutcome::silent_corruption)] == 0 &&
         counts[static_cast<size_t>(FaultOutcome::unexplained_error)] == 0;
}

FaultRunOutcome classify_finished_run(const DistributedRunResult& run, const DistributedRunResult& fault_free) {
  FaultRunOutcome outcome;
  const StateComparison comparison = compare_runs(run, fault_free);
  outcome.outcome = comparison.bitwise_equal ? FaultOutcome::correct : FaultOutcome::silent_corruption;
  if (!comparison.bitwise_equal) outcome.error = first_line(comparison.first_differences);
  return outcome;
}

FaultCampaign run_fault_campaign(const FaultCampaignOptions& options,
                                 const std::function<void(const FaultRunOutcome&, size_t done)>& on_run) {
  const auto started = std::chrono::steady_clock::now();
  const FaultPlan plan = FaultPlan::parse(options.plan);
  FaultCampaign campaign;
  campaign.options = options;
  const DistributedRunResult reference = run_distributed(run_options(options));
  if (!reference.sim.all_ok()) {
    throw CorrectnessError("fault campaign: the fault-free run failed\n" + reference.sim.summary());
  }
  for (const uint64_t fault_seed : options.fault_seeds) {
    DistributedRunOptions run = run_options(options);
    run.faults = plan;
    run.fault_seed = fault_seed;
    for (const std::string& bug : options.bugs) run.bugs.set(parse_bug(bug));
    const DistributedRunResult result = run_distributed(run);
    FaultRunOutcome outcome;
    if (result.sim.all_ok()) {
      outcome = classify_finished_run(result, reference);
    } else {
      outcome = classify_failed_run(result);
    }
    outcome.fault_seed = fault_seed;
    outcome.fired = fired_kinds(result.sim.fired);
    ++campaign.counts[static_cast<size_t>(outcome.outcome)];
    if (!result.sim.fired.empty()) {
      ++campaign.runs_with_faults;
      if (result.sim.all_ok()) ++campaign.faulted_runs_trained;
    }
    campaign.runs.push_back(outcome);
    if (on_run) on_run(outcome, campaign.runs.size());
  }
  campaign.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return campaign;
}

std::string fault_campaign_table(const FaultCampaign& campaign) {
  std::ostringstream out;
  const FaultCampaignOptions& options = campaign.options;
  out << "Fault campaign: " << options.model << ", W=" << options.world << ", " << options.steps
      << " steps, ZeRO-3 (persistence 0), faults '" << options.plan << "', " << campaign.runs.size()
      << " fault seeds\n\n| outcome | runs |\n|---|---|\n";
  for (int outcome = 0; outcome < kFaultOutcomeCount; ++outcome) {
    out << "| " << fault_outcome_name(static_cast<FaultOutcome>(outcome)) << " | "
        << campaign.counts[static_cast<size_t>(outcome)] << " |\n";
  }
  std::map<std::string, int64_t> errors;
  for (const FaultRunOutcome& run : campaign.runs) {
    if (run.outcome == FaultOutcome::specific_error) ++errors[run.error.substr(0, run.error.find(':'))];
  }
  out << "\nspecific errors by type:";
  for (const auto& [type, count] : errors) out << " " << type << " " << count << ";";
  out << "\nruns where a fault fired: " << campaign.runs_with_faults << ", of which trained to the end: "
      << campaign.faulted_runs_trained << "\n";
  for (const FaultRunOutcome& run : campaign.runs) {
    if (run.outcome == FaultOutcome::correct || run.outcome == FaultOutcome::specific_error) continue;
    out << "  fault seed " << run.fault_seed << ": " << fault_outcome_name(run.outcome) << " (fired: " << run.fired
        << "): " << run.error << "\n";
  }
  return out.str();
}

}  // namespace zero3
