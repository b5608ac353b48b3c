// The target campaign (target_fuzzer.h).
#include "props/target/target_fuzzer.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include <rapidcheck.h>

#include "core/base/stopwatch.h"
#include "props/fuzzer.h"

namespace zero3 {

namespace {

constexpr int kMaxSize = 100;  // RapidCheck's sizes ramp to this over a batch (fuzzer.cc)

class ShrinkCounter : public rc::detail::TestListener {
 public:
  explicit ShrinkCounter(std::function<void(bool accepted)> on_shrink) : on_shrink_(std::move(on_shrink)) {}
  void onTestCaseFinished(const rc::detail::CaseDescription&) override {}
  void onShrinkTried(const rc::detail::CaseDescription&, bool accepted) override { on_shrink_(accepted); }
  void onTestFinished(const rc::detail::TestMetadata&, const rc::detail::TestResult&) override {}

 private:
  std::function<void(bool)> on_shrink_;
};

struct Judged {
  TargetVerdict verdict;
  nlohmann::json answer;
  std::string directory;
};

// State of one campaign: the signatures found, and the one being shrunk with its smallest case.
class Campaign {
 public:
  Campaign(const TargetFuzzOptions& options, const AskRunner& ask) : options_(options), ask_(ask) {}

  TargetFuzzReport run() {
    std::filesystem::create_directories(options_.work_dir);
    for (int64_t batch = 0; report_.cases < options_.cases; ++batch) {
      rc::detail::TestParams params;
      params.seed = batch_seed(options_.seed, 0, batch);
      params.maxSuccess = static_cast<int>(options_.cases - report_.cases);
      params.maxSize = kMaxSize;
      ShrinkCounter counter([&](bool accepted) {
        shrinking_.shrinks_tried++;
        if (accepted) shrinking_.shrinks_accepted++;
        progress();
      });
      const rc::detail::TestMetadata metadata{.id = "target", .description = "the framework agrees with its reference"};
      const rc::detail::TestResult outcome =
          rc::detail::checkProperty(rc::detail::toProperty([&] { check(*gen_target_case({.max_ranks = options_.max_ranks}, options_.space)); }),
                                    metadata, params, counter, {});
      if (error_) std::rethrow_exception(error_);
      if (!outcome.template is<rc::detail::FailureResult>()) break;  // the batch ran its cases
      finish_finding();
      if (options_.findings_max > 0 && static_cast<int64_t>(report_.findings.size()) >= options_.findings_max) break;
    }
    report_.seconds = watch_.seconds();
    return report_;
  }

 private:
  // RapidCheck takes any exception for a failing case: a broken runner or a harness error is kept
  // instead, ends the batch (every later call passes at once) and is rethrown after it.
  void check(const TargetCase& target_case) {
    if (error_) return;
    try {
      check_case(target_case);
    } catch (const rc::detail::CaseResult&) {
      throw;
    } catch (...) {
      error_ = std::current_exception();
      RC_FAIL("error");
    }
  }

  void check_case(const TargetCase& target_case) {
    if (signature_.empty()) {
      search(target_case);
      return;
    }
    // Shrinking: a candidate is accepted only when it fails the same way; past the budget, none is run.
    if (shrink_watch_.seconds() > options_.shrink_budget_s) {
      shrinking_.shrink_budget_spent = true;
      return;
    }
    Judged judged = judge(target_case);
    if (judged.verdict.finding() && judged.verdict.signature == signature_) {
      keep_smallest(target_case, std::move(judged));
      RC_FAIL("same failure");
    }
    std::filesystem::remove_all(judged.directory);
  }

  void search(const TargetCase& target_case) {
    report_.cases++;
    Judged judged = judge(target_case);
    progress();
    if (judged.verdict.kind == TargetVerdictKind::unsupported) report_.unsupported++;
    if (!judged.verdict.finding()) {
      std::filesystem::remove_all(judged.directory);
      return;
    }
    for (TargetFinding& finding : report_.findings) {
      if (finding.verdict.signature == judged.verdict.signature) {
        finding.hits++;
        std::filesystem::remove_all(judged.directory);
        return;
      }
    }
    const double confirm_limit = confirm_timeout_s(judged.verdict, target_case.timeout_s);
    if (!confirmed(target_case, judged.verdict, report_.cases)) {
      std::filesystem::remove_all(judged.directory);
      return;
    }
    signature_ = judged.verdict.signature;
    shrinking_ = TargetFinding{};
    shrinking_.first_case = report_.cases;
    shrinking_.first_case_description = describe(target_case);
    shrinking_.first_message = judged.verdict.message;
    shrinking_.confirm_timeout_s = confirm_limit;
    generated_ = target_case;
    shrink_watch_ = Stopwatch();
    if (options_.on_found) {
      TargetFinding found = shrinking_;
      found.verdict = judged.verdict;
      found.shrunk = target_case;
      found.answer = judged.answer;
      options_.on_found(found);
    }
    keep_smallest(target_case, std::move(judged));
    RC_FAIL("finding");
  }

