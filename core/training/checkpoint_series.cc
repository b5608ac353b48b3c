// Periodic checkpoints in one folder with a `latest` pointer (checkpoint_series.h).
#include "core/training/checkpoint_series.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/base/atomic_file.h"
#include "core/base/errors.h"

namespace zero3 {

namespace fs = std::filesystem;

namespace {

constexpr const char* kStepPrefix = "step_";
constexpr size_t kStepDigits = 8;

// "step_" and exactly kStepDigits digits: one checkpoint of the series.
bool is_step_name(const std::string& name) {
  return name.size() == 5 + kStepDigits && name.rfind(kStepPrefix, 0) == 0 &&
         std::all_of(name.begin() + 5, name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// What a series folder may hold: `latest`, step folders, and their saves' .saving / .previous.
bool is_series_entry(const std::string& name) {
  if (name == kLatestCheckpointFile || is_step_name(name)) return true;
  for (const std::string suffix : {".saving", ".previous"}) {
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
        is_step_name(name.substr(0, name.size() - suffix.size()))) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::string checkpoint_series_dir(const std::string& dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "%s%0*lld", kStepPrefix, static_cast<int>(kStepDigits), static_cast<long long>(step));
  return (fs::path(dir) / name).string();
}

void prepare_checkpoint_series(const std::string& dir) {
  std::error_code error;
  if (fs::exists(dir, error)) {
    if (!fs::is_directory(dir, error)) throw InputError(dir + ": exists and is not a directory; --save-every saves into one");
    for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
      const std::string name = entry.path().filename().string();
      if (!is_series_entry(name)) {
        throw InputError(dir + ": holds '" + name + "', which is not part of a checkpoint series (step_NNNNNNNN "
                         "folders and 'latest'); give an empty or new directory");
      }
    }
  }
  fs::create_directories(dir, error);
  if (error) throw InputError(dir + ": cannot create the directory: " + error.message());
}

void record_latest_checkpoint(const std::string& dir, int64_t step, int64_t keep_last) {
  const std::string newest = fs::path(checkpoint_series_dir(dir, step)).filename().string();
  write_file_atomically((fs::path(dir) / kLatestCheckpointFile).string(), newest + "\n");
  if (keep_last <= 0) return;
  std::vector<std::string> folders;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    if (entry.is_directory() && is_step_name(entry.path().filename().string())) {
      folders.push_back(entry.path().filename().string());
    }
  }
  std::sort(folders.begin(), folders.end());  // zero-padded: name order is step order
  const size_t keep = static_cast<size_t>(keep_last);
  for (size_t i = 0; i + keep < folders.size(); ++i) {
    if (folders[i] == newest) continue;
    std::error_code ignored;
    fs::remove_all(fs::path(dir) / folders[i], ignored);
  }
}

std::string checkpoint_in_series(const std::string& dir) {
  const fs::path latest = fs::path(dir) / kLatestCheckpointFile;
  std::error_code error;
  if (!fs::is_regular_file(latest, error)) return dir;
  std::ifstream in(latest);
  std::string name;
  std::getline(in, name);
  if (!is_step_name(name)) {
    throw InputError(latest.string() + ": expected the name of a step_NNNNNNNN folder beside it, got '" + name + "'");
  }
  return (fs::path(dir) / name).string();
}

}  // namespace zero3
