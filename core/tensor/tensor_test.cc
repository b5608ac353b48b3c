// Tensor construction, views and copies: zero-sized shapes, shared reshape storage, independent
// clones, and meta tensors that hold no data.
#include "core/tensor/tensor.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <utility>
#include <vector>

#include "core/base/errors.h"

namespace zero3 {
namespace {

TEST(Tensor, ZerosWithAZeroDimHasNoElementsAndNoBytes) {
  const Tensor t = Tensor::zeros({0, 3});
  EXPECT_EQ(t.shape(), (Shape{0, 3}));
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.bytes(), 0);
  EXPECT_TRUE(t.values().empty());
  EXPECT_EQ(t.dim(1), 3);
}

TEST(Tensor, ZerosAreZeroAndFullIsTheValue) {
  const Tensor zeros = Tensor::zeros({2, 2});
  const Tensor full = Tensor::full({3}, 2.5f);
  for (float value : zeros.values()) EXPECT_EQ(value, 0.0f);
  for (float value : full.values()) EXPECT_EQ(value, 2.5f);
}

TEST(Tensor, ScalarHasRankZeroAndOneElement) {
  const Tensor t = Tensor::scalar(4.0f);
  EXPECT_EQ(t.rank(), 0);
  EXPECT_EQ(t.numel(), 1);
  EXPECT_EQ(t.item(), 4.0f);
}

TEST(Tensor, ReshapeSharesStorage) {
  Tensor x = Tensor::from_values({2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor y = x.reshape({3, 2});
  EXPECT_TRUE(y.shares_storage_with(x));
  y.data()[5] = 50.0f;
  EXPECT_EQ(x.data()[5], 50.0f);
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
}

TEST(Tensor, ARangeViewSharesStorageFromItsFirstElementAndKeepsItsOffsetThroughReshapeAndRelabel) {
  Tensor x = Tensor::from_values({3, 2}, {0, 1, 2, 3, 4, 5});
  Tensor middle = x.view_range(2, {2});
  EXPECT_TRUE(middle.shares_storage_with(x));
  EXPECT_EQ(middle.to_floats(), (std::vector<float>{2, 3}));
  middle.data()[1] = 30.0f;
  EXPECT_EQ(x.data()[3], 30.0f);
  EXPECT_EQ(middle.reshape({1, 2}).to_floats(), (std::vector<float>{2, 30}));
  EXPECT_EQ(middle.relabeled_as(Device::cpu).to_floats(), (std::vector<float>{2, 30}));
  EXPECT_EQ(middle.clone().to_floats(), (std::vector<float>{2, 30}));
  EXPECT_EQ(static_cast<const char*>(middle.device_bytes()) - static_cast<const char*>(x.device_bytes()), 8);
  // Views of views add up: element 1 of [2, 30] is x's element 3.
  EXPECT_EQ(middle.view_range(1, {1}).item(), 30.0f);
  const Tensor bf16 = Tensor::from_values({4}, {1, 2, 3, 4}, DType::bf16);
  EXPECT_EQ(bf16.view_range(3, {1}).item(), 4.0f);
  EXPECT_TRUE(Tensor::meta({6}).view_range(2, {4}).is_meta());
}

TEST(Tensor, ARangeViewPastTheEndRaisesNamingTheRange) {
  const Tensor x = Tensor::zeros({2, 3});
  for (const auto& [first, shape] : std::vector<std::pair<int64_t, Shape>>{{5, {2}}, {-1, {1}}, {7, {0}}}) {
    try {
      x.view_range(first, shape);
      ADD_FAILURE() << "expected ShapeError for " << first;
    } catch (const ShapeError& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find("from element " + std::to_string(first)), std::string::npos) << message;
      EXPECT_NE(message.find("[2,3]"), std::string::npos) << message;
    }
  }
  EXPECT_EQ(x.view_range(6, {0}).numel(), 0);  // an empty view at the end is a view
}

TEST(Tensor, ReshapeToAnotherNumelRaisesNamingBothShapes) {
  const Tensor x = Tensor::zeros({2, 3});
  try {
    x.reshape({4});
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("[2,3]"), std::string::npos) << message;
    EXPECT_NE(message.find("[4]"), std::string::npos) << message;
  }
}

TEST(Tensor, CloneIsIndependentOfTheOriginal) {
  Tensor x = Tensor::from_values({2}, {1, 2});
  Tensor y = x.clone();
  EXPECT_FALSE(y.shares_storage_with(x));
  y.data()[0] = 7.0f;
  EXPECT_EQ(x.data()[0], 1.0f);
  EXPECT_EQ(y.dtype(), x.dtype());
}

TEST(Tensor, MetaHasAShapeButNoDataAndDataAccessAsserts) {
  Tensor m = Tensor::meta({1024, 50257});
  EXPECT_TRUE(m.is_meta());
  EXPECT_EQ(m.numel(), 1024 * 50257);
  EXPECT_EQ(m.bytes(), 4 * 1024 * 50257);
  EXPECT_EQ(m.storage_id(), nullptr);
  EXPECT_THROW(m.data(), std::logic_error);
  EXPECT_THROW(m.values(), std::logic_error);
  EXPECT_TRUE(m.clone().is_meta());
  EXPECT_TRUE(m.reshape({50257, 1024}).is_meta());
}

TEST(Tensor, ZerosOnMetaAllocatesNothing) {
  const Tensor m = Tensor::zeros({8, 8}, DType::bf16, Device::meta);
  EXPECT_TRUE(m.is_meta());
  EXPECT_EQ(m.storage_id(), nullptr);
  EXPECT_EQ(m.bytes(), 2 * 64);
}

TEST(Tensor, Bf16ValuesAreRoundedOnConstructionAndNarrowing) {
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7 on the bf16 grid: ties go to even (1).
  const float halfway = 1.0f + 1.0f / 256.0f;
  EXPECT_EQ(Tensor::from_values({1}, {halfway}, DType::bf16).item(), 1.0f);
  EXPECT_EQ(Tensor::full({1}, halfway, DType::bf16).item(), 1.0f);
  const Tensor f = Tensor::from_values({1}, {halfway});
  EXPECT_EQ(f.item(), halfway);
  const Tensor b = f.to_dtype(DType::bf16);
  EXPECT_EQ(b.dtype(), DType::bf16);
  EXPECT_EQ(b.item(), 1.0f);
  EXPECT_EQ(f.item(), halfway) << "to_dtype copies";
}

// Counts what the cpu memory is asked for, and serves it from host memory as the default does.
class CountingHostMemory final : public DeviceMemory {
 public:
  void* allocate(Device device, int64_t bytes) override {
    requested.push_back(bytes);
    return allocate_zeroed_host_bytes(bytes, device);
  }
  void free(Device, void* bytes, int64_t size) override { free_host_bytes(bytes, size); }
  std::vector<int64_t> requested;
};

TEST(Tensor, Bf16StorageHoldsTwoBytesPerElementOfRealBf16Bits) {
  DeviceMemory& default_memory = device_memory(Device::cpu);
  CountingHostMemory counting;
  register_device_memory(DeviceKind::cpu, &counting);
  {
    const Tensor b = Tensor::from_values({3}, {1.0f, -2.5f, 3.14159f}, DType::bf16);
    const Tensor f = Tensor::zeros({3});
    EXPECT_EQ(counting.requested, (std::vector<int64_t>{6, 12}));
    EXPECT_EQ(b.bytes(), 6);
    // 3.14159 rounds to 3.140625 = 0x4049 on the bf16 grid.
    EXPECT_EQ(b.bf16_data()[0], 0x3f80);
    EXPECT_EQ(b.bf16_data()[1], 0xc020);
    EXPECT_EQ(b.bf16_data()[2], 0x4049);
    EXPECT_EQ(b.to_floats(), (std::vector<float>{1.0f, -2.5f, 3.140625f}));
  }
  register_device_memory(DeviceKind::cpu, &default_memory);
}

TEST(Tensor, ACastToBf16AndBackIsExactForBf16ValuesAndRoundsOthersOnce) {
  const Tensor exact = Tensor::from_values({4}, {0.0f, -0.0f, 65280.0f, 1.0f / 1024.0f});
  EXPECT_EQ(exact.to_dtype(DType::bf16).to_dtype(DType::f32).to_floats(), exact.to_floats());
  const Tensor inexact = Tensor::from_values({1}, {1.0f + 1.0f / 128.0f + 1.0f / 1024.0f});
  const Tensor once = inexact.to_dtype(DType::bf16);
  EXPECT_EQ(once.to_dtype(DType::f32).to_dtype(DType::bf16).to_floats(), once.to_floats()) << "rounding is idempotent";
}

TEST(Tensor, NegativeDimCountsFromTheEnd) {
  const Tensor t = Tensor::zeros({2, 5, 7});
  EXPECT_EQ(t.dim(-1), 7);
  EXPECT_EQ(t.dim(-3), 2);
  EXPECT_THROW(t.dim(3), std::logic_error);
}

TEST(Tensor, DescribeNamesDtypeShapeAndDevice) {
  EXPECT_EQ(describe(Tensor::zeros({2, 3})), "f32[2,3] cpu");
  EXPECT_EQ(describe(Tensor::meta({0}, DType::bf16)), "bf16[0] meta");
  EXPECT_EQ(describe(Tensor()), "undefined tensor");
}

}  // namespace
}  // namespace zero3
