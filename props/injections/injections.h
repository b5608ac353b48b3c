// The harness's mutation score: every bug that core/zero3/bug_injection.h can put back into the engine,
// plus the two placeholder policies that DeepSpeed shipped (`empty`, `scalar`), which turn the
// broadcast trap into silent failures. The suite must catch each one.
//
//   for (const Injection& injection : all_injections()) std::puts(injection.name.c_str());
//   apply_injection("placeholder-empty", fuzz_case);
#pragma once
#include <string>
#include <vector>

#include "props/fuzz_case.h"

namespace zero3 {

struct Injection {
  std::string name;  // a Bug name, or placeholder-empty / placeholder-scalar
  std::string description;
};

// Every Bug in declaration order, then placeholder-empty and placeholder-scalar.
std::vector<Injection> all_injections();
// Switches the injection on for the case: the bug in the engine, or the placeholder policy in its
// config. InputError listing the known names when `name` is not one.
void apply_injection(const std::string& name, FuzzCase& fuzz_case);

}  // namespace zero3
