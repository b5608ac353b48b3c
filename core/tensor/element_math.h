// Element functions of the reference kernels that libm would otherwise compute one call at a
// time: tanh (for the tanh GELU) and the GELU forward and derivative built on it. Branch-free
// float arithmetic only (no libm, no lookup tables), so a loop over them vectorises, and every
// operation is an IEEE one with contraction off (the kernels' build flags): the same input gives
// the same bits on every thread count, vector width and machine. The CUDA kernels call these same
// functions (backend_cuda/cuda/cuda_element_functions.h): under nvcc they are __host__ __device__ (a
// macro, no CUDA header; std::bit_cast runs on the device with --expt-relaxed-constexpr), so
// built with contraction off there too (--fmad=false) a GPU computes the reference's bits.
//
// Accuracy (element_math_test.cc sweeps it): tanh within 4 ulp of libm's; GELU and its
// derivative within 1e-6 of the double-precision formula, relative to the size of the formula's
// terms (for very negative x, 1 + tanh cancels in float whichever tanh computes it).
#pragma once
#include <bit>
#include <cstdint>

#ifdef __CUDACC__
#define ZERO3_ELEMENT_MATH_FUNCTION __host__ __device__ inline
#else
#define ZERO3_ELEMENT_MATH_FUNCTION inline
#endif

namespace zero3::element_math {

// e^y for y in [0, 20] (what tanh needs): y = n ln2 + r with |r| <= ln2 / 2, e^r by its Taylor
// series to r^7 (remainder below 0.1 ulp), 2^n put straight into the exponent bits.
ZERO3_ELEMENT_MATH_FUNCTION float exp_0_to_20(float y) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2High = 0.693145751953125f;  // ln 2 split so n * kLn2High is exact for n < 2^8
  constexpr float kLn2Low = 1.42860682030941723e-6f;
  constexpr float kRoundingShift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (y * kLog2e + kRoundingShift) - kRoundingShift;
  const float r = (y - n * kLn2High) - n * kLn2Low;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t exponent_bits = (static_cast<int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(exponent_bits);
}

// tanh: its odd Taylor series to x^15 below |x| = 0.55 (remainder below 0.5 ulp there), and
// 1 - 2 / (e^{2|x|} + 1) above, with the sign put back. |x| >= 10 gives +-1 exactly, as libm
// does in float (from 9.01 on). NaN propagates through both branches.
ZERO3_ELEMENT_MATH_FUNCTION float tanh(float x) {
  // Selections are written as bit masks, not ?:, so the loop stays one straight line of vector
  // instructions (GCC leaves ?: between floats as a branch here).
  const auto bits = std::bit_cast<uint32_t>(x);
  const uint32_t sign = bits & 0x80000000u;
  const uint32_t magnitude_bits = bits & 0x7fffffffu;
  const float magnitude = std::bit_cast<float>(magnitude_bits);
  // min(|x|, 10) on the bits (non-negative floats order as their bits do; NaN's bits exceed 10's,
  // so NaN gives 10 and is restored below): a float ?: here becomes a branch.
  constexpr uint32_t kTenBits = 0x41200000u;
  const float clamped = std::bit_cast<float>(magnitude_bits < kTenBits ? magnitude_bits : kTenBits);
  const float large = 1.0f - 2.0f / (exp_0_to_20(2.0f * clamped) + 1.0f);
  const float x2 = x * x;
  float p = -929569.0f / 638512875.0f;
  p = p * x2 + 21844.0f / 6081075.0f;
  p = p * x2 + -1382.0f / 155925.0f;
  p = p * x2 + 62.0f / 2835.0f;
  p = p * x2 + -17.0f / 315.0f;
  p = p * x2 + 2.0f / 15.0f;
  p = p * x2 + -1.0f / 3.0f;
  const float small = x + x * x2 * p;
  // All ones where |x| < 0.55 or x is NaN (then `small` is NaN too): take the series there.
  const uint32_t use_small = 0u - static_cast<uint32_t>(!(magnitude >= 0.55f));
  const uint32_t large_bits = std::bit_cast<uint32_t>(large) | sign;
  return std::bit_cast<float>((std::bit_cast<uint32_t>(small) & use_small) | (large_bits & ~use_small));
}

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

// GELU's tanh approximation (PyTorch's approximate="tanh"): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
ZERO3_ELEMENT_MATH_FUNCTION float gelu(float x) {
  const float inner = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
  return 0.5f * x * (1.0f + tanh(inner));
}

ZERO3_ELEMENT_MATH_FUNCTION float gelu_derivative(float x) {
  const float inner = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
  const float t = tanh(inner);
  const float d_inner = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * d_inner;
}

}  // namespace zero3::element_math
