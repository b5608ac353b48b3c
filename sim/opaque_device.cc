// The opaque device's arena and kernels (opaque_device.h).
#include "sim/opaque_device.h"

#include <algorithm>
#include <memory>
#include <string>

#include "core/base/errors.h"

namespace zero3 {
namespace {

// Host memory by construction (the simulator runs in one process), device memory by contract:
// only kernels and the simulated communicator, which run "on the device", address it.
class OpaqueArena final : public DeviceMemory {
 public:
  void* allocate(Device device, int64_t bytes) override { return account(device, bytes, true); }
  void* allocate_uninitialized(Device device, int64_t bytes) override { return account(device, bytes, false); }

  void free(Device, void* bytes, int64_t size) override {
    if (bytes == nullptr) return;
    free_host_bytes(bytes, size);
    stats_.live_bytes -= size;
  }

  const OpaqueArenaStats& stats() const { return stats_; }

 private:
  void* account(Device device, int64_t bytes, bool zeroed) {
    ZERO3_CHECK(device.kind == DeviceKind::opaque, "opaque arena asked for " + device_name(device));
    void* memory = zeroed ? allocate_zeroed_host_bytes(bytes, device) : allocate_uninitialized_host_bytes(bytes, device);
    if (memory == nullptr) return nullptr;
    stats_.live_bytes += bytes;
    stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.live_bytes);
    ++stats_.allocations;
    return memory;
  }

  OpaqueArenaStats stats_;
};

OpaqueArena& arena() {
  // Never destroyed: tensors in static storage may outlive any other order of destruction.
  static OpaqueArena* instance = new OpaqueArena();
  return *instance;
}

}  // namespace

void enable_opaque_device() { register_device_memory(DeviceKind::opaque, &arena()); }

Kernels& opaque_kernels() {
  static Kernels* kernels = [] {
    enable_opaque_device();
    return make_reference_kernels(Device::opaque, "opaque").release();
  }();
  return *kernels;
}

OpaqueArenaStats opaque_arena_stats() { return arena().stats(); }

bool is_simulated_device(Device device) { return device == Device::cpu || device == Device::opaque; }

Kernels& simulated_device_kernels(Device device) {
  if (device == Device::cpu) return cpu_kernels();
  if (device == Device::opaque) return opaque_kernels();
  throw InputError("device " + device_name(device) +
                   ": the simulator and the reference run on cpu or opaque (cuda needs --backend cuda)");
}

}  // namespace zero3
