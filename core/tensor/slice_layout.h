// A slice along one dim as three counts: `outer` rows of `dim_full` (the full tensor) or
// `dim_part` (the slice) items of `inner` elements each. The CPU kernels copy it as segments, the
// CUDA kernels (backend_cuda/cuda/cuda_kernels_indexing.cu) element by element from the same layout.
#pragma once
#include <cstdint>
#include <string>

#include "core/base/errors.h"
#include "core/tensor/shape.h"

namespace zero3 {

struct SliceLayout {
  int64_t outer = 1, dim_full = 0, dim_part = 0, inner = 1;
};

// Checks that `part` is `full` cut to a window of dim `dim` starting at `start`.
inline SliceLayout slice_layout(const Shape& full, const Shape& part, int64_t dim, int64_t start) {
  ZERO3_CHECK(dim >= 0 && dim < static_cast<int64_t>(full.size()) && full.size() == part.size(),
              "slice dim " + std::to_string(dim) + " of " + shape_str(full) + " / " + shape_str(part));
  SliceLayout layout;
  layout.dim_full = full[static_cast<size_t>(dim)];
  layout.dim_part = part[static_cast<size_t>(dim)];
  ZERO3_CHECK(start >= 0 && start + layout.dim_part <= layout.dim_full, "slice start " + std::to_string(start));
  for (int64_t d = 0; d < dim; ++d) layout.outer *= full[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(dim) + 1; d < full.size(); ++d) layout.inner *= full[d];
  return layout;
}

}  // namespace zero3
