// Validating JSON access with file + JSON path in every error.
#include "core/base/json_reader.h"

#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "core/base/errors.h"

namespace zero3 {

JsonReader::JsonReader(const nlohmann::json& json, std::string source, std::string path)
    : json_(json), source_(std::move(source)), path_(std::move(path)) {}

void JsonReader::fail(const std::string& expected) const {
  throw_json_error(source_, path_, "expected " + expected + ", got " + json_excerpt(json_));
}

bool JsonReader::has(const std::string& key) const { return json_.is_object() && json_.contains(key); }

JsonReader JsonReader::at(const std::string& key) const {
  expect_object();
  if (!json_.contains(key)) throw_json_error(source_, path_, "missing required key '" + key + "'");
  return JsonReader(json_.at(key), source_, path_ + "/" + key);
}

JsonReader JsonReader::at(size_t index) const {
  expect_array();
  return JsonReader(json_.at(index), source_, path_ + "/" + std::to_string(index));
}

size_t JsonReader::size() const {
  expect_array();
  return json_.size();
}

std::vector<std::string> JsonReader::keys() const {
  expect_object();
  std::vector<std::string> out;
  for (const auto& item : json_.items()) out.push_back(item.key());
  return out;
}

int64_t JsonReader::as_int(int64_t min, int64_t max) const {
  const std::string range = "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  if (json_.is_number_integer()) {
    const int64_t value = json_.get<int64_t>();
    if (value >= min && value <= max) return value;
  } else if (json_.is_number_float()) {
    // DeepSpeed configs often write integers as 5e7; accept them when they are whole.
    const double value = json_.get<double>();
    if (value == static_cast<double>(static_cast<int64_t>(value)) && value >= static_cast<double>(min) &&
        value <= static_cast<double>(max)) {
      return static_cast<int64_t>(value);
    }
  }
  fail(range);
}

double JsonReader::as_number(double min, double max) const {
  if (json_.is_number()) {
    const double value = json_.get<double>();
    if (value >= min && value <= max) return value;
  }
  std::ostringstream range;
  range << "a number in [" << min << ", " << max << "]";
  fail(range.str());
}

bool JsonReader::as_bool() const {
  if (!json_.is_boolean()) fail("true or false");
  return json_.get<bool>();
}

std::string JsonReader::as_string() const {
  if (!json_.is_string()) fail("a string");
  return json_.get<std::string>();
}

std::string JsonReader::as_choice(const std::vector<std::string>& allowed) const {
  if (json_.is_string()) {
    const std::string value = json_.get<std::string>();
    for (const auto& choice : allowed) {
      if (choice == value) return value;
    }
  }
  std::vector<std::string> quoted;
  for (const auto& choice : allowed) quoted.push_back("\"" + choice + "\"");
  fail("one of " + join_words(quoted));
}

void JsonReader::expect_object() const {
  if (!json_.is_object()) fail("an object");
}

void JsonReader::expect_array() const {
  if (!json_.is_array()) fail("an array");
}

void JsonReader::expect_only_keys(const std::vector<std::string>& allowed) const {
  expect_object();
  for (const auto& item : json_.items()) {
    bool known = false;
    for (const auto& key : allowed) known = known || key == item.key();
    if (known) continue;
    throw_json_error(source_, path_ + "/" + item.key(),
                     "unknown key '" + item.key() + "' (allowed: " + join_words(allowed) + ")");
  }
}

namespace {

// Tracks where the parser is, as a JSON pointer, so that a value nested too deep can be named.
class NestingGuard {
 public:
  explicit NestingGuard(std::string source) : source_(std::move(source)) {}

  bool on_event(int depth, nlohmann::json::parse_event_t event, const nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    switch (event) {
      case Event::key:
        frames_.back().key = parsed.get<std::string>();
        break;
      case Event::value:
        if (!frames_.empty() && frames_.back().array) ++frames_.back().next_index;
        break;
      case Event::object_start:
      case Event::array_start:
        if (!frames_.empty() && frames_.back().array) ++frames_.back().next_index;
        if (depth > kJsonNestingMax) {
          throw_json_error(source_, pointer(), "expected at most " + std::to_string(kJsonNestingMax) +
                                                   " nested arrays and objects, got deeper nesting");
        }
        frames_.push_back({event == Event::array_start, 0, {}});
        break;
      case Event::object_end:
      case Event::array_end:
        frames_.pop_back();
        break;
    }
    return true;
  }

  // Where the parser stands, as a JSON pointer. A container is counted in its parent array when it starts; a
  // scalar only once read, so naming a scalar the parser failed on (reading_scalar) takes the next index.
  std::string pointer(bool reading_scalar = false) const {
    std::string text;
    for (size_t i = 0; i < frames_.size(); ++i) {
      const Frame& frame = frames_[i];
      const bool innermost = i + 1 == frames_.size();
      const int64_t index = frame.next_index - (reading_scalar && innermost ? 0 : 1);
      text += "/" + (frame.array ? std::to_string(index) : frame.key);
    }
    return text;
  }

 private:
  struct Frame {
    bool array = false;
    int64_t next_index = 0;
    std::string key;
  };
  std::string source_;
  std::vector<Frame> frames_;
};

}  // namespace

nlohmann::json parse_json_text(const std::string& text, const std::string& source) {
  NestingGuard guard(source);
  try {
    return nlohmann::json::parse(text, [&guard](int depth, nlohmann::json::parse_event_t event,
                                                nlohmann::json& parsed) { return guard.on_event(depth, event, parsed); });
  } catch (const nlohmann::json::parse_error& error) {
    throw InputError(source + ": not valid JSON: " + error.what());
  } catch (const nlohmann::json::out_of_range& error) {
    // The parser's one out_of_range (406) is a number beyond double's range, such as 1E691818123.
    throw_json_error(source, guard.pointer(/*reading_scalar=*/true), std::string("expected a number within double's range: ") + error.what());
  }
}

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot be read (missing file or no permission)");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parse_json_text(buffer.str(), path);
}

void throw_json_error(const std::string& source, const std::string& pointer, const std::string& message) {
  throw InputError(source + ": at " + (pointer.empty() ? "/" : pointer) + ": " + message);
}

std::string json_excerpt(const nlohmann::json& value) {
  std::string text = value.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

}  // namespace zero3
