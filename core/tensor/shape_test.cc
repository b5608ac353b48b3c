// Broadcasting follows PyTorch, including the size-1-against-size-0 case behind the broadcast trap.
#include "core/tensor/shape.h"

#include <gtest/gtest.h>

#include "core/base/errors.h"

namespace zero3 {
namespace {

TEST(Shape, BroadcastAlignsFromTheRight) {
  EXPECT_EQ(broadcast_shapes({4, 1, 3}, {5, 1}), (Shape{4, 5, 3}));
  EXPECT_EQ(broadcast_shapes({}, {2, 3}), (Shape{2, 3}));
}

TEST(Shape, SizeOneAgainstSizeZeroBroadcastsToZero) {
  EXPECT_EQ(broadcast_shapes({8, 1}, {0}), (Shape{8, 0}));
}

TEST(Shape, IncompatibleDimsRaiseNamingBothShapes) {
  try {
    broadcast_shapes({2, 3}, {4});
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& error) {
    EXPECT_NE(std::string(error.what()).find("[2,3]"), std::string::npos);
    EXPECT_NE(std::string(error.what()).find("[4]"), std::string::npos);
  }
}

TEST(Shape, NumelOfZeroSizedShapeIsZero) {
  EXPECT_EQ(shape_numel({8, 0}), 0);
  EXPECT_EQ(shape_numel({}), 1);
}

}  // namespace
}  // namespace zero3
