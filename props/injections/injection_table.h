// The mutation score as a table: each injection fuzzed with several seeds, which property caught
// it, at which case, how small the counterexample shrank, and whether anything failed without the
// injection or only because the harness threw. `zero3 fuzz --injection-table` prints it (the
// props/README.md's table is pasted from that output) and props/injections/injections_test.cc asserts on it.
//
//   const InjectionTable table = run_injection_table({.seeds = {1, 2, 3}});
//   std::fputs(injection_table_markdown(table).c_str(), stdout);
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor/device.h"

namespace zero3 {

struct InjectionTableOptions {
  std::vector<uint64_t> seeds = {1, 2, 3};
  int64_t cases = 500;  // per property, as `zero3 fuzz --cases`
  int max_ranks = 8;
  Device device = Device::cpu;
  std::vector<std::string> injections{};  // empty: every injection (props/injections/injections.h)
};

struct InjectionSeedResult {
  uint64_t seed = 0;
  bool caught = false;  // by a verdict on the engine, not by the harness throwing
  std::string property{};
  int64_t failing_case = 0;
  int64_t layers = 0;    // of the shrunk counterexample
  int64_t elements = 0;
  int world = 0;
  bool harness_error = false;
  int64_t failing_without_injection = 0;
  std::string message{};
};

struct InjectionRow {
  std::string injection;
  std::string description;
  std::vector<InjectionSeedResult> seeds;
  bool caught_every_seed() const;
  std::vector<std::string> caught_by() const;  // properties that caught it, in first-seen order
};

struct InjectionTable {
  InjectionTableOptions options;
  std::vector<InjectionRow> rows;
  double seconds = 0.0;
};

InjectionTable run_injection_table(const InjectionTableOptions& options);
// | injection | caught by | first failure (seed a, b, c) | shrunk (layers / elements / W, first seed) |
// | failing without it | plus a line naming the command that produced it.
std::string injection_table_markdown(const InjectionTable& table);

}  // namespace zero3
