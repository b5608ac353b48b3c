// Element types and their storage: f32 is 4 bytes, bf16 2 bytes holding real bf16 bits (the top
// half of the f32 pattern, rounded to nearest even), as cuBLAS and NCCL's ncclBfloat16 expect.
#pragma once
#include <cstdint>
#include <string>

namespace zero3 {

enum class DType : uint8_t { f32, bf16 };

int64_t dtype_bytes(DType dtype);
const char* dtype_name(DType dtype);
// Parses "f32" or "bf16"; returns false for anything else.
bool parse_dtype(const std::string& text, DType* out);

// Round-to-nearest-even to the bf16 grid (8 exponent bits, 7 mantissa bits); NaN stays NaN.
// Equals CUDA's __float2bfloat16_rn on every non-NaN float.
float round_to_bf16(float value);
// The bf16 bits of round_to_bf16(value) (a NaN stays a quiet NaN), and back; widening is exact.
uint16_t bf16_bits(float value);
float bf16_value(uint16_t bits);

}  // namespace zero3
