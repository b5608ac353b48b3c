// FNV-1a hashing of bytes and floats: the "same bits" fingerprint printed by runs and tests.
#pragma once
#include <cstdint>
#include <span>
#include <string>

namespace zero3 {

class Fnv1a {
 public:
  void add_bytes(const void* data, size_t size);
  void add_floats(std::span<const float> values) { add_bytes(values.data(), values.size_bytes()); }
  void add_string(const std::string& text) { add_bytes(text.data(), text.size()); }
  void add_u64(uint64_t value) { add_bytes(&value, sizeof(value)); }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 0xCBF29CE484222325ull;
};

std::string hex64(uint64_t value);  // 16 lowercase hex digits

}  // namespace zero3
