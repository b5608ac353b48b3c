// Placeholder policy rates (placeholder_rates.h).
#include "props/injections/placeholder_rates.h"

#include <cstdio>

#include "core/base/stopwatch.h"
#include "props/generators.h"
#include "props/properties.h"

namespace zero3 {

PlaceholderRates measure_placeholder_rates(const PlaceholderRatesOptions& options) {
  const Stopwatch watch;
  PlaceholderRates rates;
  rates.options = options;
  for (PlaceholderPolicy policy : {PlaceholderPolicy::error, PlaceholderPolicy::empty, PlaceholderPolicy::scalar}) {
    rates.policies.push_back({.policy = policy});
  }
  for (int64_t i = 0; i < options.cases; ++i) {
    // Case i comes from its own seed, so a run of N cases is a prefix of a run of more.
    const rc::Random random(options.seed + static_cast<uint64_t>(i));
    const FuzzCase generated =
        gen_broadcast_trap_case({.max_ranks = options.max_ranks})(random, static_cast<int>(i % 100)).value();
    for (PolicyRates& policy : rates.policies) {
      FuzzCase fuzz_case = generated;
      fuzz_case.config.zero.placeholder = policy.policy;
      const ClassifiedRun run = classify_run(fuzz_case);
      policy.cases++;
      if (run.placeholder_reads == 0) continue;
      policy.trap_reached++;
      switch (run.outcome) {
        case RunOutcome::equal: policy.equal++; break;
        case RunOutcome::silent_mismatch: policy.silent_wrong++; break;
        case RunOutcome::specific_error: policy.specific_error++; break;
        case RunOutcome::unspecific_error: policy.other_error++; break;
      }
    }
  }
  rates.seconds = watch.seconds();
  return rates;
}

std::string placeholder_rates_table(const PlaceholderRates& rates) {
  std::string out =
      "| policy | cases | trap reached | silent wrong result | specific error | other error | equal anyway |\n"
      "|---|---|---|---|---|---|---|\n";
  for (const PolicyRates& policy : rates.policies) {
    char line[256];
    std::snprintf(line, sizeof(line), "| %s | %lld | %lld | %lld (%.1f %%) | %lld | %lld | %lld |\n",
                  placeholder_policy_name(policy.policy), static_cast<long long>(policy.cases),
                  static_cast<long long>(policy.trap_reached), static_cast<long long>(policy.silent_wrong),
                  100.0 * policy.silent_rate(), static_cast<long long>(policy.specific_error),
                  static_cast<long long>(policy.other_error), static_cast<long long>(policy.equal));
    out += line;
  }
  out += "\nrates are of the cases where the trap was reached; produced by: zero3 fuzz --placeholder-rates --cases " +
         std::to_string(rates.options.cases) + " --seed " + std::to_string(rates.options.seed) + " --max-ranks " +
         std::to_string(rates.options.max_ranks) + "\n";
  return out;
}

}  // namespace zero3
