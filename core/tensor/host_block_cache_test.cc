// The host block cache: a freed block serves the next request of its size class, zeroed when
// asked, and tensors of a repeated step stop reaching the system.
#include "core/tensor/host_block_cache.h"

#include <gtest/gtest.h>

#include <cstring>

#include "core/tensor/tensor.h"

namespace zero3 {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCaching = false;  // every block goes back at once, so ASan sees each use after free
#else
constexpr bool kCaching = true;
#endif

TEST(HostBlockCache, AFreedBlockServesItsSizeClassAgainZeroedWhenAsked) {
  if (!kCaching) GTEST_SKIP() << "the cache is off under AddressSanitizer";
  auto* first = static_cast<unsigned char*>(host_block_acquire(8192, false, Device::cpu));
  std::memset(first, 0xAB, 8192);
  host_block_release(first, 8192);
  const HostBlockCacheStats before = host_block_cache_stats();
  // 7,200 bytes round up to the same class, (7168, 8192]: the same block comes back.
  auto* again = static_cast<unsigned char*>(host_block_acquire(7200, true, Device::cpu));
  EXPECT_EQ(again, first);
  EXPECT_EQ(host_block_cache_stats().hits, before.hits + 1);
  for (int i = 0; i < 7200; ++i) ASSERT_EQ(again[i], 0) << "byte " << i << " of a reused zeroed block";
  host_block_release(again, 7200);
  // 7,000 bytes belong to the class below: not that block.
  void* smaller = host_block_acquire(7000, false, Device::cpu);
  EXPECT_NE(smaller, static_cast<void*>(first));
  host_block_release(smaller, 7000);
}

TEST(HostBlockCache, RepeatedStepsOfTensorsAreServedFromTheCache) {
  if (!kCaching) GTEST_SKIP() << "the cache is off under AddressSanitizer";
  const auto step = [] {
    const Tensor a = Tensor::uninitialized({64, 65});
    const Tensor b = Tensor::zeros({3, 1000});
    EXPECT_EQ(b.values()[2999], 0.0f);
  };
  step();
  const HostBlockCacheStats before = host_block_cache_stats();
  for (int i = 0; i < 5; ++i) step();
  EXPECT_EQ(host_block_cache_stats().misses, before.misses);
  EXPECT_EQ(host_block_cache_stats().hits, before.hits + 10);
}

}  // namespace
}  // namespace zero3
