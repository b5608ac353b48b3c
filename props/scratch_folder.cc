// Scratch folders (scratch_folder.h).
#include "props/scratch_folder.h"

#include <unistd.h>

#include <cstdint>
#include <cstdlib>

namespace zero3 {

std::filesystem::path scratch_root() {
  const char* tmpdir = std::getenv("TMPDIR");
  std::error_code error;
  if ((tmpdir == nullptr || *tmpdir == '\0') && std::filesystem::is_directory("/dev/shm", error) &&
      ::access("/dev/shm", W_OK | X_OK) == 0) {
    return "/dev/shm";
  }
  return std::filesystem::temp_directory_path();
}

ScratchFolder::ScratchFolder() {
  static int64_t count = 0;
  path_ = scratch_root() / ("zero3-checkpoint-property-" + std::to_string(::getpid()) + "-" + std::to_string(count++));
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

ScratchFolder::~ScratchFolder() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace zero3