  void keep_smallest(const TargetCase& target_case, Judged judged) {
    if (!shrinking_.case_directory.empty()) std::filesystem::remove_all(shrinking_.case_directory);
    shrinking_.verdict = std::move(judged.verdict);
    shrinking_.answer = std::move(judged.answer);
    shrinking_.case_directory = judged.directory;
    shrinking_.shrunk = target_case;
  }

  // Runs the case again on fresh ranks with the confirming limit: true when it fails with the same
  // signature; otherwise the case is logged as flaky (`at_case` 0 for a shrunk case).
  bool confirmed(const TargetCase& target_case, const TargetVerdict& first, int64_t at_case) {
    const double limit = confirm_timeout_s(first, target_case.timeout_s);
    if (options_.on_confirming) options_.on_confirming(first, limit);
    Judged again = judge(target_case, {.timeout_s = limit, .fresh = true});
    std::filesystem::remove_all(again.directory);
    if (again.verdict.finding() && again.verdict.signature == first.signature) return true;
    FlakyCase flaky{.description = describe(target_case), .first = first, .confirm = again.verdict,
                    .confirm_timeout_s = limit, .at_case = at_case};
    if (options_.on_flaky) options_.on_flaky(flaky);
    report_.flaky.push_back(std::move(flaky));
    return false;
  }

  void finish_finding() {
    // The smallest case must fail again alone, too: what a maintainer replays is this case. When it
    // does not, the generated case (confirmed before shrinking) is the finding. When no smaller case
    // was accepted, the smallest is the generated case, confirmed already.
    if (shrinking_.shrinks_accepted > 0 && !confirmed(shrinking_.shrunk, shrinking_.verdict, 0)) {
      shrinking_.shrunk_confirmed = false;
      std::filesystem::remove_all(shrinking_.case_directory);
      Judged original = judge(generated_, {.timeout_s = shrinking_.confirm_timeout_s, .fresh = true});
      shrinking_.verdict = std::move(original.verdict);
      shrinking_.answer = std::move(original.answer);
      shrinking_.case_directory = original.directory;
      shrinking_.shrunk = generated_;
    }
    shrinking_.shrink_seconds = shrink_watch_.seconds();
    report_.findings.push_back(std::move(shrinking_));
    shrinking_ = TargetFinding{};
    signature_.clear();
  }

  Judged judge(const TargetCase& target_case, const RunRequest& run = {}) {
    const std::string directory =
        (std::filesystem::path(options_.work_dir) / ("case-" + std::to_string(++written_))).string();
    Judged judged;
    judged.directory = directory;
    judged.verdict = judge_target_case(target_case, directory, ask_, options_.runner, &judged.answer, run);
    return judged;
  }

  void progress() {
    if (!options_.on_progress) return;
    options_.on_progress({.cases = report_.cases,
                          .cases_total = options_.cases,
                          .findings = static_cast<int64_t>(report_.findings.size()),
                          .shrinking = !signature_.empty(),
                          .shrinks_tried = shrinking_.shrinks_tried,
                          .elapsed_s = watch_.seconds()});
  }

  const TargetFuzzOptions& options_;
  const AskRunner& ask_;
  TargetFuzzReport report_;
  std::string signature_;  // being shrunk; empty while searching
  TargetFinding shrinking_;
  TargetCase generated_;  // the generated case of the finding being shrunk (confirmed)
  Stopwatch watch_;
  Stopwatch shrink_watch_;
  int64_t written_ = 0;
  std::exception_ptr error_;
};

}  // namespace

double confirm_timeout_s(const TargetVerdict& verdict, double case_timeout_s) {
  if (verdict.kind == TargetVerdictKind::hang) return std::max(5.0 * case_timeout_s, 300.0);
  return 2.0 * case_timeout_s;
}

TargetVerdict judge_target_case(const TargetCase& target_case, const std::string& directory, const AskRunner& ask,
                                const std::string& runner, nlohmann::json* answer, const RunRequest& run) {
  std::filesystem::remove_all(directory);
  write_target_case(target_case, directory);
  RunRequest request = run;
  if (request.timeout_s <= 0.0) request.timeout_s = target_case.timeout_s;
  *answer = ask(std::filesystem::absolute(directory).string(), request);
  const std::string status = answer->is_object() ? answer->value("status", "") : "";
  // zero3's reference is needed only to judge the runner's reference on a finished run.
  const RunSummary zero3 = status == "ok" ? zero3_reference_run(target_case) : RunSummary{};
  return judge_answer(*answer, zero3, initial_weights(target_case), runner, target_tolerance(target_case));
}

TargetFuzzReport run_target_fuzz(const TargetFuzzOptions& options, const AskRunner& ask) {
  return Campaign(options, ask).run();
}

}  // namespace zero3
