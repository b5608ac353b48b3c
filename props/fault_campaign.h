// The fault campaign: one model trained with ZeRO-3 under many fault seeds, each run's faults
// drawn BUGGIFY style (each kind switched on for the run with probability 1/2, then firing per
// event: per collective, compute step or acquire), and every outcome classified against the
// fault-free run of the same model, seed and config:
//   correct            the run finished and is bitwise equal to the fault-free run
//   specific error     it failed with the error of a fault that fired: OutOfMemoryError after an
//                      allocation failure, RankCrashedError / PeerFailureError after a crash
//   hang               a deadlock or collective mismatch: the faults must never cause one
//   silent corruption  it finished with a different result: delays must never change the bits
//   unexplained error  any other failure, or one no fired fault explains
// `zero3 fuzz --fault-campaign --seeds 1-200` prints the table; the campaign is reliable when
// hangs, silent corruptions and unexplained errors are all 0.
//
//   FaultCampaign campaign = run_fault_campaign({.fault_seeds = {1, 2, 3}});
//   std::fputs(fault_campaign_table(campaign).c_str(), stdout);
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/distributed_training.h"

namespace zero3 {

enum class FaultOutcome { correct, specific_error, hang, silent_corruption, unexplained_error };
inline constexpr int kFaultOutcomeCount = 5;
const char* fault_outcome_name(FaultOutcome outcome);

struct FaultCampaignOptions {
  std::vector<uint64_t> fault_seeds{};
  std::string model = "gpt-tiny";
  uint64_t seed = 1;  // the model's and data's: the same in every run
  int world = 4;
  int64_t steps = 5;
  std::string plan = "all?";  // FaultPlan text: every kind on in half of the runs
  // Engine bugs (core/zero3/bug_injection.h names) in the faulted runs only, the reference staying
  // clean: how the campaign proves it would see a bug that only faults expose.
  std::vector<std::string> bugs{};
};

struct FaultRunOutcome {
  uint64_t fault_seed = 0;
  FaultOutcome outcome = FaultOutcome::correct;
  std::string fired{};  // the kinds that fired, e.g. "late x12, crash x1"
  std::string error{};  // the error's type and first line, for the failures
};

struct FaultCampaign {
  FaultCampaignOptions options;
  std::vector<FaultRunOutcome> runs{};
  std::array<int64_t, kFaultOutcomeCount> counts{};
  int64_t runs_with_faults = 0;     // at least one fault fired
  int64_t faulted_runs_trained = 0;  // of those, finished training (correct or corrupt)
  double seconds = 0.0;
  bool reliable() const;  // no hang, silent corruption or unexplained error
};

// A faulted run that finished, against the fault-free one: correct only when bitwise equal in
// everything compare_runs holds (losses, grad norms, and every rank's final parameters and AdamW
// moments), else silent corruption with the first difference. A corruption that shows only in the
// final state (the last update) must not pass.
FaultRunOutcome classify_finished_run(const DistributedRunResult& run, const DistributedRunResult& fault_free);

// A failed run's outcome from its root cause's type and the faults that fired: a specific error
// only when a fired fault explains it (an OutOfMemoryError after an alloc fault, ...).
FaultRunOutcome classify_failed_run(const DistributedRunResult& result);
// "late x12, crash x1", or "none".
std::string fired_kinds(const std::vector<FiredFault>& fired);

// `on_run` after each run (progress). InputError for an unknown model or a bad plan.
FaultCampaign run_fault_campaign(const FaultCampaignOptions& options,
                                 const std::function<void(const FaultRunOutcome&, size_t done)>& on_run = {});
// The reliability table (markdown), then each failure that is not a specific error.
std::string fault_campaign_table(const FaultCampaign& campaign);

}  // namespace zero3
