// The fuzz engine behind `zero3 fuzz` and the injection test: it runs each property of
// properties.h over generated cases through RapidCheck with a given seed and case budget, lets
// RapidCheck shrink the first counterexample, and hands that case back, ready to be written as a
// case file and replayed.
//
//   FuzzReport report = run_fuzz({.cases = 200, .seed = 7, .inject = "grad-padding-uninitialized"});
//   if (const PropertyResult* failure = report.first_failure()) {
//     write_file_atomically("case.json",
//                           case_file_json(failure->counterexample, failure->property, failure->message).dump(2));
//   }
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "props/fuzz_case.h"
#include "props/generators.h"
#include "props/properties.h"

namespace zero3 {

struct FuzzProperty {
  std::string name;  // as in case files' expected.property
  std::string description;
  rc::Gen<FuzzCase> (*generate)(const GenLimits&);
  Verdict (*check)(const FuzzCase&);
};
// equivalence, no-silent-failure, collective-agreement, lifecycle, determinism,
// checkpoint-round-trip, replay-memory, device-agreement, fault-tolerance (in this order).
const std::vector<FuzzProperty>& fuzz_properties();
// InputError listing the names when there is no such property.
const FuzzProperty& find_fuzz_property(const std::string& name);

struct FuzzProgress {
  std::string property;
  int64_t cases = 0;  // cases run for this property so far
  int64_t cases_total = 0;
  int64_t shrinks_tried = 0;  // while shrinking a counterexample
  double elapsed_s = 0.0;     // since run_fuzz started
};

struct FuzzOptions {
  int64_t cases = 100;  // per property
  uint64_t seed = 1;
  int max_ranks = 16;
  std::string inject{};        // an injection name (injections.h), "" for none
  double time_budget_s = 0.0;  // 0: no budget; else no new batch of cases starts once it is spent
  std::vector<std::string> properties{};  // empty: every property
  bool stop_at_first_failure = false;
  Device device = Device::cpu;  // set on every generated case (FuzzCase::device)
  std::function<void(const FuzzProgress&)> on_progress{};
};

struct PropertyResult {
  std::string property;
  int64_t cases = 0;     // generated cases run, shrinking not counted
  double seconds = 0.0;  // shrinking included
  bool failed = false;
  int64_t failing_case = 0;  // 1-based number of the first failing case
  int64_t shrinks_tried = 0;
  int64_t shrinks_accepted = 0;
  // With an injection: cases (shrink candidates included) that failed without it too — a failure
  // of the engine itself, not credited to the injection, so never a counterexample of it.
  int64_t failing_without_injection = 0;
  FuzzCase counterexample{};  // shrunk, the injection applied
  std::string message{};
  bool harness_error = false;  // the shrunk failure was the harness throwing, not a verdict on the engine
};

struct FuzzReport {
  std::vector<PropertyResult> properties;
  double seconds = 0.0;
  bool budget_spent = false;  // the time budget ended the run before the case budget did
  int64_t cases() const;
  const PropertyResult* first_failure() const;
};

FuzzReport run_fuzz(const FuzzOptions& options);

// SplitMix64: one well-mixed RapidCheck seed per (run seed, property, batch of cases); the target
// campaign (target_fuzzer.h) uses property 0.
uint64_t batch_seed(uint64_t seed, size_t property_index, int64_t batch);

// Writes the shrunk counterexample as OUT_DIR/NAME.json (a case file `zero3 fuzz --replay` re-runs),
// creating the folder; the path written.
std::string write_counterexample(const std::string& out_dir, const std::string& name, const PropertyResult& failure);

struct ReplayResult {
  std::string property;
  bool reproduced = false;  // the property fails on the case again
  std::string message;      // this run's verdict message ("" when it passes)
  std::string expected_message;
};
// Re-runs the property named in a case file on its case.
ReplayResult replay_case_file(const std::string& path);

}  // namespace zero3
