// The batched GEMM through cuBLAS: row-major operands by the operand swap (C^T = B^T A^T), a shared
// b by batch stride 0, f32 compute, and the dtype mixes cuBLAS has no kernel for made into ones it has;
// each call offered to the GEMM shape log a benchmark may attach (gemm_shape.h).
#include <climits>
#include <string>

#include "backend_cuda/cuda/cuda_kernels.h"
#include "backend_cuda/cuda/cuda_kernels_internal.h"
#include "core/base/errors.h"
#include "core/tensor/kernel_preconditions.h"

namespace zero3 {
namespace {

// out = beta * out when the inner dim is empty (cuBLAS rejects lda = k = 0 for an untransposed a).
__global__ void empty_inner_product_kernel(ElementsOut out, float beta, int64_t count) {
  for (int64_t i = first_index(); i < count; i += index_stride()) {
    out.store(i, cuda_math::empty_inner_product(out[i], beta));
  }
}

int gemm_dim(int64_t value, const char* name) {
  if (value > INT_MAX) {
    throw BackendError(std::string("cuBLAS GEMM dimension ") + name + " = " + std::to_string(value) +
                       " exceeds its int range (at most " + std::to_string(INT_MAX) + ")");
  }
  return static_cast<int>(value);
}

cudaDataType cuda_type(DType dtype) { return dtype == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F; }

// The dimensions cuBLAS is given (after any widening: the dtypes travel beside them).
struct GemmDimensions {
  int64_t batch = 0, m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false, b_shared = false;
};

// Row-major out[m, n] = a[m, k] b[k, n] is column-major out^T[n, m] = b^T[n, k] a^T[k, m]: cuBLAS gets
// b first and a second, each transposed when the caller asked, with the reference's leading dims.
// Batches beyond cuBLAS's int count run in chunks.
void strided_batched_gemm(cublasHandle_t handle, const void* a, const void* b, DType input, void* out, DType output,
                          const GemmDimensions& shape, float beta) {
  const int m = gemm_dim(shape.m, "m"), n = gemm_dim(shape.n, "n"), k = gemm_dim(shape.k, "k");
  const int lda = shape.trans_a ? m : k, ldb = shape.trans_b ? k : n;
  const long long stride_a = shape.m * shape.k, stride_b = shape.b_shared ? 0 : shape.k * shape.n;
  const long long stride_out = shape.m * shape.n;
  const int64_t input_bytes = dtype_bytes(input), output_bytes = dtype_bytes(output);
  const float alpha = 1.0f;
  for (int64_t first = 0; first < shape.batch; first += INT_MAX) {
    const int count = static_cast<int>(std::min<int64_t>(INT_MAX, shape.batch - first));
    const char* a_first = static_cast<const char*>(a) + first * stride_a * input_bytes;
    const char* b_first = static_cast<const char*>(b) + first * stride_b * input_bytes;
    char* out_first = static_cast<char*>(out) + first * stride_out * output_bytes;
    check_cublas(cublasGemmStridedBatchedEx(handle, shape.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                            shape.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b_first,
                                            cuda_type(input), ldb, stride_b, a_first, cuda_type(input), lda, stride_a,
                                            &beta, out_first, cuda_type(output), n, stride_out, count,
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmStridedBatchedEx");
  }
}

}  // namespace

// cuBLAS multiplies two operands of one dtype into f32, or two bf16 into bf16. The other mixes
// are computed as the reference computes them: a bf16 operand beside an f32 one is widened to f32
// (exactly) into scratch, and an f32 GEMM into a bf16 out runs into f32 scratch (holding out's
// values when beta reads them) that is then rounded into out once.
void CudaKernels::matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& out, int64_t batch,
                         int64_t m, int64_t n, int64_t k, bool b_shared, float beta) {
  check_matmul_sizes(a, b, out, batch, m, n, k, b_shared);
  require_resident(a);
  require_resident(b);
  if (gemm_shape_log_) {
    gemm_shape_log_->record({.batch = batch, .m = m, .n = n, .k = k, .trans_a = trans_a, .trans_b = trans_b,
                             .b_shared = b_shared, .a_dtype = a.dtype(), .b_dtype = b.dtype(),
                             .out_dtype = out.dtype(), .accumulates = beta != 0.0f});
  }
  const ElementsOut po = write(out);
  if (out.numel() == 0) return;
  if (k == 0) {
    empty_inner_product_kernel<<<blocks_for(out.numel()), kThreads, 0, stream()>>>(po, beta, out.numel());
    check_launch("empty_inner_product_kernel");
    return;
  }
  Tensor a_widened, b_widened;
  if (a.dtype() != b.dtype()) {
    const Tensor& narrow = a.dtype() == DType::bf16 ? a : b;
    Tensor& widened = a.dtype() == DType::bf16 ? a_widened : b_widened;
    widened = Tensor::uninitialized(narrow.shape(), DType::f32, device());
    copy(narrow, widened);
  }
  const Tensor& a_used = a_widened.defined() ? a_widened : a;
  const Tensor& b_used = b_widened.defined() ? b_widened : b;
  const DType input = a_used.dtype();
  Tensor out_f32;
  if (input == DType::f32 && out.dtype() == DType::bf16) {
    out_f32 = Tensor::uninitialized(out.shape(), DType::f32, device());
    if (beta != 0.0f) copy(out, out_f32);
  }
  Tensor& out_used = out_f32.defined() ? out_f32 : out;
  const GemmDimensions shape{.batch = batch, .m = m, .n = n, .k = k, .trans_a = trans_a, .trans_b = trans_b,
                             .b_shared = b_shared};
  strided_batched_gemm(context_.cublas(), a_used.device_bytes(), b_used.device_bytes(), input,
                       out_used.device_bytes(), out_used.dtype(), shape, beta);
  if (out_f32.defined()) copy(out_f32, out);
}

void attach_gemm_shape_log(Kernels& cuda_kernels, GemmShapeLog* log) {
  auto* kernels = dynamic_cast<CudaKernels*>(&cuda_kernels);
  ZERO3_CHECK(kernels != nullptr, std::string("a GEMM shape log attaches to CUDA kernels, not to ") +
                                      cuda_kernels.name() + "'s");
  kernels->attach_gemm_shape_log(log);
}

}  // namespace zero3
