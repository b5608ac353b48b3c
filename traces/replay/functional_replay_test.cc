// Functional replay: a fuzzer-style case reproduces its failure bit for bit (message and event log
// hash), a liveness failure is told from a wrong result, and a fixed case says it no longer fails.
#include <gtest/gtest.h>

#include "traces/replay/functional_replay.h"

namespace zero3 {
namespace {

Trace fuzz_case(const std::string& model, const nlohmann::json& config, const std::vector<std::string>& inject) {
  Trace trace;
  trace.source = "fuzz";
  trace.run = TraceRun{.model_spec = model, .world = 3, .seed = 11, .steps = 2, .config = config, .inject = inject,
                       .faults = "none"};
  return trace;
}

TEST(FunctionalReplay, AnInjectedBugIsFoundAndTheCaseReproducesItBitForBit) {
  Trace trace = fuzz_case("mlp-tiny", {{"gradient_accumulation_steps", 2}}, {"gas-scale-twice"});
  const FunctionalOutcome found = run_functional_case(*trace.run);
  EXPECT_EQ(found.property, kPropertyEqualToDdp);
  EXPECT_EQ(found.exit_code, 2);
  EXPECT_NE(found.message.find("differs from the DDP reference"), std::string::npos) << found.message;
  // Written back as a case file and read again, as the fuzzer and `zero3 replay` do.
  trace.expected = TraceExpectation{.property = found.property, .message = found.message,
                                    .event_log_hash = found.event_log_hash};
  const Trace read_back = read_trace(nlohmann::json::parse(trace_to_text(trace)), "case.json");
  const FunctionalOutcome replayed = replay_functional(read_back, trace_to_json(trace), "case.json");
  EXPECT_TRUE(replayed.reproduced) << replayed.verdict;
  EXPECT_EQ(replayed.message, found.message);
  EXPECT_EQ(replayed.event_log_hash, found.event_log_hash);
}

TEST(FunctionalReplay, RanksThatIssueDifferentCollectivesFailTheRunsCleanProperty) {
  // moe-tiny routes each rank's rows to different experts: without the leaf policy ranks diverge.
  const Trace trace = fuzz_case("moe-tiny", nlohmann::json::object(), {});
  const FunctionalOutcome outcome = run_functional_case(*trace.run);
  EXPECT_EQ(outcome.property, kPropertyRunsClean);
  EXPECT_EQ(outcome.exit_code, 3);
  EXPECT_NE(outcome.message.find("experts"), std::string::npos) << outcome.message;
}

TEST(FunctionalReplay, ACaseWhoseBugIsGoneIsReportedAsNotReproduced) {
  Trace trace = fuzz_case("mlp-tiny", {{"gradient_accumulation_steps", 2}}, {});
  trace.expected = TraceExpectation{.property = kPropertyEqualToDdp, .message = "", .event_log_hash = ""};
  const FunctionalOutcome outcome = replay_functional(trace, trace_to_json(trace), "case.json");
  EXPECT_TRUE(outcome.property.empty()) << outcome.message;
  EXPECT_FALSE(outcome.reproduced);
  EXPECT_NE(outcome.verdict.find("NOT REPRODUCED"), std::string::npos);
}

TEST(FunctionalReplay, APropertyTheCheckerKnowsIsJudgedByTheCheckerWithItsExactMessage) {
  Trace trace = fuzz_case("mlp-tiny", nlohmann::json::object(), {});
  trace.expected = TraceExpectation{.property = "equivalence", .message = "first difference at x", .event_log_hash = ""};
  int calls = 0;
  const PropertyChecker checker = [&](const std::string& property, const nlohmann::json& json, const std::string&)
      -> std::optional<PropertyCheck> {
    ++calls;
    if (property != "equivalence" || json.at("source") != "fuzz") return std::nullopt;
    return PropertyCheck{.ok = false, .message = "first difference at x"};
  };
  const FunctionalOutcome outcome = replay_functional(trace, trace_to_json(trace), "case.json", checker);
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(outcome.reproduced) << outcome.verdict;
  EXPECT_EQ(outcome.exit_code, 2);
  trace.expected->message = "with bug b: first difference at x";  // the fuzzer's note on the injection
  EXPECT_TRUE(replay_functional(trace, trace_to_json(trace), "case.json", checker).reproduced);
  trace.expected->message = "first difference at y";  // a different message is not a reproduction
  EXPECT_FALSE(replay_functional(trace, trace_to_json(trace), "case.json", checker).reproduced);
}

}  // namespace
}  // namespace zero3
