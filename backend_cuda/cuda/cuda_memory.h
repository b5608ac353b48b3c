// The memory of cuda tensors: CUDA's own stream-ordered pool on each device, allocating and freeing
// on that device's compute stream, so that the steady state of training makes no cudaMalloc or
// cudaFree at all; and the pool's own figures, which the train report prints beside the Allocator
// seam's counted bytes. No CUDA type appears here, so any file may include it.
//
//   CudaContext context(0);          // the compute stream that orders cuda:0's allocations
//   register_cuda_memory();
//   Tensor x = Tensor::zeros({1024}, DType::f32, context.device());   // from the pool, zeroed on the stream
//   CudaPoolStats stats = cuda_pool_stats(0);                          // reserved >= used
#pragma once
#include <cstdint>

namespace zero3 {

// Registers this process's one DeviceMemory for DeviceKind::cuda (device.h). Calling it again
// registers the same instance. Tensors on cuda:N need the CudaContext of N to exist
// (cuda_context_of), both when they are made and when they are freed.
void register_cuda_memory();

// The stream-ordered pool of one device, as CUDA counts it.
struct CudaPoolStats {
  int64_t reserved_bytes = 0;       // held by the pool now: in use, or freed and kept for reuse
  int64_t used_bytes = 0;           // handed out now (including to any other user of the device's default pool)
  int64_t peak_reserved_bytes = 0;  // the most the pool has held since the process started
};
// BackendError when CUDA cannot answer for cuda:`device_index`.
CudaPoolStats cuda_pool_stats(int device_index);

}  // namespace zero3
