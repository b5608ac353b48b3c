// The opaque device: the simulator's stand-in for a GPU. Its memory is an arena the host may not
// read — Tensor::data() on an opaque tensor is a HostAccessError naming the access and the tensor —
// so bytes reach the host only through the Kernels seam's counted copies, as on a GPU. Its kernels
// are the CPU reference kernels run over the arena, so a run on it is bitwise equal to the same
// run on cpu; what it proves is that no host touch is left on the path it ran.
//
//   Kernels& kernels = opaque_kernels();   // registers the arena on first use
//   Tensor x = Tensor::zeros({4}, DType::f32, Device::opaque);
//   x.data();                               // throws HostAccessError
//   Tensor host = kernels.to_host(x);      // one counted host sync
#pragma once
#include <cstdint>

#include "core/tensor/kernels.h"

namespace zero3 {

// The arena's own bookkeeping: bytes live now and at the peak, and allocations made.
struct OpaqueArenaStats {
  int64_t live_bytes = 0;
  int64_t peak_bytes = 0;
  int64_t allocations = 0;
};

// Registers the arena as the memory of DeviceKind::opaque (idempotent).
void enable_opaque_device();
// The reference kernels on Device::opaque; enables the device. One shared instance: wrap it
// per rank (the simulator's HazardCheckingKernels does) to count each rank's host syncs.
Kernels& opaque_kernels();
OpaqueArenaStats opaque_arena_stats();

// The devices a simulated or in-process run can use: cpu and opaque (cuda needs the cuda backend).
bool is_simulated_device(Device device);
// The kernels a simulated or in-process run computes with on `device`: cpu_kernels() or
// opaque_kernels(); any other device is an InputError.
Kernels& simulated_device_kernels(Device device);

}  // namespace zero3
