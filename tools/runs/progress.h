// A progress bar for long runs, drawn on stderr only when stderr is a terminal, so logs and CI
// output stay clean while a person watching sees the run move.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/training/step_stats.h"

namespace zero3 {

class ProgressBar {
 public:
  ProgressBar(int64_t total, std::string label);
  ~ProgressBar();
  void update(int64_t done, const std::string& status);
  void finish();  // clears the bar's line

 private:
  int64_t total_;
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_draw_;
};

// A compact ASCII rendering of the loss curve (one character column per bucket of steps).
std::string loss_curve(const std::vector<StepStats>& steps, int width, int height);

}  // namespace zero3
