// Parameter construction and placeholder policy names.
#include "core/nn/parameter.h"

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

Parameter::Parameter(Module* owner, std::string local_name, Shape shape, Init init, float init_std)
    : owner_(owner), local_name_(std::move(local_name)), name_(local_name_), shape_(std::move(shape)),
      init_(init), init_std_(init_std) {}

}  // namespace zero3
