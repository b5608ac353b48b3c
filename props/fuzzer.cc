// Running properties through RapidCheck with a configured seed and budget (see fuzzer.h).
#include "props/fuzzer.h"

#include <algorithm>
#include <filesystem>

#include "core/base/atomic_file.h"
#include "core/base/stopwatch.h"
#include "core/base/text.h"
#include "core/base/errors.h"
#include "core/base/json_reader.h"
#include "props/fault_tolerance.h"
#include "props/injections/injections.h"

namespace zero3 {

namespace {

// RapidCheck's sizes ramp from 0 to max_size over each batch; above 100 the Debian build misbehaves.
constexpr int kMaxSize = 100;
// The time budget is checked between batches of this many cases.
constexpr int64_t kBatchCases = 25;

class ProgressListener : public rc::detail::TestListener {
 public:
  ProgressListener(const FuzzOptions& options, FuzzProgress& progress, const Stopwatch& run_watch)
      : options_(options), progress_(progress), run_watch_(run_watch) {}
  void onTestCaseFinished(const rc::detail::CaseDescription&) override {
    progress_.cases++;
    report();
  }
  void onShrinkTried(const rc::detail::CaseDescription&, bool accepted) override {
    progress_.shrinks_tried++;
    if (accepted) accepted_++;
    report();
  }
  void onTestFinished(const rc::detail::TestMetadata&, const rc::detail::TestResult&) override {}
  int64_t accepted() const { return accepted_; }

