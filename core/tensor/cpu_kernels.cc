// The CPU reference kernels: plain loops in float (double where a sum must not drift), GEMM
// through cblas, zero-sized dims accepted, results rounded to bf16 when the output is bf16. Here:
// the shared helpers and the one instance; the kernels themselves are in cpu_kernels_*.cc by topic.
#include <string>

#include "core/tensor/cpu_kernels_internal.h"
#include "core/base/errors.h"
#include "core/tensor/kernels.h"

namespace zero3 {

void round_if_bf16(Tensor& tensor) {
  if (tensor.dtype() != DType::bf16) return;
  for (float& value : tensor.values()) value = round_to_bf16(value);
}

int64_t checked_row(float value, int64_t rows) {
  const auto row = static_cast<int64_t>(value);
  ZERO3_CHECK(static_cast<float>(row) == value && row >= 0 && row < rows,
              "row index " + std::to_string(value) + " outside [0, " + std::to_string(rows) + ")");
  return row;
}

Kernels& cpu_kernels() {
  static CpuKernels kernels;
  return kernels;
}

}  // namespace zero3
