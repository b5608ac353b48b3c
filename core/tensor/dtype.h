// Element types. CPU tensors keep every element in a float; a bf16 tensor holds values already
// rounded to bf16, so CPU bf16 compute is exact emulation while bytes are counted at 2 per element.
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
float round_to_bf16(float value);

}  // namespace zero3
