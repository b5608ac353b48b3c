// The fault-tolerance property and the campaign over generated cases behind `zero3 fuzz faults`:
// a generated case (gen_fault_case: any model, stage, lever, group, GAS, bf16, save series) is
// trained with its fault plan and again without, and the faulted run must end as the fault
// campaign's classes allow (fault_campaign.h): bitwise equal to the fault-free run, or the specific
// error of a fault that fired — never a hang, a silent corruption or an unexplained error. When the
// case saves a checkpoint series, the newest complete checkpoint the faulted run left must load and
// equal, file for file and bit for bit, the one the fault-free run saved at that step: a crash
// mid-save leaves the last complete checkpoint as it was.
//
//   FaultCaseRun run = run_fault_case(*gen_fault_case({}));
//   FaultSiteTable table;  table.add(run);  std::puts(table.markdown().c_str());
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "props/fault_campaign.h"
#include "props/fuzz_case.h"
#include "props/properties.h"
#include "sim/fault_plan.h"

namespace zero3 {

struct FaultCaseRun {
  FaultRunOutcome outcome;
  std::vector<FiredFault> fired;
  // The checkpoint check's finding ("" when it held or the case saves nothing): a hang-free, correct
  // or specific run whose last complete checkpoint is missing, unreadable or different fails.
  std::string checkpoint_problem;
  int64_t checkpoint_step_checked = 0;  // the step of the checkpoint compared; 0: none to compare
};

// Runs the case without and with its faults and classifies the faulted run.
FaultCaseRun run_fault_case(const FuzzCase& fuzz_case);
// The property: ok for a correct result or a specific error with the checkpoint intact.
Verdict check_fault_tolerance(const FuzzCase& fuzz_case);
Verdict fault_tolerance_verdict(const FaultCaseRun& run);

// Every run the property makes is handed here while set (the campaign's table); one at a time.
void set_fault_case_sink(std::function<void(const FuzzCase&, const FaultCaseRun&)> sink);

// Outcomes per site class (FiredFault::site_class): how many faults fired there, in how many runs,
// and how those runs ended. A run counts once for each class where a fault fired.
class FaultSiteTable {
 public:
  void add(const FaultCaseRun& run);
  // Markdown: a row per class reached, then the new paths' classes no fault reached, by name.
  std::string markdown() const;
  // The lever paths' site classes (offload copies and host buffer, recompute, secondary-shard and
  // block gathers, the across-block all-reduce, checkpoint writes) no fault reached.
  std::vector<std::string> unreached_new_sites() const;
  std::array<int64_t, kFaultOutcomeCount> outcomes() const { return outcomes_; }
  int64_t runs() const { return runs_; }
  int64_t checkpoints_checked() const { return checkpoints_checked_; }

 private:
  struct Row {
    int64_t faults = 0;
    int64_t runs = 0;
    std::array<int64_t, kFaultOutcomeCount> outcomes{};
  };
  std::map<std::string, Row> rows_;
  std::array<int64_t, kFaultOutcomeCount> outcomes_{};
  int64_t runs_ = 0;
  int64_t checkpoints_checked_ = 0;
};

}  // namespace zero3
