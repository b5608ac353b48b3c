// The batched GEMM kernel, the one kernel that calls BLAS (cblas_sgemm).
#include <cblas.h>

#include <climits>
#include <string>

#include "core/tensor/cpu_kernels_internal.h"
#include "core/base/errors.h"
#include "core/tensor/kernel_preconditions.h"

namespace zero3 {
namespace {

blasint blas_dim(int64_t value) {
  ZERO3_CHECK(value >= 0 && value <= INT_MAX,
              "GEMM dimension " + std::to_string(value) + " exceeds the BLAS int range");
  return static_cast<blasint>(value);
}

}  // namespace

void CpuKernels::matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& out, int64_t batch,
                        int64_t m, int64_t n, int64_t k, bool b_shared, float beta) {
  check_matmul_sizes(a, b, out, batch, m, n, k, b_shared);
  if (out.numel() == 0) return;
  FloatsOut po = write(out);
  if (k == 0) {
    // An empty inner dim contributes nothing; BLAS rejects lda = 0, so scale here instead.
    for (int64_t i = 0; i < out.numel(); ++i) po[i] = beta == 0.0f ? 0.0f : beta * po[i];
    return;
  }
  const FloatsIn pa_all = read(a), pb_all = read(b);
  const blasint lda = blas_dim(trans_a ? m : k), ldb = blas_dim(trans_b ? k : n);
  for (int64_t i = 0; i < batch; ++i) {
    const float* pa = pa_all.get() + i * m * k;
    const float* pb = pb_all.get() + (b_shared ? 0 : i * k * n);
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                blas_dim(m), blas_dim(n), blas_dim(k), 1.0f, pa, lda, pb, ldb, beta, po.get() + i * m * n, blas_dim(n));
  }
}

}  // namespace zero3
