// How each placeholder policy fails when a raw handle reads a parameter that is not gathered:
// broadcast-trap cases, each run under the three policies, counted only where the trap was
// reached (the engine saw a placeholder read). `zero3 fuzz --placeholder-rates` prints the table;
// props/README.md's figures are its output and props/injections/injections_test.cc asserts on it.
//
//   const PlaceholderRates rates = measure_placeholder_rates({.cases = 1000, .seed = 1});
//   std::fputs(placeholder_rates_table(rates).c_str(), stdout);
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/nn/placeholder_policy.h"

namespace zero3 {

struct PlaceholderRatesOptions {
  int64_t cases = 1000;
  uint64_t seed = 1;
  int max_ranks = 8;
};

struct PolicyRates {
  PlaceholderPolicy policy = PlaceholderPolicy::error;
  int64_t cases = 0;
  int64_t trap_reached = 0;  // cases with at least one placeholder read; the rest are not counted below
  int64_t silent_wrong = 0;  // completed, differs from the DDP reference
  int64_t specific_error = 0;
  int64_t other_error = 0;
  int64_t equal = 0;  // completed, equal: the placeholder's value did not matter
  double silent_rate() const { return trap_reached == 0 ? 0.0 : static_cast<double>(silent_wrong) / trap_reached; }
};

struct PlaceholderRates {
  PlaceholderRatesOptions options;
  std::vector<PolicyRates> policies;  // error, empty, scalar
  double seconds = 0.0;
};

PlaceholderRates measure_placeholder_rates(const PlaceholderRatesOptions& options);
std::string placeholder_rates_table(const PlaceholderRates& rates);

}  // namespace zero3
