// Element type names, sizes and bf16 rounding.
#include "core/tensor/dtype.h"

#include <bit>
#include <cmath>

namespace zero3 {

int64_t dtype_bytes(DType dtype) { return dtype == DType::bf16 ? 2 : 4; }

const char* dtype_name(DType dtype) { return dtype == DType::bf16 ? "bf16" : "f32"; }

bool parse_dtype(const std::string& text, DType* out) {
  if (text == "f32") { *out = DType::f32; return true; }
  if (text == "bf16") { *out = DType::bf16; return true; }
  return false;
}

float round_to_bf16(float value) {
  if (std::isnan(value)) return value;
  uint32_t bits = std::bit_cast<uint32_t>(value);
  // Add half an ulp of the bf16 grid, plus one when the kept lowest bit is odd (ties to even).
  uint32_t rounding_bias = 0x7FFFu + ((bits >> 16) & 1u);
  bits = (bits + rounding_bias) & 0xFFFF0000u;
  return std::bit_cast<float>(bits);
}

uint16_t bf16_bits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(round_to_bf16(value));
  // Truncating a NaN could leave only payload bits below the cut: keep it quiet.
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  return static_cast<uint16_t>(bits >> 16);
}

float bf16_value(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

}  // namespace zero3
