// poll_until_ready (host_wait.h) on the CPU, with a counting query in place of a CUDA event: the
// watchdog runs while the work is not ready, never once it is, and a watchdog that throws ends a
// wait whose work would never finish.
#include "backend_cuda/cuda/host_wait.h"

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

namespace zero3 {
namespace {

// Polls without pausing, so that the tests take no time.
constexpr HostWaitSchedule kNoPause{.yielding_polls = 0, .sleep_between_polls = std::chrono::microseconds(0)};

TEST(HostWait, WorkAlreadyReadyReturnsWithoutRunningTheWatchdog) {
  int64_t queries = 0;
  int64_t watchdog_runs = 0;
  poll_until_ready([&] { return ++queries > 0; }, [&] { ++watchdog_runs; }, kNoPause);
  EXPECT_EQ(queries, 1);
  EXPECT_EQ(watchdog_runs, 0);
}

TEST(HostWait, TheWatchdogRunsAfterEveryPollThatFindsTheWorkNotReady) {
  constexpr int64_t kNotReadyPolls = 5;
  int64_t queries = 0;
  int64_t watchdog_runs = 0;
  poll_until_ready([&] { return ++queries > kNotReadyPolls; }, [&] { ++watchdog_runs; }, kNoPause);
  EXPECT_EQ(queries, kNotReadyPolls + 1);
  EXPECT_EQ(watchdog_runs, kNotReadyPolls);
}

TEST(HostWait, AWatchdogThatThrowsEndsAWaitWhoseWorkNeverFinishes) {
  constexpr int64_t kWatchdogRunsBeforeGivingUp = 3;
  int64_t watchdog_runs = 0;
  auto never_ready = [] { return false; };
  auto gives_up = [&] {
    if (++watchdog_runs == kWatchdogRunsBeforeGivingUp) throw std::runtime_error("collective #7 timed out");
  };
  try {
    poll_until_ready(never_ready, gives_up, kNoPause);
    ADD_FAILURE() << "a wait for work that never finishes returned";
  } catch (const std::runtime_error& error) {
    EXPECT_EQ(std::string(error.what()), "collective #7 timed out");
  }
  EXPECT_EQ(watchdog_runs, kWatchdogRunsBeforeGivingUp);
}

TEST(HostWait, AQueryThatThrowsEndsTheWaitWithItsError) {
  int64_t watchdog_runs = 0;
  auto failing_query = []() -> bool { throw std::runtime_error("cudaEventQuery failed"); };
  EXPECT_THROW(poll_until_ready(failing_query, [&] { ++watchdog_runs; }, kNoPause), std::runtime_error);
  EXPECT_EQ(watchdog_runs, 0);
}

TEST(HostWait, WithoutAWatchdogTheWaitStillEndsWhenTheWorkIsReady) {
  int64_t queries = 0;
  poll_until_ready([&] { return ++queries > 3; }, std::function<void()>{}, kNoPause);
  EXPECT_EQ(queries, 4);
}

TEST(HostWait, PollsPastTheYieldingOnesSleepAndStillSeeTheWorkFinish) {
  constexpr HostWaitSchedule kShortSleeps{.yielding_polls = 2, .sleep_between_polls = std::chrono::microseconds(10)};
  int64_t queries = 0;
  int64_t watchdog_runs = 0;
  const auto started = std::chrono::steady_clock::now();
  poll_until_ready([&] { return ++queries > 6; }, [&] { ++watchdog_runs; }, kShortSleeps);
  const auto waited = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(watchdog_runs, 6);
  // Four sleeping polls of at least 10 µs each.
  EXPECT_GE(waited, std::chrono::microseconds(40));
}

}  // namespace
}  // namespace zero3
