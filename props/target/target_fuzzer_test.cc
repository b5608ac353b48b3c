// `zero3 fuzz --target` without Python: fake runners answer from zero3's own reference, so the
// campaign's search, judgement, shrinking and deduplication are tested on cases where the truth
// is known. A planted "framework" that asserts on every zero-sized parameter must be found, shrunk
// to a model of at most 3 modules that still has one, and reported once however often it recurs;
// one that drifts its losses must be a silent divergence; a runner that breaks must end the
// campaign with its BackendError, never a finding.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <filesystem>
#include <set>

#include "core/base/errors.h"
#include "core/tensor/safetensors.h"
#include "props/target/memory_verdict.h"
#include "props/target/target_fuzzer.h"

namespace zero3 {
namespace {

bool has_zero_sized_parameter(const std::string& directory) {
  for (const NamedTensor& named : read_safetensors(directory + "/init.safetensors").tensors) {
    if (named.tensor.numel() == 0) return true;
  }
  return false;
}

nlohmann::json side_of(const RunSummary& run, const std::string& path) {
  std::vector<NamedTensor> tensors;
  for (const auto& [name, tensor] : run.weights) tensors.push_back({name, tensor});
  write_safetensors(path, tensors);
  return {{"losses", run.losses}, {"grad_norms", run.grad_norms}, {"weights", path}};
}

// Answers as a runner whose framework and reference both equal zero3's reference, except where
// `mutate` changes the framework's side (or returns a whole other answer).
AskRunner fake_runner(std::function<bool(const std::string& dir, nlohmann::json& answer)> mutate) {
  return [mutate](const std::string& directory, const RunRequest&) {
    const TargetCase target_case = read_target_case(directory + "/case.json");
    const RunSummary reference = zero3_reference_run(target_case);
    nlohmann::json answer = {{"protocol", 1}, {"status", "ok"}, {"case", directory}, {"target", "fake"}};
    answer["reference"] = side_of(reference, directory + "/reference.final.safetensors");
    answer["framework"] = side_of(reference, directory + "/fake.final.safetensors");
    mutate(directory, answer);
    return answer;
  };
}

std::string work_dir(const std::string& name) {
  const std::filesystem::path directory = std::filesystem::temp_directory_path() / ("zero3-target-" + name);
  std::filesystem::remove_all(directory);
  return directory.string();
}

TEST(TargetFuzzer, AFrameworkThatAssertsOnZeroSizedParametersIsFoundOnceAndShrunk) {
  int64_t crashes = 0;
  const AskRunner ask = fake_runner([&](const std::string& directory, nlohmann::json& answer) {
    if (!has_zero_sized_parameter(directory)) return false;
    crashes++;
    answer = {{"protocol", 1}, {"status", "crash"}, {"stuck", {1}},
              {"ranks", {{{"rank", 0}, {"state", "exception"}, {"exception_type", "builtins.RuntimeError"},
                          {"message", "param 7 status NOT_AVAILABLE at step " + std::to_string(crashes)},
                          {"where", "coordinator.py:fetch_sub_module"}},
                         {{"rank", 1}, {"state", "stuck"}}}}};
    return true;
  });
  const TargetFuzzReport report =
      run_target_fuzz({.cases = 40, .seed = 3, .max_ranks = 4, .work_dir = work_dir("zero-sized")}, ask);
  ASSERT_EQ(report.cases, 40);
  ASSERT_EQ(report.findings.size(), 1u) << "the crash is one bug, whatever its step number says";
  const TargetFinding& finding = report.findings[0];
  EXPECT_EQ(finding.verdict.kind, TargetVerdictKind::crash);
  EXPECT_EQ(finding.verdict.signature, "crash builtins.RuntimeError: NOT_AVAILABLE at coordinator.py:fetch_sub_module");
  EXPECT_LE(case_size(finding.shrunk.run).layers, 3) << describe(finding.shrunk);
  EXPECT_TRUE(has_zero_sized_parameter(finding.case_directory)) << "the kept directory is the shrunk case's";
  EXPECT_EQ(finding.shrunk.run.world, 1) << "nothing about the bug needs ranks: the world shrinks too";
  EXPECT_GE(finding.hits, 2) << "zero-sized parameters are common: later cases hit the same finding";
}

TEST(TargetFuzzer, LossesOffTheReferenceWithoutAnErrorAreASilentDivergence) {
  const AskRunner ask = fake_runner([](const std::string&, nlohmann::json& answer) {
    answer["framework"]["losses"][0] = answer["framework"]["losses"][0].get<double>() * 1.001 + 1e-3;
    return true;
  });
  const TargetFuzzReport report = run_target_fuzz({.cases = 5, .seed = 4, .work_dir = work_dir("drift")}, ask);
  ASSERT_EQ(report.findings.size(), 1u);
  EXPECT_EQ(report.findings[0].verdict.kind, TargetVerdictKind::silent_divergence);
  EXPECT_NE(report.findings[0].verdict.message.find("step 0: loss"), std::string::npos)
      << report.findings[0].verdict.message;
  EXPECT_EQ(report.findings[0].verdict.signature, "silent_divergence in the loss");
}

TEST(TargetFuzzer, ANanLossIsASilentDivergenceNotABrokenRunner) {
  // JSON has no NaN: the protocol spells it "nan", and a framework that trains on a NaN loss while
  // its reference does not has diverged without an error.
  const AskRunner ask = fake_runner([](const std::string&, nlohmann::json& answer) {
    answer["framework"]["losses"][0] = "nan";
    return true;
  });
  const TargetFuzzReport report = run_target_fuzz({.cases = 3, .seed = 9, .work_dir = work_dir("nan")}, ask);
  ASSERT_EQ(report.findings.size(), 1u);
  EXPECT_EQ(report.findings[0].verdict.signature, "silent_divergence in the loss");
  EXPECT_NE(report.findings[0].verdict.message.find("loss nan"), std::string::npos) << report.findings[0].verdict.message;
}

TEST(TargetFuzzer, AWrongForwardAndAWrongBackwardAreTwoSilentFindings) {
  // One planted bug changes the loss (a forward reading a placeholder), the other only the gradient
  // norm of its last step: one "silent_divergence" signature would let the first hide the second.
  const AskRunner ask = fake_runner([](const std::string& directory, nlohmann::json& answer) {
    nlohmann::json& side = answer["framework"];
    if (has_zero_sized_parameter(directory)) {
      side["losses"][0] = side["losses"][0].get<double>() + 0.01;
    } else {
      nlohmann::json& last = side["grad_norms"][side["grad_norms"].size() - 1];
      last = last.get<double>() * 1.1 + 0.01;
    }
    return true;
  });
  const TargetFuzzReport report = run_target_fuzz({.cases = 20, .seed = 8, .work_dir = work_dir("two-silent")}, ask);
  std::set<std::string> signatures;
  for (const TargetFinding& finding : report.findings) signatures.insert(finding.verdict.signature);
  EXPECT_EQ(signatures, (std::set<std::string>{"silent_divergence in the loss", "silent_divergence in the gradient norm"}));
}

// A framework that keeps one more tensor per step on rank 0 of every measured case: found as
// memory_growth (its numbers agree), and shrunk to a measured case, the smallest that still shows it.
TEST(TargetFuzzer, AFrameworkThatHoldsMoreAfterEveryStepIsAMemoryGrowthFinding) {
  const AskRunner ask = fake_runner([](const std::string& directory, nlohmann::json& answer) {
    const TargetCase target_case = read_target_case(directory + "/case.json");
    if (!target_case.measure_memory) return false;
    nlohmann::json held = nlohmann::json::array(), peak = nlohmann::json::array();
    for (int rank = 0; rank < target_case.run.world; ++rank) {
      nlohmann::json rank_held = nlohmann::json::array(), rank_peak = nlohmann::json::array();
      for (int64_t step = 0; step < target_case.run.steps; ++step) {
        const int64_t kept = rank == 0 ? 64 * step : 0;  // the leak: 64 bytes more after each step
        rank_held.push_back(step == 0 ? 500 : 1000 + kept);
        rank_peak.push_back(2000 + kept);
      }
      held.push_back(rank_held);
      peak.push_back(rank_peak);
    }
    answer["framework"]["held_bytes"] = held;
    answer["framework"]["peak_bytes"] = peak;
    return true;
  });
  const TargetFuzzReport report = run_target_fuzz(
      {.cases = 12, .seed = 7, .max_ranks = 3, .work_dir = work_dir("memory"), .space = {.memory = true}}, ask);
  ASSERT_EQ(report.findings.size(), 1u);
  const TargetFinding& finding = report.findings[0];
  EXPECT_EQ(finding.verdict.kind, TargetVerdictKind::memory_growth);
  EXPECT_EQ(finding.verdict.signature, "memory_growth in the held bytes");
  EXPECT_NE(finding.verdict.message.find("rank 0"), std::string::npos) << finding.verdict.message;
  EXPECT_TRUE(finding.shrunk.measure_memory);
  EXPECT_EQ(finding.shrunk.run.steps, kMemoryStepsMin) << "the steps shrink to the fewest the rule judges";
}

TEST(TargetFuzzer, AnAgreeingFrameworkHasNoFindingAndItsCasesAreCleanedUp) {
  const std::string work = work_dir("agree");
  const TargetFuzzReport report =
      run_target_fuzz({.cases = 15, .seed = 5, .work_dir = work}, fake_runner([](auto&, auto&) { return false; }));
  EXPECT_EQ(report.cases, 15);
  EXPECT_TRUE(report.findings.empty());
  EXPECT_TRUE(std::filesystem::is_empty(work));
}

TEST(TargetFuzzer, AReferenceThatDisagreesWithZero3sIsAFindingToo) {
  const AskRunner ask = fake_runner([](const std::string& directory, nlohmann::json& answer) {
    // Framework and the runner's reference agree with each other, not with zero3.
    RunSummary off;
    for (NamedTensor& named : read_safetensors(answer["reference"]["weights"]).tensors) {
      std::vector<float> values = named.tensor.to_floats();
      for (float& value : values) value += 0.5f;
      off.weights[named.name] = Tensor::from_values(named.tensor.shape(), values);
    }
    for (const auto& loss : answer["reference"]["losses"]) off.losses.push_back(loss.get<double>());
    for (const auto& norm : answer["reference"]["grad_norms"]) off.grad_norms.push_back(norm.get<double>());
    answer["reference"] = side_of(off, directory + "/reference.final.safetensors");
    answer["framework"] = side_of(off, directory + "/fake.final.safetensors");
    return true;
  });
  const TargetFuzzReport report = run_target_fuzz({.cases = 3, .seed = 6, .work_dir = work_dir("refs")}, ask);
  ASSERT_EQ(report.findings.size(), 1u);
  EXPECT_EQ(report.findings[0].verdict.kind, TargetVerdictKind::reference_disagreement);
}

// The runner's f32 reference sits on its float64 run (one sample of its rounding noise, 0) while
// its order probe moved by a third of zero3's distance from both (a second sample): zero3 is judged
// against the larger, so an ill-conditioned case's noise is not a finding; without the probe it is.
TEST(TargetFuzzer, TheOrderProbeAlsoMeasuresTheNoiseZero3sReferenceIsJudgedWith) {
  const auto shifted = [](const nlohmann::json& side, double by, const std::string& path) {
    RunSummary moved;
    for (NamedTensor& named : read_safetensors(side["weights"]).tensors) moved.weights[named.name] = named.tensor;
    for (const auto& loss : side["losses"]) moved.losses.push_back(loss.get<double>() + by);
    for (const auto& norm : side["grad_norms"]) moved.grad_norms.push_back(norm.get<double>());
    return side_of(moved, path);
  };
  const auto runner = [&](bool with_probe) {
    return fake_runner([=](const std::string& directory, nlohmann::json& answer) {
      const double off = 1e-3;  // zero3 from the runner's runs: 100 times the f32 loss tolerance
      answer["reference"] = shifted(answer["reference"], off, directory + "/reference.final.safetensors");
      answer["framework"] = answer["reference"];
      answer["reference"]["float64"] = answer["reference"];
      const nlohmann::json probe = shifted(answer["reference"], off / 3, directory + "/reference.probe.safetensors");
      if (with_probe) answer["reference"]["order_probe"] = probe;
      return true;
    });
  };
  EXPECT_EQ(run_target_fuzz({.cases = 3, .seed = 6, .work_dir = work_dir("probe")}, runner(true)).findings.size(), 0u);
  const TargetFuzzReport without = run_target_fuzz({.cases = 3, .seed = 6, .work_dir = work_dir("no-probe")}, runner(false));
  ASSERT_EQ(without.findings.size(), 1u);
  EXPECT_EQ(without.findings[0].verdict.kind, TargetVerdictKind::reference_disagreement);
}

nlohmann::json crash_answer(const std::string& message) {
  return {{"protocol", 1}, {"status", "crash"}, {"stuck", nlohmann::json::array()},
          {"ranks", {{{"rank", 0}, {"state", "exception"}, {"exception_type", "builtins.RuntimeError"},
                      {"message", message}, {"where", "coordinator.py:fetch_sub_module"}}}}};
}

TEST(TargetFuzzer, AHangThatAFreshLongerRunDoesNotRepeatIsFlakyNeverAFinding) {
  // A busy machine: zero-sized cases "hang" at the case's limit on warm ranks, and finish when run
  // again alone with the confirming limit.
  std::vector<RunRequest> fresh_runs;
  const AskRunner agree = fake_runner([](auto&, auto&) { return false; });
  const AskRunner ask = [&](const std::string& directory, const RunRequest& run) -> nlohmann::json {
    if (run.fresh) fresh_runs.push_back(run);
    if (run.fresh || !has_zero_sized_parameter(directory)) return agree(directory, run);
    return {{"protocol", 1}, {"status", "hang"}, {"stuck", {1}},
            {"ranks", {{{"rank", 0}, {"state", "ok"}},
                       {{"rank", 1}, {"state", "stuck"}, {"waits_in", "distributed_c10d.py:2800 in all_reduce"}}}}};
  };
  const TargetFuzzReport report = run_target_fuzz({.cases = 20, .seed = 3, .work_dir = work_dir("flaky")}, ask);
  EXPECT_TRUE(report.findings.empty()) << report.findings[0].verdict.message;
  ASSERT_FALSE(report.flaky.empty()) << "seed 3 draws zero-sized parameters in 20 cases";
  EXPECT_EQ(report.flaky.size(), fresh_runs.size()) << "every hang was run again alone";
  EXPECT_EQ(report.flaky[0].first.kind, TargetVerdictKind::hang);
  EXPECT_EQ(report.flaky[0].confirm.kind, TargetVerdictKind::agree);
  EXPECT_NE(report.flaky[0].first.message.find("rank 1 waits in distributed_c10d.py:2800 in all_reduce"),
            std::string::npos) << report.flaky[0].first.message;
  for (const RunRequest& run : fresh_runs) EXPECT_GE(run.timeout_s, 300.0) << "a hang is confirmed with a longer limit";
}

TEST(TargetFuzzer, RanksTheRunnerSawAllIdleAreAHangThatSaysSoAndIsConfirmedLikeAnyHang) {
  // The runner may call a case's ranks stuck before its limit when all of them sat idle (PROTOCOL.md,
  // "Rank processes"): the finding is a hang, confirmed on fresh ranks with the hang's longer limit.
  std::vector<RunRequest> fresh_runs;
  const AskRunner agree = fake_runner([](auto&, auto&) { return false; });
  const AskRunner ask = [&](const std::string& directory, const RunRequest& run) -> nlohmann::json {
    if (run.fresh) fresh_runs.push_back(run);
    if (!has_zero_sized_parameter(directory)) return agree(directory, run);
    return {{"protocol", 1}, {"status", "hang"}, {"stuck", {0, 1}},
            {"ranks", {{{"rank", 0}, {"state", "stuck"}, {"idle_s", 10.0}, {"waits_in", "pool.py:9 in wait"}},
                       {{"rank", 1}, {"state", "stuck"}, {"idle_s", 10.0}}}}};
  };
  const TargetFuzzReport report = run_target_fuzz({.cases = 20, .seed = 3, .work_dir = work_dir("idle")}, ask);
  ASSERT_EQ(report.findings.size(), 1u) << "seed 3 draws zero-sized parameters in 20 cases";
  EXPECT_EQ(report.findings[0].verdict.kind, TargetVerdictKind::hang);
  EXPECT_NE(report.findings[0].verdict.message.find("ranks [0,1] sat idle, waiting on each other, for 10 s"),
            std::string::npos) << report.findings[0].verdict.message;
  ASSERT_FALSE(fresh_runs.empty());
  for (const RunRequest& run : fresh_runs) EXPECT_GE(run.timeout_s, 300.0) << "a hang is confirmed with a longer limit";
}

// A runner that crashes on every case with a zero-sized parameter, counting the fresh (confirming) runs.
AskRunner zero_sized_crash_counting_fresh_runs(int64_t& fresh_runs) {
  const AskRunner crash = fake_runner([](const std::string& directory, nlohmann::json& answer) {
    if (!has_zero_sized_parameter(directory)) return false;
    answer = crash_answer("param status NOT_AVAILABLE");
    return true;
  });
  return [crash, &fresh_runs](const std::string& directory, const RunRequest& run) {
    fresh_runs += run.fresh ? 1 : 0;
    return crash(directory, run);
  };
}

TEST(TargetFuzzer, AFindingIsConfirmedAloneBeforeShrinkingAndItsShrunkCaseAgain) {
  int64_t fresh_runs = 0;
  const AskRunner ask = zero_sized_crash_counting_fresh_runs(fresh_runs);
  const TargetFuzzReport report = run_target_fuzz({.cases = 20, .seed = 3, .work_dir = work_dir("confirmed")}, ask);
  ASSERT_EQ(report.findings.size(), 1u);
  EXPECT_EQ(fresh_runs, 2) << "one confirming run of the generated case, one of the shrunk case";
  EXPECT_TRUE(report.findings[0].shrunk_confirmed);
  EXPECT_TRUE(report.flaky.empty());
}

TEST(TargetFuzzer, ACampaignAskedForOneUnshrunkFindingEndsRightAfterConfirmingItOnce) {
  int64_t fresh_runs = 0;
  const AskRunner ask = zero_sized_crash_counting_fresh_runs(fresh_runs);
  const TargetFuzzReport report = run_target_fuzz(
      {.cases = 40, .seed = 3, .work_dir = work_dir("first-finding"), .shrink_budget_s = 0.0, .findings_max = 1}, ask);
  ASSERT_EQ(report.findings.size(), 1u);
  const TargetFinding& finding = report.findings[0];
  EXPECT_EQ(report.cases, finding.first_case) << "no case after the finding's is run";
  EXPECT_LT(report.cases, 40);
  EXPECT_EQ(finding.hits, 1);
  EXPECT_EQ(finding.shrinks_accepted, 0);
  EXPECT_EQ(fresh_runs, 1) << "the generated case is confirmed once; with nothing shrunk it is the smallest";
  EXPECT_TRUE(finding.shrunk_confirmed);
}

TEST(TargetFuzzer, AShrunkCaseThatDoesNotFailAgainAloneGivesWayToTheGeneratedCase) {
  // Fresh ranks fail only on the first case they are shown (the generated one): the shrunk case,
  // which failed on warm ranks, does not fail alone, so the finding keeps the generated case.
  std::string first_fresh_case;
  const AskRunner crash = fake_runner([](const std::string& directory, nlohmann::json& answer) {
    if (!has_zero_sized_parameter(directory)) return false;
    answer = crash_answer("param status NOT_AVAILABLE");
    return true;
  });
  const AskRunner agree = fake_runner([](auto&, auto&) { return false; });
  const AskRunner ask = [&](const std::string& directory, const RunRequest& run) {
    if (!run.fresh) return crash(directory, run);
    const std::string text = target_case_json(read_target_case(directory + "/case.json")).dump();
    if (first_fresh_case.empty()) first_fresh_case = text;
    return text == first_fresh_case ? crash(directory, run) : agree(directory, run);
  };
  const TargetFuzzReport report = run_target_fuzz({.cases = 20, .seed = 3, .work_dir = work_dir("unconfirmed")}, ask);
  ASSERT_EQ(report.findings.size(), 1u);
  const TargetFinding& finding = report.findings[0];
  EXPECT_FALSE(finding.shrunk_confirmed);
  EXPECT_EQ(target_case_json(finding.shrunk).dump(), first_fresh_case) << "the generated case is the finding";
  EXPECT_EQ(finding.verdict.kind, TargetVerdictKind::crash);
  EXPECT_TRUE(std::filesystem::exists(finding.case_directory + "/case.json"));
}

TEST(TargetFuzzer, ABrokenRunnerEndsTheCampaignWithItsErrorNotAFinding) {
  const AskRunner ask = [](const std::string&, const RunRequest&) -> nlohmann::json {
    return {{"protocol", 1}, {"status", "error"}, {"message", "cannot start ranks"}};
  };
  EXPECT_THROW(run_target_fuzz({.cases = 5, .seed = 7, .work_dir = work_dir("broken")}, ask), BackendError);
}

// A bf16 case parts from its reference at bf16's resolution: half a percent of the loss is one
// bf16 ulp, agreement; the same in an f32 case is a divergence.
TEST(TargetVerdict, ABf16CaseIsJudgedAtBf16sResolutionAndAnF32CaseIsNot) {
  TargetCase target_case;
  const auto run = [](double second_loss) {
    RunSummary summary;
    summary.losses = {2.0, second_loss};
    summary.grad_norms = {1.0, 0.9};
    return summary;
  };
  const RunSummary reference = run(1.9), half_a_percent_off = run(1.9 * 1.005), five_percent_off = run(1.9 * 1.05);
  EXPECT_EQ(first_breach(half_a_percent_off, reference, {}, {}, target_tolerance(target_case)).quantity, "loss");
  target_case.run.config.bf16 = true;
  EXPECT_FALSE(first_breach(half_a_percent_off, reference, {}, {}, target_tolerance(target_case)).found());
  EXPECT_EQ(first_breach(five_percent_off, reference, {}, {}, target_tolerance(target_case)).quantity, "loss");
}

TEST(TargetVerdict, TheStableFragmentLeavesOutTheRunsNumbers) {
  EXPECT_EQ(stable_fragment("param 12 status NOT_AVAILABLE (ds_id 3)"), "NOT_AVAILABLE");
  EXPECT_EQ(stable_fragment("torch.cat(): expected a non-empty list of Tensors"), "empty list of Tensors");
}

RC_GTEST_PROP(TargetCase, EveryGeneratedCaseRoundTripsThroughItsCaseJson, ()) {
  const TargetCase original = *gen_target_case({.max_ranks = 4});
  const std::string text = target_case_json(original).dump();
  RC_ASSERT(target_case_json(target_case_from_json(nlohmann::json::parse(text), "case.json")).dump() == text);
  // Without --target-hsdp no case carries a shard group, so its case.json is as before HSDP.
  RC_ASSERT(text.find("shard_group_size") == std::string::npos);
}

// --target-hsdp: HSDP blocks strictly inside the world, written and read back; a flat case has no key.
RC_GTEST_PROP(TargetCase, HsdpCasesCarryABlockStrictlyInsideTheWorldThroughTheirCaseJson, ()) {
  const TargetCase original = *gen_target_case({.max_ranks = 8}, {.shard_groups = true});
  const int group = original.run.config.zero.shard_group_size;
  RC_TAG(group > 0 ? "hsdp" : "flat");
  RC_ASSERT(group == 0 || (group > 1 && group < original.run.world && original.run.world % group == 0));
  const nlohmann::json json = target_case_json(original);
  RC_ASSERT(json.at("zero").contains("shard_group_size") == (group > 0));
  RC_ASSERT(target_case_from_json(json, "case.json").run.config.zero.shard_group_size == group);
}

TEST(TargetCase, AShardGroupThatDoesNotDivideTheWorldIsRefusedNamingItsPath) {
  TargetCase target_case;
  target_case.run.model_spec = nlohmann::json::parse(
      R"({"zero3_model_spec": 1, "kind": "sequential", "input_width": 4, "loss": "mse",
          "layers": [{"type": "linear", "out": 2}]})");
  target_case.run.world = 4;
  nlohmann::json json = target_case_json(target_case);
  json["zero"]["shard_group_size"] = 3;
  try {
    target_case_from_json(json, "case.json");
    FAIL() << "a block of 3 in a world of 4 was read";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("/zero/shard_group_size"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace zero3