 private:
  void report() {
    progress_.elapsed_s = run_watch_.seconds();
    if (options_.on_progress) options_.on_progress(progress_);
  }
  const FuzzOptions& options_;
  FuzzProgress& progress_;
  const Stopwatch& run_watch_;
  int64_t accepted_ = 0;
};

struct LastFailure {
  FuzzCase fuzz_case;
  std::string message;
  bool harness_error = false;
};

// The property's verdict on one case; with an injection, a case counts against it only when it
// fails with the injection and passes without it, so that a failure the engine has anyway is never
// credited to the injection.
Verdict check_case(const FuzzProperty& property, const FuzzOptions& options, const FuzzCase& generated,
                   int64_t& failing_without_injection) {
  const auto check = [&](const FuzzCase& fuzz_case) -> Verdict {
    try {
      return property.check(fuzz_case);
    } catch (const std::exception& error) {
      return {.ok = false, .message = std::string("the harness threw: ") + error.what(), .harness_error = true};
    }
  };
  if (options.inject.empty()) return check(generated);
  FuzzCase injected = generated;
  apply_injection(options.inject, injected);
  const Verdict verdict = check(injected);
  if (verdict.ok) return verdict;
  if (!check(generated).ok) {
    failing_without_injection++;
    return {};
  }
  return {.ok = false, .message = "with " + options.inject + " (and not without it): " + verdict.message,
          .harness_error = verdict.harness_error};
}

// One RapidCheck run of `property` over `cases` cases. RapidCheck's shrinker accepts a candidate
// only when it fails and stops when none of the last one's candidates fails, so the last failing
// call of the property is the shrunk counterexample.
rc::detail::TestResult check_batch(const FuzzProperty& property, const FuzzOptions& options, uint64_t seed,
                                   int64_t cases, ProgressListener& listener, LastFailure& last_failure,
                                   int64_t& failing_without_injection) {
  const GenLimits limits{.max_ranks = options.max_ranks};
  const auto body = [&] {
    FuzzCase generated = *property.generate(limits);
    generated.device = options.device;
    const Verdict verdict = check_case(property, options, generated, failing_without_injection);
    if (!verdict.ok) {
      last_failure = {generated, verdict.message, verdict.harness_error};
      if (!options.inject.empty()) apply_injection(options.inject, last_failure.fuzz_case);
      RC_FAIL(verdict.message);
    }
  };
  rc::detail::TestParams params;
  params.seed = seed;
  params.maxSuccess = static_cast<int>(cases);
  params.maxSize = kMaxSize;
  const rc::detail::TestMetadata metadata{.id = property.name, .description = property.description};
  // No reproduce map: RapidCheck then leaves its global configuration (RC_PARAMS) alone.
  return rc::detail::checkProperty(rc::detail::toProperty(body), metadata, params, listener, {});
}

PropertyResult run_property(const FuzzProperty& property, size_t index, const FuzzOptions& options,
                            const Stopwatch& run_watch, double deadline_s) {
  PropertyResult result{.property = property.name};
  FuzzProgress progress{.property = property.name, .cases_total = options.cases};
  ProgressListener listener(options, progress, run_watch);
  const Stopwatch property_watch;
  for (int64_t batch = 0; result.cases < options.cases; ++batch) {
    if (deadline_s > 0.0 && run_watch.seconds() >= deadline_s) break;
    const int64_t cases = std::min(kBatchCases, options.cases - result.cases);
    LastFailure last_failure;
    const rc::detail::TestResult outcome = check_batch(property, options, batch_seed(options.seed, index, batch), cases,
                                                       listener, last_failure, result.failing_without_injection);
    if (outcome.template is<rc::detail::FailureResult>()) {
      const auto& failure = outcome.template get<rc::detail::FailureResult>();
      result.failed = true;
      result.failing_case = result.cases + failure.numSuccess + 1;
      result.cases += failure.numSuccess + 1;
      result.counterexample = last_failure.fuzz_case;
      result.message = last_failure.message;
      result.harness_error = last_failure.harness_error;
      break;
    }
    result.cases += cases;
  }
  result.shrinks_tried = progress.shrinks_tried;
  result.shrinks_accepted = listener.accepted();
  result.seconds = property_watch.seconds();
  return result;
}

}  // namespace

uint64_t batch_seed(uint64_t seed, size_t property_index, int64_t batch) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (1 + property_index * 1'000'003 + static_cast<uint64_t>(batch));
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

const std::vector<FuzzProperty>& fuzz_properties() {
  static const std::vector<FuzzProperty> properties = {
      {"equivalence", "SPMD cases: ZeRO-3 equals the DDP reference bit for bit", gen_spmd_case, check_equivalence},
      {"no-silent-failure", "any case: equal to the reference or a specific error, never a silent mismatch",
       gen_any_case, check_no_silent_failure},
      {"collective-agreement", "rank-divergent cases: a mismatch/deadlock report; with the leaf policy, equal",
       gen_divergent_case, check_collective_agreement},
      {"lifecycle", "SPMD cases: lifecycle invariants at every hook on every rank", gen_spmd_case, check_lifecycle},
      {"determinism", "any case run twice: the same event-log hash and result", gen_any_case, check_determinism},
      {"checkpoint-round-trip", "SPMD cases: save at step k on W1, resume on W2, equal to the reference",
       gen_checkpoint_case, check_checkpoint_round_trip},
      {"replay-memory", "SPMD cases: the recorded trace replays to the run's per-rank memory peaks",
       gen_replay_case, check_replay_memory},
      {"device-agreement", "SPMD cases: the opaque device's run equals the cpu run bit for bit", gen_spmd_case,
       check_device_agreement},
      {"fault-tolerance", "SPMD cases under a fault plan: equal to the fault-free run or the fired fault's error; "
       "the last complete checkpoint intact", gen_fault_case, check_fault_tolerance},
  };
  return properties;
}

const FuzzProperty& find_fuzz_property(const std::string& name) {
  std::vector<std::string> known;
  for (const FuzzProperty& property : fuzz_properties()) {
    if (property.name == name) return property;
    known.push_back(property.name);
  }
  throw InputError("unknown property '" + name + "' (known: " + join_words(known) + ")");
}

int64_t FuzzReport::cases() const {
  int64_t total = 0;
  for (const PropertyResult& property : properties) total += property.cases;
  return total;
}

const PropertyResult* FuzzReport::first_failure() const {
  for (const PropertyResult& property : properties) {
    if (property.failed) return &property;
  }
  return nullptr;
}

FuzzReport run_fuzz(const FuzzOptions& options) {
  if (!options.inject.empty()) {
    FuzzCase probe;  // an unknown injection name fails here, before any case runs
    apply_injection(options.inject, probe);
  }
  for (const std::string& name : options.properties) find_fuzz_property(name);
  std::vector<size_t> selected;
  for (size_t index = 0; index < fuzz_properties().size(); ++index) {
    const std::string& name = fuzz_properties()[index].name;
    if (options.properties.empty() ||
        std::find(options.properties.begin(), options.properties.end(), name) != options.properties.end()) {
      selected.push_back(index);
    }
  }
  const Stopwatch run_watch;
  FuzzReport report;
  for (size_t k = 0; k < selected.size(); ++k) {
    // Each property gets its share of the time budget; what one leaves unused passes on.
    const double deadline_s = options.time_budget_s * static_cast<double>(k + 1) / static_cast<double>(selected.size());
    const FuzzProperty& property = fuzz_properties()[selected[k]];
    report.properties.push_back(run_property(property, selected[k], options, run_watch, deadline_s));
    if (report.properties.back().failed && options.stop_at_first_failure) break;
  }
  report.seconds = run_watch.seconds();
  report.budget_spent = options.time_budget_s > 0.0 && report.seconds >= options.time_budget_s;
  return report;
}

std::string write_counterexample(const std::string& out_dir, const std::string& name, const PropertyResult& failure) {
  std::filesystem::create_directories(out_dir);
  const std::string path = (std::filesystem::path(out_dir) / (name + ".json")).string();
  write_file_atomically(path, case_file_json(failure.counterexample, failure.property, failure.message).dump(2) + "\n");
  return path;
}

ReplayResult replay_case_file(const std::string& path) {
  const nlohmann::json json = read_json_file(path);
  const FuzzCase fuzz_case = case_from_file_json(json, path);
  const JsonReader expected = JsonReader(json, path).at("expected");
  ReplayResult result;
  result.property = expected.at("property").as_string();
  result.expected_message = expected.at("message").as_string();
  const Verdict verdict = find_fuzz_property(result.property).check(fuzz_case);
  result.reproduced = !verdict.ok;
  result.message = verdict.message;
  return result;
}

}  // namespace zero3
