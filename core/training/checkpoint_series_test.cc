// A checkpoint series: step folders, the `latest` pointer, keeping the newest K, and loads of the
// series folder reading the newest.
#include "core/training/checkpoint_series.h"

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "core/training/checkpoint.h"

namespace zero3 {
namespace {

namespace fs = std::filesystem;

struct SeriesFolder {
  std::string path = (fs::temp_directory_path() / ("zero3-series-" + std::to_string(::getpid()))).string();
  SeriesFolder() { fs::remove_all(path); }
  ~SeriesFolder() { fs::remove_all(path); }
};

void fake_step_folder(const std::string& series, int64_t step) {
  fs::create_directories(checkpoint_series_dir(series, step));
  std::ofstream(fs::path(checkpoint_series_dir(series, step)) / kCheckpointMetadataFile) << "{}";
}

TEST(CheckpointSeries, LatestNamesTheNewestAndOnlyTheNewestKStay) {
  const SeriesFolder folder;
  prepare_checkpoint_series(folder.path);
  for (int64_t step : {2, 4, 6, 8}) {
    fake_step_folder(folder.path, step);
    record_latest_checkpoint(folder.path, step, /*keep_last=*/2);
  }
  EXPECT_FALSE(fs::exists(checkpoint_series_dir(folder.path, 2)));
  EXPECT_FALSE(fs::exists(checkpoint_series_dir(folder.path, 4)));
  EXPECT_TRUE(fs::exists(checkpoint_series_dir(folder.path, 6)));
  EXPECT_EQ(checkpoint_in_series(folder.path), checkpoint_series_dir(folder.path, 8));
  EXPECT_EQ(checkpoint_dir_to_read(folder.path), checkpoint_series_dir(folder.path, 8));
  EXPECT_EQ(fs::path(checkpoint_series_dir(folder.path, 8)).filename(), "step_00000008");
}

TEST(CheckpointSeries, KeepLastZeroKeepsEveryStep) {
  const SeriesFolder folder;
  prepare_checkpoint_series(folder.path);
  for (int64_t step : {1, 2, 3}) {
    fake_step_folder(folder.path, step);
    record_latest_checkpoint(folder.path, step, 0);
  }
  for (int64_t step : {1, 2, 3}) EXPECT_TRUE(fs::exists(checkpoint_series_dir(folder.path, step)));
}

TEST(CheckpointSeries, RefusesAFolderHoldingSomethingElseAndAPointerToNothingOfItsOwn) {
  const SeriesFolder folder;
  fs::create_directories(folder.path);
  std::ofstream(fs::path(folder.path) / "notes.txt") << "mine";
  try {
    prepare_checkpoint_series(folder.path);
    FAIL() << "a folder holding notes.txt was taken for a series";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("holds 'notes.txt'"), std::string::npos) << error.what();
  }
  std::ofstream(fs::path(folder.path) / kLatestCheckpointFile) << "../elsewhere\n";
  try {
    checkpoint_in_series(folder.path);
    FAIL() << "a latest pointing outside the series was followed";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("latest: expected the name of a step_NNNNNNNN folder"),
              std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace zero3
