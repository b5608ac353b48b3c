// Validating JSON access for user-supplied files: every failure is an InputError naming the
// source file, the JSON path (JSON-pointer style) and what was expected.
//
//   JsonReader root(json, "ds_config.json");
//   int64_t steps = root.at("gradient_accumulation_steps").as_int(1, 1 << 20);
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/base/text.h"

namespace zero3 {

class JsonReader {
 public:
  JsonReader(const nlohmann::json& json, std::string source, std::string path = "");

  const std::string& path() const { return path_; }
  const std::string& source() const { return source_; }
  const nlohmann::json& json() const { return json_; }
  bool has(const std::string& key) const;
  JsonReader at(const std::string& key) const;  // InputError when missing
  JsonReader at(size_t index) const;
  size_t size() const;                          // of an array (InputError otherwise)
  std::vector<std::string> keys() const;        // of an object (InputError otherwise)

  int64_t as_int(int64_t min, int64_t max) const;
  double as_number(double min, double max) const;
  bool as_bool() const;
  std::string as_string() const;
  std::string as_choice(const std::vector<std::string>& allowed) const;
  void expect_object() const;
  void expect_array() const;

  // Rejects keys outside `allowed`, naming the first unknown one and listing the allowed ones.
  void expect_only_keys(const std::vector<std::string>& allowed) const;
  [[noreturn]] void fail(const std::string& expected) const;

 private:
  const nlohmann::json& json_;
  std::string source_;
  std::string path_;
};

// Every JSON input is parsed through these: InputError naming the file (and line/column for
// syntax errors). Nesting is bounded, because nlohmann's dump() and destructor, and every reader
// that walks a value, recurse once per level: a file of 100,000 nested brackets would otherwise
// overflow the stack (found by tools/e2e/input_fuzz.py).
constexpr int kJsonNestingMax = 100;
nlohmann::json parse_json_text(const std::string& text, const std::string& source);
nlohmann::json read_json_file(const std::string& path);

// Throws InputError "SOURCE: at POINTER: MESSAGE", the one shape of every error in a JSON input;
// the document root (pointer "") shows as "/". JsonReader and the model spec reader both use it.
[[noreturn]] void throw_json_error(const std::string& source, const std::string& pointer, const std::string& message);
// A JSON value as it appears in an error: compact, and cut at 60 characters.
std::string json_excerpt(const nlohmann::json& value);

}  // namespace zero3
