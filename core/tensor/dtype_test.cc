// bf16 rounding: round to nearest with ties to even, exact values unchanged, NaN kept, overflow to
// infinity; and the dtype names and sizes.
#include "core/tensor/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace zero3 {
namespace {

constexpr float kUlpAtOne = 1.0f / 128.0f;  // bf16 keeps 7 mantissa bits

TEST(Dtype, ValuesOnTheBf16GridAreUnchanged) {
  for (float value : {0.0f, 1.0f, -2.5f, 3.0f, 0.15625f, 1024.0f, 1.0f + kUlpAtOne, -1.0f / 64.0f}) {
    EXPECT_EQ(round_to_bf16(value), value) << value;
  }
  EXPECT_TRUE(std::signbit(round_to_bf16(-0.0f)));
}

TEST(Dtype, HalfwayValuesRoundToTheEvenMantissa) {
  // 1 + ulp/2: neighbours 1 (even mantissa) and 1 + ulp (odd): goes down to 1.
  EXPECT_EQ(round_to_bf16(1.0f + kUlpAtOne / 2), 1.0f);
  // 1 + 3 ulp/2: neighbours 1 + ulp (odd) and 1 + 2 ulp (even): goes up.
  EXPECT_EQ(round_to_bf16(1.0f + 3 * kUlpAtOne / 2), 1.0f + 2 * kUlpAtOne);
  EXPECT_EQ(round_to_bf16(-(1.0f + kUlpAtOne / 2)), -1.0f);
}

TEST(Dtype, ValuesOffHalfwayRoundToTheNearest) {
  EXPECT_EQ(round_to_bf16(1.0f + kUlpAtOne / 2 + 1.0f / 1048576.0f), 1.0f + kUlpAtOne);
  EXPECT_EQ(round_to_bf16(1.0f + kUlpAtOne / 2 - 1.0f / 1048576.0f), 1.0f);
  EXPECT_EQ(round_to_bf16(3.14159265f), 3.140625f);
}

TEST(Dtype, NanStaysNanAndInfinityStaysInfinity) {
  EXPECT_TRUE(std::isnan(round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(round_to_bf16(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_EQ(round_to_bf16(-std::numeric_limits<float>::infinity()), -std::numeric_limits<float>::infinity());
}

TEST(Dtype, TheLargestFloatOverflowsToInfinity) {
  // FLT_MAX is above the largest bf16 (0x7F7F0000) by more than half a bf16 ulp.
  EXPECT_EQ(round_to_bf16(std::numeric_limits<float>::max()), std::numeric_limits<float>::infinity());
}

TEST(Dtype, NamesAndSizesRoundTrip) {
  EXPECT_EQ(dtype_bytes(DType::f32), 4);
  EXPECT_EQ(dtype_bytes(DType::bf16), 2);
  DType parsed = DType::f32;
  EXPECT_TRUE(parse_dtype("bf16", &parsed));
  EXPECT_EQ(parsed, DType::bf16);
  EXPECT_TRUE(parse_dtype(dtype_name(DType::f32), &parsed));
  EXPECT_EQ(parsed, DType::f32);
  EXPECT_FALSE(parse_dtype("fp16", &parsed));
}

}  // namespace
}  // namespace zero3
