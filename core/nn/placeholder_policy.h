// What a raw (unchecked) handle to a parameter shows while an engine holds it partitioned. Real
// user code keeps cached references to parameter data; what they see decides whether a bug is loud
// or silent (the broadcast trap, failure class 3, README.md "Design"). The property harness measures each policy.
#pragma once
#include <cstdint>
#include <string>

namespace zero3 {

enum class PlaceholderPolicy : uint8_t {
  error,   // any use raises, naming the parameter, its shape, its status and the module (default)
  empty,   // a shape-[0] tensor, as DeepSpeed does today
  scalar,  // a shape-[1] tensor holding 1.0, as DeepSpeed did in 2021
};
const char* placeholder_policy_name(PlaceholderPolicy policy);
// Parses "error", "empty" or "scalar"; returns false for anything else.
bool parse_placeholder_policy(const std::string& text, PlaceholderPolicy* out);

}  // namespace zero3
