// Placeholder policy names, as configs and reports spell them.
#include "core/nn/placeholder_policy.h"

namespace zero3 {

const char* placeholder_policy_name(PlaceholderPolicy policy) {
  switch (policy) {
    case PlaceholderPolicy::error: return "error";
    case PlaceholderPolicy::empty: return "empty";
    case PlaceholderPolicy::scalar: return "scalar";
  }
  return "unknown";
}

bool parse_placeholder_policy(const std::string& text, PlaceholderPolicy* out) {
  if (text == "error") { *out = PlaceholderPolicy::error; return true; }
  if (text == "empty") { *out = PlaceholderPolicy::empty; return true; }
  if (text == "scalar") { *out = PlaceholderPolicy::scalar; return true; }
  return false;
}

}  // namespace zero3
