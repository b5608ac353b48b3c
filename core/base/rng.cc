// SplitMix64-based counter random numbers.
#include "core/base/rng.h"

#include <cmath>
#include <numbers>

namespace zero3 {

namespace {
uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
}  // namespace

uint64_t mix64(uint64_t seed, uint64_t stream, uint64_t index) {
  return splitmix64(splitmix64(splitmix64(seed) ^ stream) ^ index);
}

double uniform01(uint64_t seed, uint64_t stream, uint64_t index) {
  return static_cast<double>(mix64(seed, stream, index) >> 11) * 0x1.0p-53;
}

double standard_normal(uint64_t seed, uint64_t stream, uint64_t index) {
  // Two independent uniforms from one key: the high and low halves of two mixes.
  const double u1 = 1.0 - uniform01(seed, stream, 2 * index);  // (0, 1], so log is finite
  const double u2 = uniform01(seed, stream, 2 * index + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

uint64_t stream_id(const char* name) {
  uint64_t hash = 0xCBF29CE484222325ull;
  for (const char* c = name; *c; ++c) hash = (hash ^ static_cast<unsigned char>(*c)) * 0x100000001B3ull;
  return hash;
}

}  // namespace zero3
