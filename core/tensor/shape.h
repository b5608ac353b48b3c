// Shapes: int64 dims, any of which may be 0, and PyTorch's broadcasting rules.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace zero3 {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& shape);
std::string shape_str(const Shape& shape);  // "[2,0,3]"; "[]" for a scalar

// PyTorch broadcasting: align from the right; each pair of dims must be equal or one of them 1.
// A 1 against a 0 gives 0, which is exactly how the broadcast trap hides a [0] placeholder.
// Throws ShapeError naming both shapes when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b);

// Row-major strides in elements for a contiguous tensor of this shape.
std::vector<int64_t> contiguous_strides(const Shape& shape);

}  // namespace zero3
