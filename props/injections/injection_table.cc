// The injection table (injection_table.h).
#include "props/injections/injection_table.h"

#include <algorithm>

#include "core/base/stopwatch.h"
#include "core/base/text.h"
#include "props/fuzzer.h"
#include "props/injections/injections.h"

namespace zero3 {

bool InjectionRow::caught_every_seed() const {
  return std::all_of(seeds.begin(), seeds.end(), [](const InjectionSeedResult& seed) { return seed.caught; });
}

std::vector<std::string> InjectionRow::caught_by() const {
  std::vector<std::string> properties;
  for (const InjectionSeedResult& seed : seeds) {
    if (seed.caught && std::find(properties.begin(), properties.end(), seed.property) == properties.end()) {
      properties.push_back(seed.property);
    }
  }
  return properties;
}

namespace {

InjectionSeedResult fuzz_one(const InjectionTableOptions& options, const std::string& injection, uint64_t seed) {
  FuzzOptions fuzz{.cases = options.cases, .seed = seed, .max_ranks = options.max_ranks, .inject = injection,
                   .stop_at_first_failure = true};
  fuzz.device = options.device;
  const FuzzReport report = run_fuzz(fuzz);
  InjectionSeedResult result{.seed = seed};
  for (const PropertyResult& property : report.properties) {
    result.failing_without_injection += property.failing_without_injection;
  }
  const PropertyResult* failure = report.first_failure();
  if (failure == nullptr) return result;
  result.harness_error = failure->harness_error;
  result.caught = !failure->harness_error;
  result.property = failure->property;
  result.failing_case = failure->failing_case;
  result.message = failure->message;
  const CaseSize size = case_size(failure->counterexample);
  result.layers = size.layers;
  result.elements = size.elements;
  result.world = failure->counterexample.world;
  return result;
}

}  // namespace

InjectionTable run_injection_table(const InjectionTableOptions& options) {
  const Stopwatch watch;
  InjectionTable table;
  table.options = options;
  for (const Injection& injection : all_injections()) {
    if (!options.injections.empty() &&
        std::find(options.injections.begin(), options.injections.end(), injection.name) == options.injections.end()) {
      continue;
    }
    InjectionRow row{.injection = injection.name, .description = injection.description, .seeds = {}};
    for (uint64_t seed : options.seeds) row.seeds.push_back(fuzz_one(options, injection.name, seed));
    table.rows.push_back(std::move(row));
  }
  table.seconds = watch.seconds();
  return table;
}

std::string injection_table_markdown(const InjectionTable& table) {
  std::vector<std::string> seed_names;
  for (uint64_t seed : table.options.seeds) seed_names.push_back(std::to_string(seed));
  std::string out = "| injection | caught by | first failure (seeds " + join_words(seed_names) +
                    ") | shrunk, seed " + (seed_names.empty() ? "-" : seed_names.front()) +
                    " (layers / elements / W) | failing without it |\n|---|---|---|---|---|\n";
  for (const InjectionRow& row : table.rows) {
    std::vector<std::string> firsts;
    for (const InjectionSeedResult& seed : row.seeds) {
      firsts.push_back(seed.caught ? std::to_string(seed.failing_case)
                                   : seed.harness_error ? "harness threw" : "NOT CAUGHT");
    }
    std::string shrunk = "-";
    if (!row.seeds.empty() && row.seeds.front().caught) {
      const InjectionSeedResult& first = row.seeds.front();
      shrunk = std::to_string(first.layers) + " / " + std::to_string(first.elements) + " / " +
               std::to_string(first.world);
    }
    int64_t without = 0;
    for (const InjectionSeedResult& seed : row.seeds) without += seed.failing_without_injection;
    const std::vector<std::string> by = row.caught_by();
    out += "| " + row.injection + " | " + (by.empty() ? "-" : join_words(by)) + " | " + join_words(firsts) + " | " +
           shrunk + " | " + std::to_string(without) + " |\n";
  }
  std::string seed_list;
  for (const std::string& seed : seed_names) seed_list += (seed_list.empty() ? "" : ",") + seed;
  out += "\nproduced by: zero3 fuzz --injection-table --seeds " + seed_list + " --cases " +
         std::to_string(table.options.cases) + " --max-ranks " + std::to_string(table.options.max_ranks) + "\n";
  return out;
}

}  // namespace zero3
