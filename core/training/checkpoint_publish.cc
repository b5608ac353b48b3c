// Saving a checkpoint without ever destroying the previous one: every file is written into a
// staging folder beside the destination, which replaces the destination only once it is complete
// (see checkpoint.h, "Saving"); and finding the checkpoint to read when a kill interrupted that.
#include <cstdio>
#include <filesystem>

#include "core/training/checkpoint.h"
#include "core/base/errors.h"
#include "core/training/checkpoint_series.h"

namespace zero3 {

namespace fs = std::filesystem;

namespace {

// metadata.json, rank_NNNNN.bin, or a temporary that write_file_atomically left behind when killed.
bool is_checkpoint_file(const fs::directory_entry& entry) {
  if (!entry.is_regular_file()) return false;
  std::string name = entry.path().filename().string();
  const size_t temporary = name.find(".tmp.");
  if (temporary != std::string::npos) name.resize(temporary);
  if (name == kCheckpointMetadataFile) return true;
  return name.size() == shard_file_name(0).size() && name.rfind("rank_", 0) == 0 &&
         name.compare(name.size() - 4, 4, ".bin") == 0;
}

// Refuses a folder zero3 must not replace or remove: anything but a checkpoint's own files.
void require_only_checkpoint_files(const std::string& dir, const std::string& why) {
  std::error_code error;
  if (!fs::exists(dir, error)) return;
  if (!fs::is_directory(dir, error)) throw InputError(dir + ": exists and is not a directory; " + why);
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    if (!is_checkpoint_file(entry)) {
      throw InputError(dir + ": holds '" + entry.path().filename().string() +
                       "', which is not a checkpoint's file; " + why);
    }
  }
}

std::string sibling(const std::string& dir, const char* suffix) {
  fs::path path(dir);
  if (!path.has_filename()) path = path.parent_path();  // "ck/" names the folder ck
  return path.string() + suffix;
}

}  // namespace

std::string checkpoint_staging_dir(const std::string& dir) { return sibling(dir, ".saving"); }

void prepare_checkpoint_save(const std::string& dir) {
  require_only_checkpoint_files(dir, "a save replaces a checkpoint there, so give an empty or new directory");
  const std::string staging = checkpoint_staging_dir(dir);
  // Left by a save that was killed: ours by its name, and holding nothing else, so it goes.
  require_only_checkpoint_files(staging, "it is where a save stages its files; move it away");
  std::error_code error;
  fs::remove_all(staging, error);
  if (!error) fs::create_directories(staging, error);
  if (error) throw InputError(staging + ": cannot create the staging directory: " + error.message());
}

std::string checkpoint_previous_dir(const std::string& dir) { return sibling(dir, ".previous"); }

void set_aside_published_checkpoint(const std::string& dir) {
  const std::string previous = checkpoint_previous_dir(dir);
  std::error_code error;
  // No DIR: nothing to set aside, or a publish was killed after setting the old checkpoint aside.
  // DIR.previous is then the only complete checkpoint, so it stays until the new one is in place.
  if (!fs::exists(dir, error) && !error) return;
  fs::remove_all(previous, error);
  if (!error) fs::rename(dir, previous, error);
  if (error) throw InputError(dir + ": cannot move the checkpoint there aside to " + previous + ": " + error.message());
}

void move_staged_checkpoint_in_place(const std::string& dir) {
  const std::string staging = checkpoint_staging_dir(dir);
  std::error_code error;
  fs::rename(staging, dir, error);
  if (error) throw InputError(dir + ": cannot move the new checkpoint in place from " + staging + ": " + error.message());
  fs::remove_all(checkpoint_previous_dir(dir), error);
}

std::string checkpoint_dir_to_read(const std::string& requested) {
  const std::string dir = checkpoint_in_series(requested);  // a --save-every folder: its latest
  std::error_code error;
  if (fs::exists(dir, error) || error) return dir;
  const std::string previous = checkpoint_previous_dir(dir);
  if (!fs::is_directory(previous, error)) return dir;
  std::fprintf(stderr,
               "warning: %s is missing; loading %s, the checkpoint that a save interrupted while replacing it "
               "had set aside\n",
               dir.c_str(), previous.c_str());
  return previous;
}

void publish_checkpoint(const std::string& dir) {
  set_aside_published_checkpoint(dir);
  move_staged_checkpoint_in_place(dir);
}

void abandon_checkpoint_save(const std::string& dir) {
  std::error_code ignored;
  fs::remove_all(checkpoint_staging_dir(dir), ignored);
}

}  // namespace zero3
