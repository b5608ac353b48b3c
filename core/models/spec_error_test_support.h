// Test helpers for bad model specs (model_spec_test.cc, token_model_test.cc): the InputError a spec
// text raises, and a check that a message names every fragment it must (source, JSON path, what
// was expected).
#pragma once
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/base/errors.h"
#include "core/models/model_zoo.h"

namespace zero3 {

// The InputError message of building `spec_text` from `source`, or "(no InputError)".
inline std::string spec_error(const std::string& spec_text, const std::string& source = "specs/bad.json") {
  try {
    build_model_from_spec(nlohmann::json::parse(spec_text), source, {});
  } catch (const InputError& error) {
    return error.what();
  }
  return "(no InputError)";
}

inline void expect_mentions(const std::string& message, const std::vector<std::string>& fragments) {
  for (const std::string& fragment : fragments) {
    EXPECT_NE(message.find(fragment), std::string::npos) << "missing '" << fragment << "' in: " << message;
  }
}

}  // namespace zero3
