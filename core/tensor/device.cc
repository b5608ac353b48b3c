// Device names and the registry of device memories; the cpu memory is built in.
#include "core/tensor/device.h"

#include <array>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/base/errors.h"
#include "core/tensor/host_block_cache.h"

namespace zero3 {
namespace {


class HostMemory final : public DeviceMemory {
 public:
  void* allocate(Device device, int64_t bytes) override { return allocate_zeroed_host_bytes(bytes, device); }
  void* allocate_uninitialized(Device device, int64_t bytes) override {
    return allocate_uninitialized_host_bytes(bytes, device);
  }
  void free(Device, void* bytes, int64_t size) override { free_host_bytes(bytes, size); }
};

HostMemory& host_memory() {
  static HostMemory memory;
  return memory;
}

std::array<DeviceMemory*, 4>& registry() {
  static std::array<DeviceMemory*, 4> memories{&host_memory(), nullptr, nullptr, nullptr};
  return memories;
}

const char* kind_name(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::cpu: return "cpu";
    case DeviceKind::cuda: return "cuda";
    case DeviceKind::opaque: return "opaque";
    case DeviceKind::meta: return "meta";
  }
  return "unknown";
}

}  // namespace

void* allocate_zeroed_host_bytes(int64_t bytes, Device device) { return host_block_acquire(bytes, true, device); }

void* allocate_uninitialized_host_bytes(int64_t bytes, Device device) {
  return host_block_acquire(bytes, false, device);
}

void free_host_bytes(void* bytes, int64_t size) { host_block_release(bytes, size); }

std::string device_name(Device device) {
  if (device.kind == DeviceKind::cpu || device.kind == DeviceKind::meta) return kind_name(device.kind);
  return std::string(kind_name(device.kind)) + ":" + std::to_string(device.index);
}

bool parse_device(const std::string& text, Device* out) {
  if (text == "cpu") { *out = Device::cpu; return true; }
  if (text == "opaque" || text == "opaque:0") { *out = Device::opaque; return true; }
  if (text == "cuda") { *out = Device{DeviceKind::cuda, 0}; return true; }
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5 && text.size() < 9 &&
      text.find_first_not_of("0123456789", 5) == std::string::npos) {
    *out = Device{DeviceKind::cuda, std::stoi(text.substr(5))};
    return true;
  }
  return false;
}

void register_device_memory(DeviceKind kind, DeviceMemory* memory) {
  ZERO3_CHECK(kind != DeviceKind::meta, "meta tensors have no memory");
  registry()[static_cast<size_t>(kind)] = kind == DeviceKind::cpu && memory == nullptr ? &host_memory() : memory;
}

DeviceMemory& device_memory(Device device) {
  ZERO3_CHECK(device.has_memory(), "meta tensors have no memory");
  DeviceMemory* memory = registry()[static_cast<size_t>(device.kind)];
  if (memory == nullptr) {
    throw BackendError("no memory registered for device " + device_name(device) +
                       " (its backend was not started in this process)");
  }
  return *memory;
}

}  // namespace zero3
