// `zero3 fuzz --target NAME`: the property harness against an outside framework through a
// differential runner (props/target/target_fuzzer.h, tools/zero3py/runners/PROTOCOL.md).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/base/math_bugs.h"
#include "props/target/target_case.h"

namespace zero3 {

struct TargetCommandOptions {
  std::string target;          // torch, deepspeed, fsdp2, or the name --target-runner answers to
  std::string runner_command;  // --target-runner; empty: the repository's runner in the diff venv
  int64_t cases = 100;
  uint64_t seed = 1;
  int max_ranks = 4;
  std::string out_dir = "fuzz-out";
  std::string report_path;
  std::string replay_path;  // a finding's case.json
  double shrink_budget_s = 300.0;
  TargetSpace space;          // --target-hsdp, --target-transformer, --target-levers
  int64_t findings_max = 0;   // --max-findings; 0: run all the cases
  std::string upstream_path;  // --upstream; empty: the repository's traces/findings/upstream.json
  // --math-bug: planted in zero3's side only (its reference runs in this process; the runner is
  // another process and never sees it), for the whole campaign or replay.
  std::optional<MathBug> math_bug;
};

// Exit 2 (CorrectnessError) when there is a finding, 4 (BackendError) when the runner is broken.
void run_target_fuzz_command(const TargetCommandOptions& options);

}  // namespace zero3
