// A list of GEMMs timed alone on one GPU: the ceiling that `zero3 bench step --backend cuda` holds a
// training step's throughput against (gemm_shape.h holds the list, tools/bench/cuda_step_bench.h uses it).
//
//   double seconds = time_gemms_seconds(context, kernels, log.shapes(), 5);  // one pass, the fastest of 5
#pragma once
#include <vector>

#include "backend_cuda/cuda/cuda_context.h"
#include "backend_cuda/cuda/gemm_shape.h"
#include "core/tensor/kernels.h"

namespace zero3 {

// Seconds of one pass over `gemms`, in order, through kernels.matmul: the cuBLAS calls (and any
// widening copies) a training step makes, on fresh device tensors of the same shapes and dtypes,
// filled with seeded values in [-1, 1). One tensor set per distinct shape, reused by the calls of
// that shape (a transformer's layers repeat their shapes), so the device memory needed is one
// layer's operands, not a whole step's. One untimed pass first (cuBLAS's heuristics, the pool's
// first allocations), then `repetitions` passes, each between two CUDA events on the compute
// stream with no host wait among them; the fastest pass counts.
// The host waits once, blocking, at the end: call it with no collective pending that the compute
// stream waits for (after the communicator's synchronize()), as nothing here watches one.
double time_gemms_seconds(CudaContext& context, Kernels& kernels, const std::vector<GemmShape>& gemms,
                          int repetitions);

}  // namespace zero3
