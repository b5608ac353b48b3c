// A fiber stack starts with clean AddressSanitizer shadow. Frames that never return (an ending
// fiber's entry frames jump to the scheduler) leave poison behind, and the next stack mapped at the
// same address inherited it: a plain write in a later rank's frame then read as a stack overflow
// (CI, CheckpointRoundTrip seed 4176541875). Without ASan there is no shadow and nothing to check.
#include <cstdint>

#include <gtest/gtest.h>

#include "sim/fiber_scheduler.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

namespace zero3 {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kStackBytes = 256 * 1024;
constexpr size_t kDepth = 64 * 1024;  // below the frames running, well inside the stack
constexpr size_t kSpan = 4096;

char* unused_stack_below_this_frame() { return static_cast<char*>(__builtin_frame_address(0)) - kDepth; }
#endif

TEST(FiberStackShadow, AStackMappedWhereAnEndedFiberLeftPoisonStartsClean) {
#if !defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "no AddressSanitizer shadow in this build";
#else
  char* poisoned = nullptr;
  {
    FiberScheduler first(1, 1, kStackBytes);
    first.run(
        [&](int) {
          // What a frame that never returns leaves: poison under the live frames.
          poisoned = unused_stack_below_this_frame();
          ASAN_POISON_MEMORY_REGION(poisoned, kSpan);
        },
        [] {});
  }
  char* reused = nullptr;
  const void* still_poisoned = nullptr;
  FiberScheduler second(1, 2, kStackBytes);
  second.run(
      [&](int) {
        reused = unused_stack_below_this_frame();
        still_poisoned = __asan_region_is_poisoned(reused, kSpan);
      },
      [] {});
  // The kernel hands back the address just unmapped for a mapping of the same size; if it ever
  // does not, this test no longer reaches the case it is about and says so.
  ASSERT_EQ(reused, poisoned) << "the second fiber's stack was mapped elsewhere";
  EXPECT_EQ(still_poisoned, nullptr) << "a fresh fiber stack carries an ended fiber's ASan poison";
#endif
}

}  // namespace
}  // namespace zero3
