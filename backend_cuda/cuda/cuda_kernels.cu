// CudaKernels' shared parts: construction (cuBLAS bound to the compute stream), operand views,
// scratch, host <-> device copies, and make_cuda_kernels. The kernels are in cuda_kernels_*.cu.
#include <string>

#include "backend_cuda/cuda/cuda_kernels.h"
#include "backend_cuda/cuda/cuda_kernels_internal.h"
#include "core/base/errors.h"

namespace zero3 {

void check_launch(const char* kernel) { check_cuda(cudaGetLastError(), kernel); }

CudaKernels::CudaKernels(CudaContext& context) : context_(context) {
  context_.make_current();
  // Every GEMM runs on the compute stream with the context's workspace (the context binds both
  // too; binding them here keeps the kernels correct whatever else used the handle before).
  // cublasSetStream resets the workspace to cuBLAS's default pool, so the workspace comes after.
  check_cublas(cublasSetStream(context_.cublas(), context_.compute_stream()), "cublasSetStream");
  if (context_.cublas_workspace() != nullptr) {
    check_cublas(cublasSetWorkspace(context_.cublas(), context_.cublas_workspace(),
                                    static_cast<size_t>(context_.cublas_workspace_bytes())),
                 "cublasSetWorkspace");
  }
  // The math mode stays the context's: f32 GEMMs in full f32 (no TF32), as the reference
  // multiplies, and reductions in the f32 accumulator.
}

void CudaKernels::require_resident(const Tensor& tensor) const {
  if (!tensor.defined() || tensor.device() != device()) [[unlikely]] {
    check_failed("tensor.defined() && tensor.device() == device", __FILE__, __LINE__,
                 "kernel operand " + describe(tensor) + " is not on " + device_name(device()));
  }
}

ElementsIn CudaKernels::read(const Tensor& tensor) const {
  require_resident(tensor);
  return ElementsIn{tensor.device_bytes(), tensor.dtype() == DType::bf16};
}

ElementsOut CudaKernels::write(Tensor& tensor) const {
  require_resident(tensor);
  return ElementsOut{tensor.device_bytes(), tensor.dtype() == DType::bf16};
}

Tensor CudaKernels::scratch(int64_t bytes) const {
  // f32 elements only as a unit of size: the memory is at least 16-byte aligned, enough for the
  // doubles and int64s kept in it.
  return Tensor::uninitialized({(bytes + 3) / 4}, DType::f32, device());
}

void CudaKernels::copy_bytes_to_device(const void* host, void* device_bytes, int64_t bytes) {
  check_cuda(cudaMemcpyAsync(device_bytes, host, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, stream()),
             "cudaMemcpyAsync(host to device)");
}

Tensor CudaKernels::upload_bytes(const void* items, int64_t count, int64_t bytes_each) {
  Tensor table = scratch(count * bytes_each);
  // The items are in pageable memory (a std::vector): cudaMemcpyAsync returns once the driver has
  // staged them, so the caller may drop the vector as soon as this returns (CUDA's "API
  // synchronization behavior": pageable host to device is staged before the call returns).
  if (count > 0) copy_bytes_to_device(items, table.device_bytes(), count * bytes_each);
  return table;
}

// A download is the host sync that Kernels::copy_to_host counts: the host waits for everything
// enqueued before it on the compute stream, then for the copy. The engine reads the loss and the
// gradient norm this way without synchronizing the communicator first, and the compute stream
// may be waiting for a collective: the waits are the context's, which run the NCCL watchdog, so a
// hung collective ends in LivenessError (exit 3) rather than a host blocked in the driver.
void CudaKernels::download(const Tensor& device_tensor, Tensor& host) {
  require_resident(device_tensor);
  if (host.bytes() == 0) return;
  // First the work before the copy, watched: a copy into pageable memory (every host tensor zero3
  // makes) returns only once it has completed, so enqueued behind a hung collective it would
  // block inside cudaMemcpyAsync, where no watchdog runs.
  context_.wait_for_compute_stream("download: the work before the copy");
  check_cuda(cudaMemcpyAsync(host.device_bytes(), device_tensor.device_bytes(), static_cast<size_t>(host.bytes()),
                             cudaMemcpyDeviceToHost, stream()),
             "cudaMemcpyAsync(device to host)");
  // Into page-locked memory the copy is still in flight when the call returns.
  context_.wait_for_compute_stream("download: the copy");
}

// An upload stays asynchronous for the host tensors zero3 makes (pageable memory, staged before
// cudaMemcpyAsync returns, so the host tensor may be freed at once). Page-locked memory is copied
// straight from the source while the call has already returned; then the host waits for the copy
// so that freeing the host tensor afterwards stays safe.
void CudaKernels::upload(const Tensor& host, Tensor& device_tensor) {
  require_resident(device_tensor);
  if (host.bytes() == 0) return;
  copy_bytes_to_device(host.device_bytes(), device_tensor.device_bytes(), host.bytes());
  cudaPointerAttributes attributes{};
  check_cuda(cudaPointerGetAttributes(&attributes, host.device_bytes()), "cudaPointerGetAttributes(upload source)");
  if (attributes.type == cudaMemoryTypeHost) {
    // The copy is queued behind whatever the compute stream waits for, collectives included: a
    // watched wait, as for a download.
    context_.wait_for_compute_stream("upload from page-locked memory");
  }
}

std::unique_ptr<Kernels> make_cuda_kernels(CudaContext& context) { return std::make_unique<CudaKernels>(context); }

}  // namespace zero3
