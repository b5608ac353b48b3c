// Functional replay: a trace that carries a model spec and a run section (the fuzzer's
// counterexample case files, `zero3 train --record` traces) is re-run exactly with
// run_distributed, and the property its `expected` names is checked again.
//
// Properties come from two places. The fuzzer's own (props/: equivalence, no-silent-failure,
// collective-agreement, lifecycle, determinism) are checked by the fuzzer's code, handed in as a
// PropertyChecker by the CLI, so a counterexample's message is recomputed by the very function
// that wrote it and compares bit for bit; traces/ itself does not depend on props/. Without one,
// replay checks its own two: ZeRO-3 with the recorded injections and faults runs clean
// (`runs_clean`), then equals the DDP reference bit for bit (`equal_to_ddp`).
//
//   FunctionalOutcome outcome = replay_functional(trace, json, "case.json", fuzz_property_checker);
//   if (!outcome.reproduced) std::puts(outcome.verdict.c_str());
#pragma once
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/distributed_training.h"
#include "traces/format/trace.h"

namespace zero3 {

inline constexpr const char* kPropertyRunsClean = "runs_clean";     // no rank ends in an error
inline constexpr const char* kPropertyEqualToDdp = "equal_to_ddp";  // ZeRO-3 == DDP, bit for bit

struct PropertyCheck {
  bool ok = true;
  std::string message{};
};
// Checks `property` on the case file `case_json` (read from `source`); nullopt when it does not
// know the property.
using PropertyChecker =
    std::function<std::optional<PropertyCheck>(const std::string& property, const nlohmann::json& case_json,
                                               const std::string& source)>;

struct FunctionalOutcome {
  std::string property{};        // the property that failed; "" when the run passed
  std::string message{};         // that failure's message
  std::string event_log_hash{};  // of the ZeRO-3 run (runs_clean / equal_to_ddp only)
  int exit_code = 0;             // of the failure (1-4), 0 when the run passed
  bool has_expectation = false;
  bool reproduced = false;       // the expected property fails again, with the expected message
  std::string verdict{};         // one paragraph for a person
};

// The run a functional trace describes: ZeRO-3 with its config, injections and faults.
DistributedRunOptions functional_run_options(const TraceRun& run);
// runs_clean, then equal_to_ddp, on the run. InputError for a bad spec or config.
FunctionalOutcome run_functional_case(const TraceRun& run);
// The expected property checked again (by `checker` when it knows it), compared with `expected`.
FunctionalOutcome replay_functional(const Trace& trace, const nlohmann::json& case_json, const std::string& source,
                                    const PropertyChecker& checker = {});

}  // namespace zero3
