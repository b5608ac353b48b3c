// The campaign behind `zero3 fuzz --target NAME`: generated target cases (target_case.h) trained
// by an outside framework through a differential runner, each answer judged (target_verdict.h).
// A finding is shrunk by RapidCheck — a smaller case is accepted only when it fails with the same
// signature — and the campaign then goes on with a fresh seed, counting later cases with a known
// signature as hits of that finding, until the case budget is spent. So one campaign reports every
// distinct failure it meets, each as its smallest case.
//
//   TargetFuzzReport report = run_target_fuzz({.cases = 100, .seed = 7, .work_dir = "fuzz-out/work"},
//                                             [&](const std::string& dir, double timeout_s) { return runner.ask(dir, timeout_s); });
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "props/target_case.h"
#include "props/target_verdict.h"

namespace zero3 {

// Trains the case directory and returns the runner's answer (PROTOCOL.md); throws BackendError
// when the runner is broken.
using AskRunner = std::function<nlohmann::json(const std::string& case_directory, double timeout_s)>;

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
  bool shard_groups = false;              // also draw HSDP blocks (gen_target_case)
  std::function<void(const TargetProgress&)> on_progress{};
  std::function<void(const TargetFinding&)> on_found{};  // a new signature, before shrinking
};

struct TargetFuzzReport {
  std::vector<TargetFinding> findings;
  int64_t cases = 0;        // generated cases judged (shrink candidates not counted)
  int64_t unsupported = 0;  // of them, cases the target cannot express
  double seconds = 0.0;     // shrinking included
};

TargetFuzzReport run_target_fuzz(const TargetFuzzOptions& options, const AskRunner& ask);

// One case through the runner and both judgements (also `--replay`): the case is written to
// `directory`, its answer stored in *answer.
TargetVerdict judge_target_case(const TargetCase& target_case, const std::string& directory, const AskRunner& ask,
                                const std::string& runner, nlohmann::json* answer);

}  // namespace zero3
