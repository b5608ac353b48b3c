// The Kernels seam (core/tensor/kernels.h) on one GPU. Every kernel is enqueued on the context's
// compute stream and returns without waiting; only copy_to_host waits (the counted host sync).
// They compute what the CPU reference kernels compute, in the same order of float and double
// operations per element and per row (cuda_element_functions.h holds that math, shared with a
// CPU-only test), with GEMM through cuBLAS (f32 compute, no TF32) and every sum deterministic:
// fixed reduction trees and no float atomics, so the same input gives the same bits every run.
//
// Operands are f32 or bf16 in any mix the reference accepts; bf16 outputs round once, to nearest
// even. Call the kernels from a host thread whose current device is the context's
// (CudaContext::make_current), with cuda memory registered for tensors (cuda_memory.h).
//
//   CudaContext context(0);
//   register_cuda_memory();
//   std::unique_ptr<Kernels> kernels = make_cuda_kernels(context);
//   Tensor x = kernels->copy_to_device(Tensor::from_values({2, 3}, {1, 2, 3, 4, 5, 6}));
//   Tensor y = device_uninitialized(*kernels, {2, 3}, DType::bf16);
//   kernels->unary(UnaryOp::gelu, x, y);            // enqueued on context.compute_stream()
//   Tensor host = kernels->to_host(y);              // waits for the stream: one host sync
#pragma once
#include <memory>

#include "backend_cuda/cuda/cuda_context.h"
#include "backend_cuda/cuda/gemm_shape.h"
#include "core/tensor/kernels.h"

namespace zero3 {

// Kernels on context.device(). Binds context.cublas() to the compute stream and the context's
// workspace; the context must outlive the kernels.
std::unique_ptr<Kernels> make_cuda_kernels(CudaContext& context);

// Offers every matmul call of `cuda_kernels` (made by make_cuda_kernels) to `log`, which keeps the
// calls made while it records; null detaches. The log must outlive the kernels or be detached.
void attach_gemm_shape_log(Kernels& cuda_kernels, GemmShapeLog* log);

}  // namespace zero3
