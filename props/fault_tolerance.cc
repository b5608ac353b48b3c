// The fault-tolerance property and its per-site table (fault_tolerance.h).
#include "props/fault_tolerance.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include "core/base/errors.h"
#include "core/base/fault_points.h"
#include "core/training/checkpoint.h"
#include "core/training/checkpoint_series.h"
#include "props/scratch_folder.h"
#include "sim/distributed_training.h"

namespace zero3 {

namespace {

namespace fs = std::filesystem;

std::function<void(const FuzzCase&, const FaultCaseRun&)>& sink() {
  static std::function<void(const FuzzCase&, const FaultCaseRun&)> current;
  return current;
}

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The step a series folder holds, from its name (step_00000004 -> 4).
int64_t step_of(const fs::path& folder) { return std::stoll(folder.filename().string().substr(5)); }

// The faulted run's newest complete checkpoint against the fault-free run's of the same step: it
// must read back (read_checkpoint validates every file) and hold the same bytes in every file.
std::string compare_last_complete_checkpoint(const std::string& faulted_dir, const std::string& fault_free_dir,
                                             int64_t& step_checked) {
  if (!fs::exists(fs::path(faulted_dir) / kLatestCheckpointFile)) return "";  // no save completed
  fs::path latest;
  try {
    latest = checkpoint_in_series(faulted_dir);
    step_checked = step_of(latest);
    read_checkpoint(latest.string());
  } catch (const std::exception& error) {
    return "the checkpoint series' latest names no loadable checkpoint: " + std::string(error.what());
  }
  const fs::path expected = fs::path(fault_free_dir) / latest.filename();
  std::set<std::string> names;
  for (const fs::path& folder : {latest, expected}) {
    for (const auto& entry : fs::directory_iterator(folder)) names.insert(entry.path().filename().string());
  }
  for (const std::string& name : names) {
    if (!fs::exists(latest / name) || !fs::exists(expected / name)) {
      return "the last complete checkpoint " + latest.filename().string() + " and the fault-free run's differ in " +
             "their files: " + name + " is in only one of them";
    }
    if (file_bytes(latest / name) != file_bytes(expected / name)) {
      return "the last complete checkpoint " + latest.filename().string() + ": " + name +
             " differs from the fault-free run's save of the same step";
    }
  }
  return "";
}

DistributedRunOptions saving(DistributedRunOptions options, const FuzzCase& fuzz_case, const std::string& dir) {
  if (fuzz_case.save_every > 0) {
    options.save_checkpoint = dir;
    options.save_every = fuzz_case.save_every;
  }
  return options;
}

// The new paths' site classes: each must see faults in a campaign (unreached_new_sites).
const std::vector<std::string>& new_site_classes() {
  static const std::vector<std::string> classes = {
      kSiteOffloadDown, kSiteOffloadUp, kSiteOffloadHostBuffer, "recompute gather", "secondary-shard gather",
      "block gather", "across-block all-reduce", kSiteCheckpointWrite, "checkpoint"};
  return classes;
}

}  // namespace

void set_fault_case_sink(std::function<void(const FuzzCase&, const FaultCaseRun&)> new_sink) {
  sink() = std::move(new_sink);
}

FaultCaseRun run_fault_case(const FuzzCase& fuzz_case) {
  const ScratchFolder scratch;
  FuzzCase fault_free_case = fuzz_case;
  fault_free_case.faults = "none";
  const DistributedRunResult fault_free =
      run_distributed(saving(run_options(fault_free_case), fuzz_case, scratch / "fault_free"));
  if (!fault_free.sim.all_ok()) {
    // Not the faults' doing: the other properties own a case that fails without them.
    throw CorrectnessError("fault-tolerance: the fault-free run failed\n" + fault_free.sim.summary());
  }
  const DistributedRunResult faulted = run_distributed(saving(run_options(fuzz_case), fuzz_case, scratch / "faulted"));
  FaultCaseRun run;
  run.outcome = faulted.sim.all_ok() ? classify_finished_run(faulted, fault_free) : classify_failed_run(faulted);
  run.outcome.fired = fired_kinds(faulted.sim.fired);
  run.fired = faulted.sim.fired;
  if (fuzz_case.save_every > 0) {
    run.checkpoint_problem =
        compare_last_complete_checkpoint(scratch / "faulted", scratch / "fault_free", run.checkpoint_step_checked);
  }
  if (sink()) sink()(fuzz_case, run);
  return run;
}

Verdict fault_tolerance_verdict(const FaultCaseRun& run) {
  const FaultOutcome outcome = run.outcome.outcome;
  if (outcome != FaultOutcome::correct && outcome != FaultOutcome::specific_error) {
    return {.ok = false,
            .message = std::string(fault_outcome_name(outcome)) + " (fired: " + run.outcome.fired + "): " + run.outcome.error};
  }
  if (!run.checkpoint_problem.empty()) {
    return {.ok = false, .message = run.checkpoint_problem + " (fired: " + run.outcome.fired + ")"};
  }
  return {};
}

Verdict check_fault_tolerance(const FuzzCase& fuzz_case) { return fault_tolerance_verdict(run_fault_case(fuzz_case)); }

void FaultSiteTable::add(const FaultCaseRun& run) {
  const size_t outcome = static_cast<size_t>(run.outcome.outcome);
  ++runs_;
  ++outcomes_[outcome];
  if (run.checkpoint_step_checked > 0) ++checkpoints_checked_;
  std::set<std::string> classes;
  for (const FiredFault& fault : run.fired) {
    ++rows_[fault.site_class].faults;
    classes.insert(fault.site_class);
  }
  for (const std::string& site_class : classes) {
    Row& row = rows_[site_class];
    ++row.runs;
    ++row.outcomes[outcome];
  }
}

std::vector<std::string> FaultSiteTable::unreached_new_sites() const {
  std::vector<std::string> unreached;
  for (const std::string& site_class : new_site_classes()) {
    if (rows_.find(site_class) == rows_.end()) unreached.push_back(site_class);
  }
  return unreached;
}

std::string FaultSiteTable::markdown() const {
  std::ostringstream out;
  out << "| site | faults fired | runs | correct | specific error | hang | silent corruption | unexplained |\n"
      << "|---|---|---|---|---|---|---|---|\n";
  const auto row_text = [&](const std::string& name, int64_t faults, int64_t runs,
                            const std::array<int64_t, kFaultOutcomeCount>& outcomes) {
    out << "| " << name << " | " << faults << " | " << runs;
    for (int64_t count : outcomes) out << " | " << count;
    out << " |\n";
  };
  for (const auto& [site_class, row] : rows_) row_text(site_class, row.faults, row.runs, row.outcomes);
  int64_t faults = 0;
  for (const auto& [site_class, row] : rows_) faults += row.faults;
  row_text("**all runs**", faults, runs_, outcomes_);
  const std::vector<std::string> unreached = unreached_new_sites();
  out << "\nnew paths' sites no fault reached: ";
  if (unreached.empty()) out << "none";
  for (size_t i = 0; i < unreached.size(); ++i) out << (i ? ", " : "") << unreached[i];
  out << "\nsaved checkpoint series compared with the fault-free run's: " << checkpoints_checked_ << " runs\n";
  return out.str();
}

}  // namespace zero3
