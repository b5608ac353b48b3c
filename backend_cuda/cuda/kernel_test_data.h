// Test inputs shared by the CUDA kernels' host test and GPU test: deterministic values from
// (seed, stream, index), with the edge values (zeros, NaN, infinities, huge, tiny) first on request.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/base/rng.h"
#include "core/tensor/tensor.h"

namespace zero3 {

inline Tensor seeded_test_tensor(uint64_t seed, const Shape& shape, DType dtype, uint64_t stream, float spread,
                                 bool edges) {
  const std::vector<float> edge_values = {0.0f, -0.0f, NAN, INFINITY, -INFINITY, 3e38f, -3e38f, 1e-40f, 20.0f, -20.0f};
  std::vector<float> values(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = edges && i < edge_values.size()
                    ? edge_values[i]
                    : spread * static_cast<float>(2.0 * uniform01(seed, stream, i) - 1.0);
  }
  return Tensor::from_values(shape, values, dtype);
}

}  // namespace zero3
