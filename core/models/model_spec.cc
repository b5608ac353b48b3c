// Model spec reading: paths, type checks, defaults and the version gate.
#include "core/models/model_spec.h"

#include <algorithm>

#include "core/base/errors.h"
#include "core/base/json_reader.h"

namespace zero3 {

namespace {

// JSON pointer escaping (RFC 6901): '~' becomes "~0" and '/' becomes "~1".
std::string escape_pointer_token(const std::string& token) {
  std::string out;
  for (char c : token) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

std::string integer_expectation(int64_t min, int64_t max) {
  std::string range = min == 0 ? "a non-negative integer" : min == 1 ? "a positive integer"
                                                                     : "an integer >= " + std::to_string(min);
  if (max != kSpecIntegerMax) range += " up to " + std::to_string(max);
  return range;
}

}  // namespace

SpecNode::SpecNode(const nlohmann::json& value, std::string source, nlohmann::json* resolved)
    : value_(&value), source_(std::move(source)), resolved_(resolved) {}

SpecNode::SpecNode(const SpecNode& parent, std::string key, const nlohmann::json* value, nlohmann::json* resolved)
    : value_(value), source_(parent.source_), pointer_(parent.pointer_ + "/" + escape_pointer_token(key)),
      key_(std::move(key)), resolved_(resolved), parent_resolved_(parent.resolved_) {}

const nlohmann::json& SpecNode::value() const {
  ZERO3_CHECK(present(), "value() of the missing spec node " + pointer_);
  return *value_;
}

void SpecNode::fail(const std::string& message) const { throw_json_error(source_, pointer_, message); }

void SpecNode::fail_expected(const std::string& expected) const {
  if (!present()) fail("missing; expected " + expected);
  JsonReader(*value_, source_, pointer_).fail(expected);
}

void SpecNode::require_object(const std::string& what) const {
  if (!present() || !value_->is_object()) fail_expected("a JSON object (" + what + ")");
}

void SpecNode::expect_object(const std::vector<std::string>& allowed, const std::string& what) const {
  require_object(what);
  for (const auto& [key, unused] : value_->items()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      at(key).fail("unknown key \"" + key + "\" in " + what + "; allowed keys: " + join_words(allowed));
    }
  }
}

SpecNode SpecNode::at(const std::string& key) const {
  const bool has = present() && value_->is_object() && value_->contains(key);
  nlohmann::json* resolved = has && resolved_ ? &(*resolved_)[key] : nullptr;
  return SpecNode(*this, key, has ? &(*value_)[key] : nullptr, resolved);
}

SpecNode SpecNode::at(size_t index) const {
  const bool has = present() && value_->is_array() && index < value_->size();
  nlohmann::json* resolved = has && resolved_ ? &(*resolved_)[index] : nullptr;
  return SpecNode(*this, std::to_string(index), has ? &(*value_)[index] : nullptr, resolved);
}

size_t SpecNode::array_size() const {
  if (!present() || !value_->is_array()) fail_expected("an array");
  return value_->size();
}

int64_t SpecNode::integer(int64_t min, int64_t max) const {
  const std::string expected = integer_expectation(min, max);
  if (!present() || !value_->is_number_integer()) fail_expected(expected);
  if (value_->is_number_unsigned() && value_->get<uint64_t>() > static_cast<uint64_t>(max)) fail_expected(expected);
  const int64_t number = value_->get<int64_t>();
  if (number < min || number > max) fail_expected(expected);
  return number;
}

bool SpecNode::boolean() const {
  if (!present() || !value_->is_boolean()) fail_expected("true or false");
  return value_->get<bool>();
}

std::string SpecNode::text() const {
  if (!present() || !value_->is_string()) fail_expected("a string");
  return value_->get<std::string>();
}

std::string SpecNode::one_of(const std::vector<std::string>& choices) const {
  const std::string expected = "one of " + join_words(choices);
  if (!present() || !value_->is_string()) fail_expected(expected);
  const std::string choice = value_->get<std::string>();
  if (std::find(choices.begin(), choices.end(), choice) == choices.end()) fail_expected(expected);
  return choice;
}

Shape SpecNode::shape() const {
  const std::string expected = "a shape (an array of non-negative integers)";
  if (!present() || !value_->is_array()) fail_expected(expected);
  // Each dimension fits 31 bits; their product must fit a parameter too (three of them need not).
  constexpr int64_t kShapeElementsMax = int64_t{1} << 48;
  Shape shape;
  int64_t elements = 1;
  for (size_t i = 0; i < value_->size(); ++i) {
    shape.push_back(at(i).integer(0));
    if (elements != 0 && shape.back() > kShapeElementsMax / std::max<int64_t>(elements, 1)) {
      fail_expected("a shape of at most 2^48 elements");
    }
    elements *= shape.back();
  }
  return shape;
}

void SpecNode::record_default(const nlohmann::json& fallback) const {
  if (parent_resolved_ && parent_resolved_->is_object()) (*parent_resolved_)[key_] = fallback;
}

int64_t SpecNode::integer_or(int64_t fallback, int64_t min, int64_t max) const {
  if (present()) return integer(min, max);
  record_default(fallback);
  return fallback;
}

bool SpecNode::boolean_or(bool fallback) const {
  if (present()) return boolean();
  record_default(fallback);
  return fallback;
}

std::string SpecNode::text_or(const std::string& fallback) const {
  if (present()) return text();
  record_default(fallback);
  return fallback;
}

void check_spec_version(const SpecNode& root) {
  const SpecNode version = root.at("zero3_model_spec");
  const std::string supported = std::to_string(kModelSpecVersion);
  const std::string expected = "the model spec version " + supported + " (a spec starts {\"zero3_model_spec\": " +
                               supported + ", ...})";
  if (!version.present() || !version.value().is_number_integer()) version.fail_expected(expected);
  const nlohmann::json& value = version.value();
  const bool newer = value.is_number_unsigned() ? value.get<uint64_t>() > static_cast<uint64_t>(kModelSpecVersion)
                                                : value.get<int64_t>() > kModelSpecVersion;
  if (newer) {
    version.fail("version " + json_excerpt(value) + " is newer than this build supports; expected " + expected);
  }
  if (value.get<int64_t>() < 1) version.fail_expected(expected);
}

}  // namespace zero3
