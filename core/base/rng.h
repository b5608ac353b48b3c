// Counter-based random numbers: every value is a pure function of (seed, stream, index), so data
// and initialisation are reproducible from the seed alone, in any order, on any rank.
#pragma once
#include <cstdint>

namespace zero3 {

// SplitMix64 finaliser over a combined key: a well-mixed 64-bit value.
uint64_t mix64(uint64_t seed, uint64_t stream, uint64_t index);
// Uniform in [0, 1).
double uniform01(uint64_t seed, uint64_t stream, uint64_t index);
// Standard normal (Box-Muller over two uniform draws of the same key).
double standard_normal(uint64_t seed, uint64_t stream, uint64_t index);
// A 64-bit stream id derived from a name, stable across builds (FNV-1a).
uint64_t stream_id(const char* name);

// A sequential generator over one (seed, stream) pair.
class CounterRng {
 public:
  CounterRng(uint64_t seed, uint64_t stream) : seed_(seed), stream_(stream) {}
  uint64_t next_u64() { return mix64(seed_, stream_, counter_++); }
  double next_uniform() { return uniform01(seed_, stream_, counter_++); }
  // Uniform integer in [0, bound); bound > 0.
  uint64_t next_below(uint64_t bound) { return next_u64() % bound; }

 private:
  uint64_t seed_;
  uint64_t stream_;
  uint64_t counter_ = 0;
};

}  // namespace zero3
