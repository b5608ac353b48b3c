// Counterexamples the fuzzer found, saved as case files in traces/regressions/: each must pass now.
// A file that still reproduces is an open engine bug; its expected.message says what went wrong,
// and `zero3 fuzz --replay FILE` re-runs it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "props/fuzzer.h"

namespace zero3 {
namespace {

std::vector<std::string> regression_files() {
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(ZERO3_REGRESSIONS_DIR)) {
    if (entry.path().extension() == ".json") paths.push_back(entry.path().string());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

TEST(FuzzRegressions, EverySavedCounterexamplePassesNow) {
  const std::vector<std::string> paths = regression_files();
  ASSERT_FALSE(paths.empty()) << "no case files in " << ZERO3_REGRESSIONS_DIR;
  for (const std::string& path : paths) {
    const ReplayResult replay = replay_case_file(path);
    EXPECT_FALSE(replay.reproduced) << path << " still fails " << replay.property << ":\n"
                                    << replay.message << "\nreplay: zero3 fuzz --replay " << path;
  }
}

}  // namespace
}  // namespace zero3
