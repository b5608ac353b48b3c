// Reading a versioned JSON model spec (core/models/MODEL_SPEC.md) with errors that say where and what:
// every failure is an InputError "SOURCE: at /json/pointer: expected ..., got ...", where SOURCE is
// the file path or builtin:NAME, in the shape of every JSON input error (json_reader.h).
//
//   SpecNode root(spec, "model.json", &resolved);
//   root.expect_object({"zero3_model_spec", "kind", "layers"});
//   int64_t out = root.at("layers").at(3).at("out").integer(0);  // "/layers/3/out"
//
// `resolved` is a copy of the spec that getters with a default fill in, so reports and traces
// record every value the model was built with.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tensor/shape.h"

namespace zero3 {

constexpr int64_t kModelSpecVersion = 1;
// The largest width or count a spec may ask for, so that shapes cannot overflow int64.
constexpr int64_t kSpecIntegerMax = 2147483647;  // 2^31 - 1

class SpecNode {
 public:
  // The document root. `resolved` (may be null) must be a copy of `value`.
  SpecNode(const nlohmann::json& value, std::string source, nlohmann::json* resolved);

  const std::string& source() const { return source_; }
  const std::string& pointer() const { return pointer_; }
  bool present() const { return value_ != nullptr; }
  const nlohmann::json& value() const;  // requires present()
  // Throws InputError "SOURCE: at POINTER: MESSAGE".
  [[noreturn]] void fail(const std::string& message) const;
  // Fails with "expected EXPECTED, got VALUE", or "missing; expected EXPECTED" for a missing node.
  [[noreturn]] void fail_expected(const std::string& expected) const;

  void require_object(const std::string& what) const;
  // Requires an object whose keys are all in `allowed`; an unknown key fails naming it and the list.
  void expect_object(const std::vector<std::string>& allowed, const std::string& what) const;
  // A member or an element; it may be missing, and reading a missing node fails naming its path.
  SpecNode at(const std::string& key) const;
  SpecNode at(size_t index) const;
  size_t array_size() const;  // requires an array

  int64_t integer(int64_t min, int64_t max = kSpecIntegerMax) const;
  bool boolean() const;
  std::string text() const;
  std::string one_of(const std::vector<std::string>& choices) const;
  Shape shape() const;  // an array of integers in [0, kSpecIntegerMax]

  // Readers for optional members: a missing one takes `fallback`, recorded in the resolved spec.
  int64_t integer_or(int64_t fallback, int64_t min, int64_t max = kSpecIntegerMax) const;
  bool boolean_or(bool fallback) const;
  std::string text_or(const std::string& fallback) const;

 private:
  SpecNode(const SpecNode& parent, std::string key, const nlohmann::json* value, nlohmann::json* resolved);
  void record_default(const nlohmann::json& fallback) const;

  const nlohmann::json* value_;
  std::string source_;
  std::string pointer_;
  std::string key_;                       // the member name or index this node was reached by
  nlohmann::json* resolved_;              // this node in the resolved copy (null when missing)
  nlohmann::json* parent_resolved_ = nullptr;
};

// Checks /zero3_model_spec: a missing, non-integer or newer version is rejected.
void check_spec_version(const SpecNode& root);

}  // namespace zero3
