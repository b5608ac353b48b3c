// Periodic checkpoints, as DeepSpeed users know them: `--save-every N` saves after every N-th
// optimizer step (and after the last) into DIR/step_NNNNNNNN/, each a complete checkpoint published
// as checkpoint.h's "Saving" says; after each, DIR/latest names the newest (rewritten atomically), and
// only the newest `keep_last` stay (0 keeps all). Loading DIR reads the checkpoint `latest` names.
//
//   prepare_checkpoint_series("ck");                         // once, before training
//   save into checkpoint_series_dir("ck", 10), then record_latest_checkpoint("ck", 10, /*keep_last=*/3);
//   load_checkpoint("ck", model);                             // reads ck/step_00000010
#pragma once
#include <cstdint>
#include <string>

namespace zero3 {

inline constexpr const char* kLatestCheckpointFile = "latest";

// DIR/step_00000010 for step 10.
std::string checkpoint_series_dir(const std::string& dir, int64_t step);
// InputError naming the entry when DIR holds anything but a series' own step_* folders (and their
// staging and set-aside siblings) and `latest`; then DIR exists.
void prepare_checkpoint_series(const std::string& dir);
// After the save of `step` is published: DIR/latest names it, and step folders older than the
// newest `keep_last` are removed (0 keeps every one).
void record_latest_checkpoint(const std::string& dir, int64_t step, int64_t keep_last);
// The folder a load of DIR reads when DIR holds a series (a `latest` file): the step folder it
// names, else DIR itself. InputError naming DIR/latest when it names no folder of the series.
std::string checkpoint_in_series(const std::string& dir);

}  // namespace zero3
