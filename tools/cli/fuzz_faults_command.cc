// `zero3 fuzz faults` (fuzz_faults_command.h).
#include "tools/cli/fuzz_faults_command.h"

#include <cstdio>
#include <optional>
#include <random>

#include "core/base/errors.h"
#include "core/base/text.h"
#include "props/fault_campaign.h"
#include "props/fault_tolerance.h"
#include "props/fuzzer.h"
#include "tools/runs/progress.h"

namespace zero3 {

namespace {

// Below this many runs a lever path's site may go unreached by chance; from it on, an unreached
// site means the campaign no longer aims there (gen_campaign_fault_plan) and fails the command.
constexpr int64_t kRunsThatMustReachEverySite = 1000;

void run_fixed_model_campaign(const FaultCampaignCommandOptions& flags) {
  FaultCampaignOptions options{.model = flags.model, .plan = flags.plan};
  // --seed S seeds the model and data and starts the fault seeds (S, S+1, ...); without it, seed 1,
  // the run the first reliability table in props/README.md was made with.
  const uint64_t first = flags.seed_given ? flags.seed : 1;
  options.seed = first;
  for (int64_t run = 0; run < flags.runs; ++run) options.fault_seeds.push_back(first + static_cast<uint64_t>(run));
  std::printf("zero3 fuzz faults: %s W=%d, %lld steps, faults '%s', model and data seed %llu, fault seeds %llu..%llu\n"
              "  replay: zero3 fuzz faults --model %s --runs %lld --seed %llu --faults '%s'\n",
              options.model.c_str(), options.world, static_cast<long long>(options.steps), options.plan.c_str(),
              static_cast<unsigned long long>(first), static_cast<unsigned long long>(first),
              static_cast<unsigned long long>(options.fault_seeds.back()), options.model.c_str(),
              static_cast<long long>(flags.runs), static_cast<unsigned long long>(first), options.plan.c_str());
  std::fflush(stdout);
  ProgressBar progress(flags.runs, "faults");
  const FaultCampaign campaign = run_fault_campaign(options, [&](const FaultRunOutcome& run, size_t done) {
    progress.update(static_cast<int64_t>(done), fault_outcome_name(run.outcome));
  });
  progress.finish();
  std::printf("\n%s\n(%.1f s)\n", fault_campaign_table(campaign).c_str(), campaign.seconds);
  if (!campaign.reliable()) {
    throw CorrectnessError("the fault campaign found hangs, silent corruptions or unexplained errors (see above)");
  }
}

void save_counterexample(const FaultCampaignCommandOptions& flags, const PropertyResult& failure) {
  std::printf("\ncounterexample (shrunk: %s):\n%s\n", describe(failure.counterexample).c_str(), failure.message.c_str());
  const std::string path = write_counterexample(flags.out_dir, "fault-tolerance-seed" + std::to_string(flags.seed), failure);
  std::printf("  written to %s\n  replay: zero3 fuzz --replay %s\n", path.c_str(), path.c_str());
}

void run_generated_campaign(const FaultCampaignCommandOptions& flags) {
  std::printf("zero3 fuzz faults: %lld generated cases (models, stages, levers, groups, bf16, checkpoint series), "
              "seed %llu, max-ranks %d\n  replay: zero3 fuzz faults --runs %lld --seed %llu --max-ranks %d\n",
              static_cast<long long>(flags.runs), static_cast<unsigned long long>(flags.seed), flags.max_ranks,
              static_cast<long long>(flags.runs), static_cast<unsigned long long>(flags.seed), flags.max_ranks);
  std::fflush(stdout);
  // The property hands every run to the table; a run is kept once RapidCheck says it was a
  // generated case, not a shrink candidate (those come only after a failure, and would count one
  // failure many times).
  FaultSiteTable table;
  std::optional<FaultCaseRun> last_run;
  set_fault_case_sink([&](const FuzzCase&, const FaultCaseRun& run) { last_run = run; });
  ProgressBar progress(flags.runs, "faults");
  int64_t cases_seen = 0;
  FuzzOptions options{.cases = flags.runs, .seed = flags.seed, .max_ranks = flags.max_ranks,
                      .properties = {"fault-tolerance"}};
  options.on_progress = [&](const FuzzProgress& at) {
    if (at.cases > cases_seen && last_run) table.add(*last_run);
    cases_seen = at.cases;
    last_run.reset();
    const double rate = at.elapsed_s > 0.0 ? static_cast<double>(at.cases) / at.elapsed_s : 0.0;
    char rate_text[32];
    std::snprintf(rate_text, sizeof(rate_text), "%.1f runs/s", rate);
    std::string status = rate_text;
    if (at.shrinks_tried > 0) status += ", shrinking (" + std::to_string(at.shrinks_tried) + " tried)";
    progress.update(at.cases, status);
  };
  FuzzReport report;
  try {
    report = run_fuzz(options);
  } catch (...) {
    set_fault_case_sink({});
    throw;
  }
  set_fault_case_sink({});
  progress.finish();
  std::printf("\n%s\n(%lld runs in %.1f s)\n", table.markdown().c_str(), static_cast<long long>(report.cases()),
              report.seconds);
  if (const PropertyResult* failure = report.first_failure()) {
    save_counterexample(flags, *failure);
    throw CorrectnessError("the fault campaign found a hang, silent corruption, unexplained error or damaged "
                           "checkpoint (seed " + std::to_string(flags.seed) + ")");
  }
  const std::vector<std::string> unreached = table.unreached_new_sites();
  // HSDP and hpZ blocks need W >= 4 (a block strictly inside the world, and more than one): below
  // that their sites cannot be drawn, and their absence says nothing.
  if (flags.runs >= kRunsThatMustReachEverySite && flags.max_ranks >= 4 && !unreached.empty()) {
    throw CorrectnessError("no fault reached these sites in " + std::to_string(flags.runs) + " runs: " +
                           join_words(unreached));
  }
}

}  // namespace

void run_fault_campaign_command(const FaultCampaignCommandOptions& options) {
  if (!options.model.empty()) return run_fixed_model_campaign(options);
  FaultCampaignCommandOptions flags = options;
  if (!flags.seed_given) flags.seed = std::random_device{}() % 1'000'000'000;
  run_generated_campaign(flags);
}

}  // namespace zero3
