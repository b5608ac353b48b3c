// One rank's GPU: the device, its compute and comm streams, the cuBLAS handle and workspace.
// Kernels (cuda_kernels.h) enqueue on compute_stream(); NcclCommunicator enqueues on
// comm_stream(). The two streams meet only through events, in the places nccl_communicator.cc
// names (a collective waits for the compute issued before it; Work::wait() makes later compute
// wait for the collective), so no host sync sits on the hot path. Where the host must wait for the
// compute stream (a download), it waits in wait_for_compute_stream, which runs the communicator's
// watchdog while it polls: the compute stream may be waiting for a collective that never ends.
//
// Nothing here runs at static initialisation: a context exists only once `zero3 train --backend
// cuda` (or a GPU test) has found a device, so test discovery on a machine without one never
// touches the driver.
//
//   CudaContext context(0);           // cuda:0, streams and cuBLAS created, device made current
//   auto kernels = make_cuda_kernels(context);
//   Tensor x = Tensor::zeros({4}, DType::bf16, context.device());
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "core/tensor/device.h"

namespace zero3 {

// Throw BackendError (exit 4) naming the call and CUDA's / cuBLAS's own words for the failure.
void check_cuda(cudaError_t status, const char* call);
// True for cudaErrorNotReady, the "not yet" of an event or stream query, which it also clears from
// the runtime's last-error slot (as PyTorch does after its queries): else the next kernel launch
// check would report it as its own.
bool cuda_not_ready(cudaError_t status);
// For a cudaEventQuery / cudaStreamQuery answer: true for done, false for not yet, BackendError
// for anything else. `describe_call` names the call and runs only on a failure: queries are polled.
template <typename DescribeCall>
bool cuda_query_done(cudaError_t status, DescribeCall describe_call) {
  if (status == cudaSuccess) return true;
  if (cuda_not_ready(status)) return false;
  check_cuda(status, std::string(describe_call()).c_str());
  return true;
}
void check_cublas(cublasStatus_t status, const char* call);

class CudaContext {
 public:
  explicit CudaContext(int device_index);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  int device_index() const { return device_index_; }
  Device device() const { return Device{DeviceKind::cuda, device_index_}; }
  cudaStream_t compute_stream() const { return compute_stream_; }
  cudaStream_t comm_stream() const { return comm_stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  void* cublas_workspace() const { return cublas_workspace_; }
  int64_t cublas_workspace_bytes() const { return cublas_workspace_bytes_; }
  // cudaSetDevice for the calling host thread (one host thread per GPU in the single-process mode).
  void make_current() const;
  // e.g. "NVIDIA H200 (sm_90, 139.8 GiB)".
  std::string description() const;

  // The host waits for everything enqueued on the compute stream so far, polling an event and
  // running the host-wait watchdog between polls; whatever the watchdog throws ends the wait,
  // whether or not the stream ever finishes. `why` names the wait in a CUDA error
  // ("download", ...). The one place the host waits for the compute stream on the hot path.
  void wait_for_compute_stream(const char* why);
  // A check run between the polls of wait_for_compute_stream, given the wait's `why`: the
  // NcclCommunicator on this GPU registers its liveness check, which throws LivenessError on a
  // hung or failed collective. Registered under an owner (the communicator) until the owner
  // removes it; in production there is one, and where a test makes a second communicator on the
  // context, each runs, in registration order.
  using HostWaitWatchdog = std::function<void(const char* why)>;
  void add_host_wait_watchdog(const void* owner, HostWaitWatchdog watchdog);
  void remove_host_wait_watchdog(const void* owner);

 private:
  int device_index_;
  cudaStream_t compute_stream_ = nullptr;
  cudaStream_t comm_stream_ = nullptr;
  cudaEvent_t host_wait_event_ = nullptr;  // recorded on the compute stream by each host wait
  struct OwnedWatchdog {
    const void* owner;
    HostWaitWatchdog watchdog;
  };
  std::mutex watchdogs_mutex_;  // guards watchdogs_, copied by each wait and run unlocked
  std::vector<OwnedWatchdog> watchdogs_;
  cublasHandle_t cublas_ = nullptr;
  void* cublas_workspace_ = nullptr;
  int64_t cublas_workspace_bytes_ = 0;
};

// The context that owns cuda:`device_index` in this process, for code that has only a Device
// (the DeviceMemory of cuda tensors frees on that device's compute stream). Registered by the
// CudaContext constructor, removed by its destructor; BackendError when none is registered.
CudaContext& cuda_context_of(int device_index);

}  // namespace zero3
