// Terminal progress bar (see progress.h).
#include "tools/runs/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace zero3 {

ProgressBar::ProgressBar(int64_t total, std::string label)
    : total_(total), label_(std::move(label)), enabled_(::isatty(STDERR_FILENO) == 1 && total > 0) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(int64_t done, const std::string& status) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  // Redraw at most 20 times a second; the last update always draws.
  if (drawn_ && done < total_ && now - last_draw_ < std::chrono::milliseconds(50)) return;
  last_draw_ = now;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * done / total_);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "\r\033[K%s [%s] %lld/%lld %s", label_.c_str(), bar.c_str(), static_cast<long long>(done),
               static_cast<long long>(total_), status.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (!drawn_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

std::string loss_curve(const std::vector<StepStats>& steps, int width, int height) {
  if (steps.empty()) return "";
  double low = steps.front().loss, high = steps.front().loss;
  for (const StepStats& stats : steps) {
    low = std::min(low, stats.loss);
    high = std::max(high, stats.loss);
  }
  const int columns = std::min<int>(width, static_cast<int>(steps.size()));
  std::vector<std::string> rows(static_cast<size_t>(height), std::string(static_cast<size_t>(columns), ' '));
  for (int column = 0; column < columns; ++column) {
    const size_t index = static_cast<size_t>(column) * steps.size() / static_cast<size_t>(columns);
    const double fraction = high > low ? (steps[index].loss - low) / (high - low) : 0.0;
    const int row = height - 1 - static_cast<int>(std::lround(fraction * (height - 1)));
    rows[static_cast<size_t>(row)][static_cast<size_t>(column)] = '*';
  }
  char label[32];
  std::string text;
  for (int row = 0; row < height; ++row) {
    const double value = high - (high - low) * row / std::max(1, height - 1);
    std::snprintf(label, sizeof(label), "%8.3f |", value);
    text += label + rows[static_cast<size_t>(row)] + "\n";
  }
  return text;
}

}  // namespace zero3
