// The injections the harness must catch (see injections.h).
#include "props/injections/injections.h"

#include "core/base/text.h"
#include "core/zero3/bug_injection.h"
#include "core/base/errors.h"

namespace zero3 {

namespace {

struct PolicyInjection {
  const char* name;
  PlaceholderPolicy policy;
  const char* description;
};

constexpr PolicyInjection kPolicyInjections[] = {
    {"placeholder-empty", PlaceholderPolicy::empty,
     "raw handles to partitioned parameters show a [0] tensor (DeepSpeed today): x[B,1] * p -> [B,0]"},
    {"placeholder-scalar", PlaceholderPolicy::scalar,
     "raw handles to partitioned parameters show a [1] tensor of 1.0 (DeepSpeed 2021): x * p -> x"},
};

}  // namespace

std::vector<Injection> all_injections() {
  std::vector<Injection> injections;
  for (Bug bug : all_bugs()) {
    injections.push_back({bug_name(bug), bug_description(bug)});
  }
  for (const PolicyInjection& policy : kPolicyInjections) injections.push_back({policy.name, policy.description});
  return injections;
}

void apply_injection(const std::string& name, FuzzCase& fuzz_case) {
  for (const PolicyInjection& policy : kPolicyInjections) {
    if (name == policy.name) {
      fuzz_case.config.zero.placeholder = policy.policy;
      return;
    }
  }
  for (Bug bug : all_bugs()) {
    if (name == bug_name(bug)) {
      fuzz_case.inject = {name};
      return;
    }
  }
  std::vector<std::string> known;
  for (const Injection& injection : all_injections()) known.push_back(injection.name);
  throw InputError("unknown injection '" + name + "' (known: " + join_words(known) + ")");
}

}  // namespace zero3
