// `zero3 fuzz --target NAME` (fuzz_target_command.h): starts the runner, runs the campaign, saves
// every finding as a case directory with a standalone repro script, and writes the report.
#include "tools/cli/fuzz_target_command.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>

#include <fstream>
#include <sstream>

#include "core/base/atomic_file.h"
#include "core/base/errors.h"
#include "core/base/stopwatch.h"
#include "props/target/target_fuzzer.h"
#include "props/target/target_upstream.h"
#include "tools/cli/finding_writeup.h"
#include "tools/runs/progress.h"
#include "tools/cli/runner_process.h"

namespace zero3 {

namespace {

constexpr double kHelloTimeoutS = 120.0;
// A runner starts its rank processes on the first case of each world size (DeepSpeed's first case
// also builds its comm op, ~90 s here, and every pool trains a warm-up case): its own start
// timeout is 600 s, before the case's clock starts.
constexpr double kStartAllowanceS = 660.0;
// A repro script runs alone as its Run: line says, DeepSpeed's import and W processes included.
constexpr double kReproVerifyTimeoutS = 300.0;

std::string diff_venv_python() {
  if (const char* venv = std::getenv("ZERO3_DIFF_VENV")) return std::string(venv) + "/bin/python";
  const char* cache = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const std::string base = cache ? cache : std::string(home ? home : "") + "/.cache";
  return base + "/zero3/diff-venv/bin/python";
}

std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// " --math-bug NAME" when one is planted: every printed replay line carries it, since a case found
// with the bug does not fail without it (case.json is the runner's input and does not record it).
std::string math_bug_flag(const TargetCommandOptions& options) {
  return options.math_bug ? std::string(" --math-bug ") + math_bug_name(*options.math_bug) : "";
}

nlohmann::json math_bug_json(const TargetCommandOptions& options) {
  return options.math_bug ? nlohmann::json(math_bug_name(*options.math_bug)) : nlohmann::json(nullptr);
}

// Switches the planted bug on for zero3's side of the whole run (math_bugs.h).
void plant_math_bug(const TargetCommandOptions& options, std::optional<ScopedMathBug>& planted) {
  if (!options.math_bug) return;
  planted.emplace(*options.math_bug);
  std::printf("math bug planted in zero3's side only: %s (%s)\n", math_bug_name(*options.math_bug),
              math_bug_description(*options.math_bug));
}

struct Runner {
  std::string command;
  std::string python;  // the interpreter that runs the repro scripts ("" when unknown)
};

Runner runner_for(const TargetCommandOptions& options) {
  if (!options.runner_command.empty()) return {options.runner_command, ""};
  const std::string python = diff_venv_python();
  if (!std::filesystem::exists(python)) {
    throw BackendError("the " + options.target + " runner needs the differential venv (torch 2.15 and DeepSpeed 0.19.8), "
                       "not found at " + python + ": run tools/test once, or source tools/lib/diff_venv.sh && "
                       "zero3_install_diff_venv; or give your own runner with --target-runner CMD");
  }
  const std::string logs = (std::filesystem::path(options.out_dir) / "runner-logs").string();
  return {"PYTHONPATH=" + quoted(std::string(ZERO3_SOURCE_DIR) + "/tools") + " " + quoted(python) +
              " -m zero3py.runners --target " + quoted(options.target) + " --log-dir " + quoted(logs),
          python};
}

std::unique_ptr<RunnerProcess> start_runner(const TargetCommandOptions& options, const Runner& runner) {
  std::filesystem::create_directories(options.out_dir);
  const std::string log = (std::filesystem::path(options.out_dir) / "runner.log").string();
  std::printf("starting the runner: %s\n  (its stderr: %s)\n", runner.command.c_str(), log.c_str());
  std::fflush(stdout);
  auto process = std::make_unique<RunnerProcess>(runner.command, options.target, log, kHelloTimeoutS);
  std::printf("  %s: %s\n", process->hello().value("target", options.target).c_str(),
              process->hello().value("versions", nlohmann::json::object()).dump().c_str());
  return process;
}

AskRunner asker(RunnerProcess& process) {
  return [&process](const std::string& directory, const RunRequest& run) {
    nlohmann::json request = {{"case", directory}, {"timeout_s", run.timeout_s}};
    if (run.fresh) request["fresh"] = true;
    return process.request(request, run.timeout_s + kStartAllowanceS);
  };
}

std::string versions_text(const nlohmann::json& versions) {
  std::string text;
  for (const auto& [name, version] : versions.items()) {
    text += (text.empty() ? "" : ", ") + name + " " + (version.is_string() ? version.get<std::string>() : version.dump());
  }
  return text;
}

// The finding's standalone script, as the runner wrote and verified it (PROTOCOL.md, "Repro
// scripts"): {"script": path or null, "verified", "lines", "why", "output_tail"}.
nlohmann::json write_repro(RunnerProcess& process, const TargetFinding& finding, const std::string& path) {
  const nlohmann::json answer = process.request(
      {{"write_repro", {{"case", std::filesystem::absolute(finding.case_directory).string()},
                        {"answer", finding.answer},
                        {"signature", finding.verdict.signature},
                        {"path", std::filesystem::absolute(path).string()},
                        {"verify_timeout_s", kReproVerifyTimeoutS}}}},
      kReproVerifyTimeoutS + 120.0);
  const std::string status = answer.value("status", "");
  const nlohmann::json verification = answer.value("verification", nlohmann::json::object());
  nlohmann::json repro = {{"script", nullptr}, {"verified", false}, {"lines", nullptr},
                          {"output_tail", verification.value("output_tail", "")},
                          {"verify_seconds", verification.value("seconds", 0.0)}};
  if (status == "ok") {
    repro["script"] = answer.value("repro_script", path);
    repro["verified"] = true;
    repro["lines"] = answer.value("lines", 0);
    repro["why"] = "";
    return repro;
  }
  const std::string why = status == "unverified"
                              ? "the script did not reproduce the finding when run alone: " + answer.value("message", "")
                              : answer.value("message", answer.dump().substr(0, 300));
  repro["why"] = why;
  return repro;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

nlohmann::json save_finding(RunnerProcess& process, const TargetCommandOptions& options, const UpstreamTable& upstream,
                            TargetFinding& finding, size_t index) {
  const std::string name = options.target + "-" + std::to_string(index + 1) + "-" + target_verdict_name(finding.verdict.kind);
  const std::filesystem::path directory = std::filesystem::path(options.out_dir) / name;
  std::filesystem::remove_all(directory);
  std::filesystem::rename(finding.case_directory, directory);
  finding.case_directory = directory.string();
  write_file_atomically((directory / "answer.json").string(), finding.answer.dump(1) + "\n");
  const std::string case_file = (directory / "case.json").string();
  const UpstreamRow* row = upstream.match(options.target, finding.verdict.signature, finding.shrunk, finding.verdict.message);
  std::printf("\nfinding %zu: %s (%s)\n  %s\n", index + 1, target_verdict_name(finding.verdict.kind),
              finding.verdict.signature.c_str(), finding.verdict.message.substr(0, 1500).c_str());
  std::printf("  first at case %lld (%s); %lld cases hit it; confirmed alone (fresh ranks, %.0f s limit)\n",
              static_cast<long long>(finding.first_case), finding.first_case_description.c_str(),
              static_cast<long long>(finding.hits), finding.confirm_timeout_s);
  std::printf("  shrunk to %s in %lld/%lld shrinks, %.0f s%s%s\n", describe(finding.shrunk).c_str(),
              static_cast<long long>(finding.shrinks_accepted), static_cast<long long>(finding.shrinks_tried),
              finding.shrink_seconds, finding.shrink_budget_spent ? " (shrink budget spent: may shrink further)" : "",
              finding.shrunk_confirmed ? "" : " (the shrunk case did not fail again alone: the generated case is kept)");
  std::printf("  upstream: %s\n", upstream_status_line(row, upstream).c_str());
  std::printf("  writing and verifying its standalone script...\n");
  std::fflush(stdout);
  const nlohmann::json repro = write_repro(process, finding, (directory / "repro.py").string());
  const bool verified = repro.value("verified", false);
  const std::string script = verified ? repro["script"].get<std::string>() : "";
  FindingWriteup writeup{.target = options.target,
                         .versions = versions_text(process.hello().value("versions", nlohmann::json::object())),
                         .finding = &finding,
                         .upstream = row,
                         .table = &upstream,
                         .script_path = script,
                         .script_text = verified ? read_text(script) : "",
                         .script_output = repro.value("output_tail", ""),
                         .no_script_why = repro.value("why", "")};
  const std::string issue = (directory / "ISSUE.md").string();
  write_file_atomically(issue, issue_markdown(writeup));
  std::printf("  case: %s\n  replay: zero3 fuzz --target %s%s --replay %s\n", case_file.c_str(), options.target.c_str(),
              math_bug_flag(options).c_str(), case_file.c_str());
  if (verified) {
    std::printf("  standalone script, verified alone (exit 1, %lld lines): %s\n",
                static_cast<long long>(repro.value("lines", 0)), script.c_str());
  } else {
    std::printf("  no standalone script: %s\n", repro.value("why", "").c_str());
  }
  std::printf("  issue text: %s\n", issue.c_str());
  return {{"verdict", target_verdict_name(finding.verdict.kind)},
          {"signature", finding.verdict.signature},
          {"message", finding.verdict.message},
          {"case_file", case_file},
          {"repro_script", verified ? nlohmann::json(script) : nlohmann::json(nullptr)},
          {"repro", repro},
          {"issue", issue},
          {"upstream", upstream_status_json(row, upstream)},
          {"model", model_sentence(finding.shrunk)},
          {"modules", case_size(finding.shrunk.run).layers},
          {"shrunk", describe(finding.shrunk)},
          {"shrunk_confirmed", finding.shrunk_confirmed},
          {"confirm_timeout_s", finding.confirm_timeout_s},
          {"first_case", finding.first_case},
          {"first_case_description", finding.first_case_description},
          {"first_message", finding.first_message},
          {"hits", finding.hits},
          {"shrinks", {{"tried", finding.shrinks_tried}, {"accepted", finding.shrinks_accepted},
                       {"seconds", finding.shrink_seconds}, {"budget_spent", finding.shrink_budget_spent}}}};
}

nlohmann::json flaky_json(const FlakyCase& flaky) {
  return {{"case", flaky.description},
          {"at_case", flaky.at_case},
          {"first", {{"verdict", target_verdict_name(flaky.first.kind)}, {"signature", flaky.first.signature},
                     {"message", flaky.first.message}}},
          {"confirm", {{"verdict", target_verdict_name(flaky.confirm.kind)}, {"signature", flaky.confirm.signature},
                       {"message", flaky.confirm.message}}},
          {"confirm_timeout_s", flaky.confirm_timeout_s}};
}

void run_replay(const TargetCommandOptions& options) {
  const TargetCase target_case = read_target_case(options.replay_path);
  std::optional<ScopedMathBug> planted;
  plant_math_bug(options, planted);
  const UpstreamTable upstream = read_upstream_table(options.upstream_path);
  const Runner runner = runner_for(options);
  auto process = start_runner(options, runner);
  const std::string directory = (std::filesystem::path(options.out_dir) / "replay").string();
  nlohmann::json answer;
  const TargetVerdict verdict = judge_target_case(target_case, directory, asker(*process), options.target, &answer);
  std::printf("replay %s on %s: %s%s\n", options.replay_path.c_str(), options.target.c_str(),
              target_verdict_name(verdict.kind), verdict.signature.empty() ? "" : (" (" + verdict.signature + ")").c_str());
  if (!verdict.message.empty()) std::printf("%s\n", verdict.message.c_str());
  const UpstreamRow* row = verdict.finding() ? upstream.match(options.target, verdict.signature, target_case, verdict.message) : nullptr;
  if (verdict.finding()) std::printf("upstream: %s\n", upstream_status_line(row, upstream).c_str());
  if (!options.report_path.empty()) {
    const nlohmann::json json = {{"target", options.target},
                                 {"runner", runner.command},
                                 {"versions", process->hello().value("versions", nlohmann::json::object())},
                                 {"replay", options.replay_path},
                                 {"math_bug", math_bug_json(options)},
                                 {"model", model_sentence(target_case)},
                                 {"verdict", target_verdict_name(verdict.kind)},
                                 {"signature", verdict.signature},
                                 {"message", verdict.message},
                                 {"seconds", answer.value("seconds", 0.0)},
                                 {"upstream", verdict.finding() ? upstream_status_json(row, upstream) : nlohmann::json(nullptr)}};
    write_file_atomically(options.report_path, json.dump(2) + "\n");
    std::printf("report: %s\n", options.report_path.c_str());
  }
  if (verdict.finding()) throw CorrectnessError("the finding in " + options.replay_path + " reproduces");
}

// The flags that widen the drawn space, as a replay line repeats them.
std::string space_flags(const TargetSpace& space) {
  std::string flags;
  if (space.shard_groups) flags += " --target-hsdp";
  if (space.transformer) flags += " --target-transformer";
  if (space.levers) flags += " --target-levers";
  if (space.bf16) flags += " --target-bf16";
  if (space.memory) flags += " --target-memory";
  return flags;
}

}  // namespace

void run_target_fuzz_command(const TargetCommandOptions& options) {
  if (!options.replay_path.empty()) return run_replay(options);
  const std::string space = space_flags(options.space);
  std::printf("zero3 fuzz --target %s seed=%llu cases=%lld max-ranks=%d%s\n  replay: zero3 fuzz --target %s%s --cases %lld "
              "--seed %llu --max-ranks %d%s%s%s\n",
              options.target.c_str(), static_cast<unsigned long long>(options.seed),
              static_cast<long long>(options.cases), options.max_ranks, space.c_str(), options.target.c_str(),
              options.runner_command.empty() ? "" : (" --target-runner " + quoted(options.runner_command)).c_str(),
              static_cast<long long>(options.cases), static_cast<unsigned long long>(options.seed), options.max_ranks,
              space.c_str(),
              (options.findings_max > 0 ? " --max-findings " + std::to_string(options.findings_max) : "").c_str(),
              math_bug_flag(options).c_str());
  std::optional<ScopedMathBug> planted;
  plant_math_bug(options, planted);
  const UpstreamTable upstream = read_upstream_table(options.upstream_path);
  const Runner runner = runner_for(options);
  // The campaign's whole cost to its user: the runner's start and every finding's script written
  // and verified too, which report.seconds (the cases and their shrinking) leaves out.
  const Stopwatch wall;
  auto process = start_runner(options, runner);
  std::fflush(stdout);
  ProgressBar progress(options.cases, options.target);
  int64_t printed = 0;
  TargetFuzzOptions fuzz{.cases = options.cases,
                         .seed = options.seed,
                         .max_ranks = options.max_ranks,
                         .work_dir = (std::filesystem::path(options.out_dir) / "work").string(),
                         .runner = options.target,
                         .shrink_budget_s = options.shrink_budget_s,
                         .space = options.space,
                         .findings_max = options.findings_max};
  fuzz.on_progress = [&](const TargetProgress& at) {
    const double rate = at.elapsed_s > 0.0 ? static_cast<double>(at.cases) / at.elapsed_s : 0.0;
    char status[160];
    std::snprintf(status, sizeof(status), "%lld findings, %.2f cases/s%s", static_cast<long long>(at.findings), rate,
                  at.shrinking ? (", shrinking (" + std::to_string(at.shrinks_tried) + " tried)").c_str() : "");
    progress.update(at.cases, status);
    // Without a terminal there is no bar: a line every 50 cases says the run is alive.
    if (at.cases >= printed + 50 && !at.shrinking) {
      printed = at.cases;
      std::printf("[%lld/%lld] %s, %.0f s\n", static_cast<long long>(at.cases), static_cast<long long>(at.cases_total),
                  status, at.elapsed_s);
      std::fflush(stdout);
    }
  };
  fuzz.on_confirming = [&](const TargetVerdict& verdict, double limit) {
    std::printf("%s (%s): confirming alone on fresh ranks, %.0f s limit...\n", target_verdict_name(verdict.kind),
                verdict.signature.c_str(), limit);
    std::fflush(stdout);
  };
  fuzz.on_flaky = [&](const FlakyCase& flaky) {
    std::printf("  flaky, not a finding: the confirming run gave %s%s\n", target_verdict_name(flaky.confirm.kind),
                flaky.confirm.signature.empty() ? "" : (" (" + flaky.confirm.signature + ")").c_str());
    std::fflush(stdout);
  };
  fuzz.on_found = [&](const TargetFinding& found) {
    std::printf("case %lld: %s: %s\n  confirmed; shrinking...\n", static_cast<long long>(found.first_case),
                target_verdict_name(found.verdict.kind), found.verdict.message.substr(0, 300).c_str());
    std::fflush(stdout);
  };
  TargetFuzzReport report = run_target_fuzz(fuzz, asker(*process));
  progress.finish();
  nlohmann::json findings = nlohmann::json::array();
  for (size_t index = 0; index < report.findings.size(); ++index) {
    findings.push_back(save_finding(*process, options, upstream, report.findings[index], index));
  }
  nlohmann::json flaky = nlohmann::json::array();
  for (const FlakyCase& case_ : report.flaky) flaky.push_back(flaky_json(case_));
  std::filesystem::remove_all(fuzz.work_dir);  // the findings' directories were moved out of it
  const double rate = report.seconds > 0.0 ? static_cast<double>(report.cases) / report.seconds : 0.0;
  const double wall_seconds = wall.seconds();
  const double wall_rate = static_cast<double>(report.cases) / wall_seconds;
  const nlohmann::json versions = process->hello().value("versions", nlohmann::json::object());
  std::printf("\ntotal: %lld cases (%lld the target cannot express) in %.1f s (%.2f cases/s, shrinking included; "
              "%.1f s and %.2f cases/s with the runner's start and the scripts' verification), "
              "%zu findings, %zu flaky (failed once, not when run again alone); %s\n",
              static_cast<long long>(report.cases), static_cast<long long>(report.unsupported), report.seconds, rate,
              wall_seconds, wall_rate, report.findings.size(), report.flaky.size(), versions_text(versions).c_str());
  for (size_t index = 0; index < findings.size(); ++index) {
    const nlohmann::json& finding = findings[index];
    std::printf("  finding %zu: %s; script: %s; %s\n", index + 1, finding["signature"].get<std::string>().c_str(),
                finding["repro"].value("verified", false) ? "verified" : "none",
                upstream_status_line(upstream.match(options.target, report.findings[index].verdict.signature,
                                                    report.findings[index].shrunk, report.findings[index].verdict.message),
                                     upstream)
                    .c_str());
  }
  if (!options.report_path.empty()) {
    const nlohmann::json json = {{"target", options.target},
                                 {"runner", runner.command},
                                 {"python", runner.python.empty() ? nlohmann::json(nullptr) : nlohmann::json(runner.python)},
                                 {"versions", versions},
                                 {"seed", options.seed},
                                 {"math_bug", math_bug_json(options)},
                                 {"max_ranks", options.max_ranks},
                                 {"space_flags", space_flags(options.space)},  // what --replay needs besides the seed
                                 {"cases", report.cases},
                                 {"unsupported", report.unsupported},
                                 {"seconds", report.seconds},
                                 {"cases_per_second", rate},
                                 {"wall_seconds", wall_seconds},
                                 {"wall_cases_per_second", wall_rate},
                                 {"upstream_table", upstream.path},
                                 {"findings", findings},
                                 {"flaky", flaky}};
    write_file_atomically(options.report_path, json.dump(2) + "\n");
    std::printf("report: %s\n", options.report_path.c_str());
  }
  if (!report.findings.empty()) {
    throw CorrectnessError("fuzz --target " + options.target + " found " + std::to_string(report.findings.size()) +
                           " distinct failure(s) (seed=" + std::to_string(options.seed) + ")");
  }
}

}  // namespace zero3
