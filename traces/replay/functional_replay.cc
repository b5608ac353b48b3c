// Re-running a functional trace with run_distributed and judging it against its expectation.
#include "traces/replay/functional_replay.h"

#include "core/base/errors.h"
#include "core/base/hash.h"
#include "core/models/model_zoo.h"

namespace zero3 {

DistributedRunOptions functional_run_options(const TraceRun& run) {
  DistributedRunOptions options;
  // An inline spec is built in memory; a string names a built-in model (or a spec file).
  if (run.model_spec.is_object()) options.model_spec = run.model_spec;
  else options.model = run.model_spec.get<std::string>();
  options.seed = run.seed;
  options.world = run.world;
  options.steps = run.steps;
  std::vector<std::string> warnings;
  options.config = parse_train_config(run.config, "run/config", &warnings);
  options.config.zero.stage = 3;
  for (const std::string& name : run.inject) options.bugs.set(parse_bug(name));
  options.faults = FaultPlan::parse(run.faults);
  return options;
}

FunctionalOutcome run_functional_case(const TraceRun& run) {
  if (!run.checkpoint.is_null()) {
    throw InputError("a run with a checkpoint round trip is replayed only by the fuzzer's checkpoint-round-trip "
                     "property (set expected.property to it)");
  }
  const DistributedRunOptions zero3 = functional_run_options(run);
  const DistributedRunResult sharded = run_distributed(zero3);
  FunctionalOutcome outcome;
  outcome.event_log_hash = hex64(sharded.sim.event_log_hash);
  if (!sharded.sim.all_ok()) {
    outcome.property = kPropertyRunsClean;
    outcome.message = sharded.sim.root_cause();
    outcome.exit_code = sharded.sim.exit_code();
    return outcome;
  }
  // The reference runs without the injected bugs and faults: it is what the run should have been.
  DistributedRunOptions ddp = zero3;
  ddp.config.zero.stage = 0;
  ddp.bugs = BugInjections{};
  ddp.faults = FaultPlan{};
  const DistributedRunResult reference = run_distributed(ddp);
  if (!reference.sim.all_ok()) {
    throw CorrectnessError("the DDP reference of this case failed on its own: " + reference.sim.root_cause());
  }
  const StateComparison comparison = compare_runs(sharded, reference);
  if (!comparison.bitwise_equal) {
    outcome.property = kPropertyEqualToDdp;
    outcome.message = "ZeRO-3 differs from the DDP reference:\n" + comparison.first_differences;
    outcome.exit_code = kExitCorrectness;
  }
  return outcome;
}

namespace {

// The outcome of a property someone else checks: a failed property is a counterexample (exit 2).
std::optional<FunctionalOutcome> checked_elsewhere(const Trace& trace, const nlohmann::json& case_json,
                                                   const std::string& source, const PropertyChecker& checker) {
  if (!checker || !trace.expected) return std::nullopt;
  const std::optional<PropertyCheck> check = checker(trace.expected->property, case_json, source);
  if (!check) return std::nullopt;
  FunctionalOutcome outcome;
  if (!check->ok) {
    outcome.property = trace.expected->property;
    outcome.message = check->message;
    outcome.exit_code = kExitCorrectness;
  }
  return outcome;
}

}  // namespace

FunctionalOutcome replay_functional(const Trace& trace, const nlohmann::json& case_json, const std::string& source,
                                    const PropertyChecker& checker) {
  if (!trace.run) throw InputError(source + ": has no model_spec and run section to replay functionally");
  std::optional<FunctionalOutcome> elsewhere = checked_elsewhere(trace, case_json, source, checker);
  FunctionalOutcome outcome = elsewhere ? *elsewhere : run_functional_case(*trace.run);
  const std::string observed = outcome.property.empty() ? "the property holds now"
                                                        : "property '" + outcome.property + "' fails: " + outcome.message;
  if (!trace.expected) {
    outcome.verdict = observed;
    return outcome;
  }
  const TraceExpectation& expected = *trace.expected;
  outcome.has_expectation = true;
  // Our own properties are judged by name; a property of the fuzzer's that no checker knows is
  // judged by whether the run fails at all.
  const bool ours = expected.property == kPropertyRunsClean || expected.property == kPropertyEqualToDdp;
  const bool property_matches = (elsewhere || ours) ? outcome.property == expected.property : !outcome.property.empty();
  // The fuzzer saves its property's message behind a note on the injection it credits, so there the
  // recomputed message must appear in the saved one verbatim; ours must equal it.
  const bool message_matches = expected.message.empty() || expected.message == outcome.message ||
                               (elsewhere && !outcome.message.empty() &&
                                expected.message.find(outcome.message) != std::string::npos);
  const bool hash_matches = expected.event_log_hash.empty() || expected.event_log_hash == outcome.event_log_hash;
  outcome.reproduced = property_matches && message_matches && hash_matches;
  std::string why;
  if (property_matches && !message_matches) why = "; the same property fails, but with another message than the saved one";
  if (!hash_matches) why += "; event log hash " + outcome.event_log_hash + " differs from the saved " + expected.event_log_hash;
  outcome.verdict = std::string(outcome.reproduced ? "REPRODUCED" : "NOT REPRODUCED") + " (expected property '" +
                    expected.property + "'" + (elsewhere ? ", checked by the fuzzer's own code" : "") + "): " +
                    observed + why;
  return outcome;
}

}  // namespace zero3
