// Devices and their memory. A Device is a kind and an index (cuda:1). `cpu` memory is host
// memory; `opaque` (the simulator's stand-in for a GPU, sim/opaque_device.h) and `cuda` memory
// the host may not touch: bytes move only through the Kernels seam. `meta` has no memory at all.
//
// Every device kind but meta has one DeviceMemory, registered by its backend before the first
// tensor on it is made:
//
//   register_device_memory(DeviceKind::opaque, &opaque_memory);
//   Tensor x = Tensor::zeros({4}, DType::bf16, Device::opaque);   // 8 zeroed bytes in that memory
#pragma once
#include <cstdint>
#include <string>

namespace zero3 {

enum class DeviceKind : uint8_t { cpu, cuda, opaque, meta };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;

  static const Device cpu;
  static const Device meta;
  static const Device opaque;  // opaque:0

  // Host code may read this device's bytes through Tensor::data().
  bool host_readable() const { return kind == DeviceKind::cpu; }
  bool has_memory() const { return kind != DeviceKind::meta; }
  friend bool operator==(const Device&, const Device&) = default;
};
inline constexpr Device Device::cpu{DeviceKind::cpu, 0};
inline constexpr Device Device::meta{DeviceKind::meta, 0};
inline constexpr Device Device::opaque{DeviceKind::opaque, 0};

std::string device_name(Device device);  // "cpu", "meta", "opaque:0", "cuda:1"
// Parses "cpu", "opaque[:0]" or "cuda[:N]" (so every device_name reads back); false for anything
// else.
bool parse_device(const std::string& text, Device* out);

// Owns the bytes of one device kind. allocate returns zeroed memory aligned for any element type
// (at least 16 bytes; cudaMalloc gives 256), null for 0 bytes, and throws OutOfMemoryError when it
// cannot. allocate_uninitialized is the same without the zeroing, for outputs a kernel overwrites
// whole; a memory that cannot skip it need not override it.
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  virtual void* allocate(Device device, int64_t bytes) = 0;
  virtual void* allocate_uninitialized(Device device, int64_t bytes) { return allocate(device, bytes); }
  virtual void free(Device device, void* bytes, int64_t size) = 0;
};

// Bytes of this process (host_block_cache.h), zeroed or not, aligned as malloc aligns (16
// bytes), null for 0 bytes and an OutOfMemoryError naming `device` when refused; and their
// release, with the size they were allocated with. For the memories backed by host memory: cpu,
// and the simulator's opaque arena.
void* allocate_zeroed_host_bytes(int64_t bytes, Device device);
void* allocate_uninitialized_host_bytes(int64_t bytes, Device device);
void free_host_bytes(void* bytes, int64_t size);

// The memory of `kind`; a later registration replaces an earlier one (tests), null unregisters.
void register_device_memory(DeviceKind kind, DeviceMemory* memory);
// Throws BackendError when no backend registered memory for the device's kind.
DeviceMemory& device_memory(Device device);

}  // namespace zero3
