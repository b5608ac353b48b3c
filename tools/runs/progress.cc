// Terminal progress bar (see progress.h).
#include "tools/runs/progress.h"

#include <unistd.h>

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

}  // namespace zero3
