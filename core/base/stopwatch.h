// Wall-clock time for reports and benchmarks only: nothing that decides behaviour may read it
// (the simulator is deterministic), so it is a stopwatch and not a clock.
//
//   Stopwatch watch;
//   run();
//   std::printf("%.2f s\n", watch.seconds());
#pragma once
#include <chrono>

namespace zero3 {

class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }
  double milliseconds() const { return 1000.0 * seconds(); }
  void restart() { start_ = std::chrono::steady_clock::now(); }
  // The seconds since the start or the previous lap, and the next lap starts now: one clock read
  // splits a run into consecutive phases that add up to the whole.
  double lap_seconds() {
    const std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - start_).count();
    start_ = now;
    return seconds;
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace zero3
