// Writing files so that a reader never sees half of one: write to a temporary file in the same
// folder, flush it to disk, then rename over the target. A crash leaves the old file or none.
#pragma once
#include <string>

namespace zero3 {

// Throws InputError naming the path when the folder is missing or not writable.
void write_file_atomically(const std::string& path, const std::string& contents);

}  // namespace zero3
