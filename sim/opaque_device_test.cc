// The opaque device: host reads of its tensors are typed errors naming the access and the tensor,
// its arena holds dtype-sized bytes (bf16: 2 per element), bytes reach the host only through the
// counted copies, and casts on it round-trip exactly, as on cpu.
#include "sim/opaque_device.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "core/tensor/dtype.h"

namespace zero3 {
namespace {

// The HostAccessError message of `access`, or "" when it throws none.
std::string host_access_message(const std::function<void()>& access) {
  try {
    access();
  } catch (const HostAccessError& error) {
    return error.what();
  }
  return "";
}

TEST(OpaqueDevice, EveryHostReadOfAnOpaqueTensorIsAHostAccessErrorNamingTheAccessAndTheTensor) {
  opaque_kernels();
  Tensor f32 = Tensor::zeros({2, 3}, DType::f32, Device::opaque);
  Tensor bf16 = Tensor::zeros({5}, DType::bf16, Device::opaque);
  const std::string data = host_access_message([&] { f32.data(); });
  EXPECT_NE(data.find("host data() of f32[2,3] opaque:0"), std::string::npos) << data;
  EXPECT_NE(data.find("only through Kernels::copy_to_host"), std::string::npos) << data;
  EXPECT_NE(host_access_message([&] { f32.values(); }).find("f32[2,3] opaque:0"), std::string::npos);
  EXPECT_NE(host_access_message([&] { bf16.bf16_data(); }).find("bf16[5] opaque:0"), std::string::npos);
  EXPECT_NE(host_access_message([&] { bf16.to_floats(); }).find("bf16[5] opaque:0"), std::string::npos);
  EXPECT_NE(host_access_message([&] { Tensor::zeros({}, DType::f32, Device::opaque).item(); }).find("opaque:0"),
            std::string::npos);
}

TEST(OpaqueDevice, TheArenaHoldsTwoBytesPerBf16ElementAndFourPerF32) {
  opaque_kernels();
  const OpaqueArenaStats before = opaque_arena_stats();
  {
    const Tensor bf16 = Tensor::zeros({1000}, DType::bf16, Device::opaque);
    EXPECT_EQ(opaque_arena_stats().live_bytes - before.live_bytes, 2000);
    const Tensor f32 = Tensor::zeros({1000}, DType::f32, Device::opaque);
    EXPECT_EQ(opaque_arena_stats().live_bytes - before.live_bytes, 6000);
    EXPECT_EQ(opaque_arena_stats().allocations - before.allocations, 2);
  }
  EXPECT_EQ(opaque_arena_stats().live_bytes, before.live_bytes) << "freed with the tensors";
}

TEST(OpaqueDevice, BytesReachTheHostOnlyThroughCountedCopies) {
  Kernels& kernels = opaque_kernels();
  const int64_t syncs = kernels.host_syncs();
  const int64_t uploads = kernels.uploads();
  const Tensor host = Tensor::from_values({3}, {1.5f, -2.0f, 0.25f});
  const Tensor device = kernels.copy_to_device(host);
  EXPECT_EQ(device.device(), Device::opaque);
  EXPECT_EQ(kernels.uploads() - uploads, 1);
  EXPECT_EQ(kernels.host_syncs() - syncs, 0) << "an upload is not a host sync";
  const Tensor back = kernels.to_host(device);
  EXPECT_EQ(kernels.host_syncs() - syncs, 1);
  EXPECT_EQ(back.to_floats(), host.to_floats());
}

// Every bf16 bit pattern but NaNs: widening to f32 and narrowing back gives the same bits, on cpu
// (Tensor::to_dtype) and on the opaque device (Kernels::copy, its cast).
TEST(OpaqueDevice, ACastOfEveryBf16ValueToF32AndBackIsExactOnCpuAndOnTheDevice) {
  std::vector<float> values;
  std::vector<uint16_t> bits;
  for (uint32_t pattern = 0; pattern <= 0xffff; ++pattern) {
    const float value = bf16_value(static_cast<uint16_t>(pattern));
    if (std::isnan(value)) continue;
    values.push_back(value);
    bits.push_back(static_cast<uint16_t>(pattern));
  }
  const int64_t count = static_cast<int64_t>(values.size());
  const Tensor host_bf16 = Tensor::from_values({count}, values, DType::bf16);
  ASSERT_EQ(0, std::memcmp(host_bf16.bf16_data(), bits.data(), bits.size() * sizeof(uint16_t)))
      << "from_values stores the bf16 bits themselves";

  const Tensor host_round_trip = host_bf16.to_dtype(DType::f32).to_dtype(DType::bf16);
  EXPECT_EQ(0, std::memcmp(host_round_trip.bf16_data(), bits.data(), bits.size() * sizeof(uint16_t)));

  Kernels& kernels = opaque_kernels();
  const Tensor device_bf16 = kernels.copy_to_device(host_bf16);
  Tensor device_f32 = Tensor::zeros({count}, DType::f32, Device::opaque);
  Tensor device_back = Tensor::zeros({count}, DType::bf16, Device::opaque);
  kernels.copy(device_bf16, device_f32);
  kernels.copy(device_f32, device_back);
  const Tensor widened = kernels.to_host(device_f32);
  EXPECT_EQ(widened.to_floats(), values) << "widening is exact";
  const Tensor narrowed = kernels.to_host(device_back);
  EXPECT_EQ(0, std::memcmp(narrowed.bf16_data(), bits.data(), bits.size() * sizeof(uint16_t)));
}

}  // namespace
}  // namespace zero3
