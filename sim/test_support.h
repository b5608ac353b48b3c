// Shared by the simulator's tests: verifiable data (small integers generated from (seed, rank,
// index), so expected results are computed independently and sums are exact) and call sites.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/sharding/communicator.h"
#include "core/base/rng.h"
#include "core/tensor/tensor.h"

namespace zero3 {

// An integer in [-8, 8] as a float.
inline float test_value(uint64_t seed, int rank, int64_t index) {
  const uint64_t bits = mix64(seed, static_cast<uint64_t>(rank), static_cast<uint64_t>(index));
  return static_cast<float>(static_cast<int64_t>(bits % 17) - 8);
}

// Elements test_value(seed, rank, 0 .. numel - 1).
inline Tensor test_tensor(uint64_t seed, int rank, int64_t numel, DType dtype = DType::f32) {
  std::vector<float> values(static_cast<size_t>(numel));
  for (int64_t i = 0; i < numel; ++i) values[static_cast<size_t>(i)] = test_value(seed, rank, i);
  return Tensor::from_values({numel}, values, dtype);
}

inline CallSite call_site(std::string module, int64_t step = -1, std::string phase = "",
                          std::vector<std::string> params = {}) {
  return CallSite{.module = std::move(module), .params = std::move(params), .step = step, .phase = std::move(phase)};
}

}  // namespace zero3
