// The campaign behind `zero3 fuzz --target NAME`: generated target cases (target_case.h) trained
// by an outside framework through a differential runner, each answer judged (target_verdict.h).
// A failure with a new signature counts only once a confirming run of the same case, on fresh
// ranks and with a longer limit (five times the case's, at least 300 s, for a hang), fails the
// same way: one that does not is logged as flaky, never a finding, so a busy machine cannot turn a
// slow case into a hang. A finding is then shrunk by RapidCheck — a smaller case is accepted only
// when it fails with the same signature — and its smallest case, when smaller than the generated
// one, confirmed again alone (when that run does not fail the same way, the confirmed generated
// case is kept instead). The campaign then goes on with a fresh seed, counting later cases with a
// known signature as hits of that finding, until the case budget is spent (or `findings_max`
// findings are kept). So one campaign reports every distinct failure it meets, each as its
// smallest case that fails twice.
//
//   TargetFuzzReport report = run_target_fuzz({.cases = 100, .seed = 7, .work_dir = "fuzz-out/work"},
//       [&](const std::string& dir, const RunRequest& run) { return runner.ask(dir, run.timeout_s, run.fresh); });
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "props/target/target_case.h"
#include "props/target/target_verdict.h"

namespace zero3 {

// How a case is run: its limit, and `fresh` for a confirming run (the runner starts new ranks
// first: nothing an earlier case left in them can matter; PROTOCOL.md's "fresh").
struct RunRequest {
  double timeout_s = 0.0;  // judge_target_case: 0 is the case's own timeout_s
  bool fresh = false;
};

// Trains the case directory and returns the runner's answer (PROTOCOL.md); throws BackendError
// when the runner is broken.
using AskRunner = std::function<nlohmann::json(const std::string& case_directory, const RunRequest& run)>;

// The limit of a confirming run: a hang gets five times the case's limit and at least 300 s (a
// case that only ran slow on a busy machine then finishes); any other failure twice the limit.
double confirm_timeout_s(const TargetVerdict& verdict, double case_timeout_s);

// A failure that a confirming run of the same case did not repeat: logged, never a finding.
struct FlakyCase {
  std::string description;  // describe(case)
  TargetVerdict first;      // what the first run gave
  TargetVerdict confirm;    // what the confirming run gave (agree, or another failure)
  double confirm_timeout_s = 0.0;
  int64_t at_case = 0;      // 0 for a shrunk case that did not confirm
};

struct TargetFinding {
  TargetVerdict verdict;     // of the shrunk case
  TargetCase shrunk;
  nlohmann::json answer;     // the runner's answer to the shrunk case
  std::string case_directory;  // the shrunk case's directory, kept
  int64_t first_case = 0;    // 1-based number of the generated case that first showed it
  std::string first_case_description;
  std::string first_message;
  int64_t hits = 1;          // generated cases with this signature (shrinking not counted)
  int64_t shrinks_tried = 0;
  int64_t shrinks_accepted = 0;
  double shrink_seconds = 0.0;
  bool shrink_budget_spent = false;  // shrinking stopped early: the case may shrink further
  // The confirming runs (fresh ranks, confirm_timeout_s): of the generated case, then of the
  // shrunk one; `shrunk_confirmed` false means the shrunk case did not fail again and `shrunk` is
  // the generated case.
  double confirm_timeout_s = 0.0;
  bool shrunk_confirmed = true;
};

struct TargetProgress {
  int64_t cases = 0;  // generated cases judged
  int64_t cases_total = 0;
  int64_t findings = 0;
  bool shrinking = false;
  int64_t shrinks_tried = 0;
  double elapsed_s = 0.0;
};

struct TargetFuzzOptions {
  int64_t cases = 100;
  uint64_t seed = 1;
  int max_ranks = 4;
  std::string work_dir = "fuzz-out/work";  // case directories are written here while they run
  std::string runner = "runner";          // named in errors
  double shrink_budget_s = 300.0;         // per finding: beyond it, candidates are not run
  TargetSpace space{};                    // what gen_target_case draws beyond the first space
  // End the campaign once this many findings are kept (0: run all `cases`): a check that only asks
  // whether something is caught need not spend the rest of its budget.
  int64_t findings_max = 0;
  std::function<void(const TargetProgress&)> on_progress{};
  std::function<void(const TargetFinding&)> on_found{};  // a new signature, confirmed, before shrinking
  std::function<void(const TargetVerdict&, double confirm_timeout_s)> on_confirming{};  // before a confirming run
  std::function<void(const FlakyCase&)> on_flaky{};
};

struct TargetFuzzReport {
  std::vector<TargetFinding> findings;
  int64_t cases = 0;        // generated cases judged (shrink candidates not counted)
  int64_t unsupported = 0;  // of them, cases the target cannot express
  double seconds = 0.0;     // shrinking included
  std::vector<FlakyCase> flaky;  // failures no confirming run repeated
};

TargetFuzzReport run_target_fuzz(const TargetFuzzOptions& options, const AskRunner& ask);

// One case through the runner and both judgements (also `--replay`): the case is written to
// `directory`, its answer stored in *answer.
TargetVerdict judge_target_case(const TargetCase& target_case, const std::string& directory, const AskRunner& ask,
                                const std::string& runner, nlohmann::json* answer, const RunRequest& run = {});

}  // namespace zero3
