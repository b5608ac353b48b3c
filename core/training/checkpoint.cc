// Checkpoints as a whole: saving every rank's shards then the metadata, the validating load that
// reshards to any world size, and consolidation (see checkpoint.h for the layout). The shard file
// encoding is in checkpoint_shard_file.cc, the metadata schema in checkpoint_metadata.cc, moving a
// finished checkpoint in place in checkpoint_publish.cc.
#include "core/training/checkpoint.h"

#include <algorithm>
#include <filesystem>

#include "core/base/errors.h"
#include "core/base/json_reader.h"
#include "core/sharding/bucket_layout.h"
#include "core/tensor/kernels.h"
#include "core/training/checkpoint_files.h"

namespace zero3 {

using namespace checkpoint_files;

namespace {

namespace fs = std::filesystem;

[[noreturn]] void mismatch(const std::string& file, const std::string& path, const std::string& expected,
                           const std::string& got) {
  throw InputError(file + ": at " + path + ": expected " + expected + ", got " + got);
}

std::string describe_ties(const std::vector<CheckpointTie>& ties) {
  if (ties.empty()) return "no ties";
  std::string text;
  for (const CheckpointTie& tie : ties) {
    std::string users;
    for (const std::string& user : tie.users) users += (users.empty() ? "" : ", ") + user;
    text += (text.empty() ? "" : "; ") + tie.parameter + " used by " + users;
  }
  return text;
}

nlohmann::json read_metadata_json(const std::string& dir) {
  const std::string metadata_path = join_path(dir, kCheckpointMetadataFile);
  if (!fs::is_directory(dir)) throw InputError(dir + ": no such checkpoint directory");
  if (!fs::exists(metadata_path)) {
    throw InputError(dir + ": not a complete checkpoint: " + kCheckpointMetadataFile +
                     " is missing (a save writes it last; an interrupted save leaves none)");
  }
  return read_json_file(metadata_path);
}

}  // namespace

void save_checkpoint(const std::string& dir, const CheckpointManifest& manifest,
                     const std::vector<OptimizerSlot>& full) {
  prepare_checkpoint_save(dir);
  const std::string staging = checkpoint_staging_dir(dir);
  try {
    for (int rank = 0; rank < manifest.world; ++rank) {
      write_shard_file(staging, manifest, rank, shard_state(full, manifest.world, rank));
    }
    write_metadata(staging, manifest);
    publish_checkpoint(dir);
  } catch (...) {
    abandon_checkpoint_save(dir);
    throw;
  }
}

void check_checkpoint_steps(const std::string& load_dir, int64_t first_step, int64_t steps, int64_t save_at_step) {
  if (!load_dir.empty() && first_step >= steps) {
    throw InputError(load_dir + ": the checkpoint is at step " + std::to_string(first_step) +
                     "; the steps to train to (" + std::to_string(steps) +
                     ", counted from the start of training) must be greater");
  }
  if (save_at_step != 0 && (save_at_step <= first_step || save_at_step > steps)) {
    throw InputError("save step " + std::to_string(save_at_step) + " is not one this run takes (" +
                     std::to_string(first_step + 1) + " to " + std::to_string(steps) + ")");
  }
}

std::vector<OptimizerSlot> shard_state(const std::vector<OptimizerSlot>& full, int world, int rank) {
  std::vector<OptimizerSlot> shards;
  for (const OptimizerSlot& slot : full) {
    const auto flat = [&](const Tensor& value) { return make_shard(cpu_kernels(), value.reshape({value.numel()}), world, rank); };
    shards.push_back({flat(slot.master), flat(slot.exp_avg), flat(slot.exp_avg_sq)});
  }
  return shards;
}

CheckpointManifest read_checkpoint_manifest(const std::string& requested_dir) {
  const std::string dir = checkpoint_dir_to_read(requested_dir);
  const nlohmann::json json = read_metadata_json(dir);
  const JsonReader root(json, join_path(dir, kCheckpointMetadataFile));
  CheckpointManifest manifest = read_manifest(root);
  check_metadata_checksum(root);
  return manifest;
}

Checkpoint read_checkpoint(const std::string& requested_dir) {
  const std::string dir = checkpoint_dir_to_read(requested_dir);
  const std::string metadata_path = join_path(dir, kCheckpointMetadataFile);
  const nlohmann::json json = read_metadata_json(dir);
  const JsonReader root(json, metadata_path);
  Checkpoint checkpoint{.manifest = read_manifest(root), .full = {}};
  const CheckpointManifest& manifest = checkpoint.manifest;
  const JsonReader files = root.at("shard_files");
  if (files.size() != static_cast<size_t>(manifest.world)) {
    files.fail("one entry per rank (" + std::to_string(manifest.world) + ")");
  }
  for (int rank = 0; rank < manifest.world; ++rank) {
    check_shard_entry(dir, files.at(static_cast<size_t>(rank)), manifest, rank);
  }
  check_metadata_checksum(root);
  for (const CheckpointParam& param : manifest.params) {
    checkpoint.full.push_back({Tensor::zeros(param.shape), Tensor::zeros(param.shape), Tensor::zeros(param.shape)});
  }
  for (int rank = 0; rank < manifest.world; ++rank) {
    read_shard_file(dir, files.at(static_cast<size_t>(rank)), manifest, rank, checkpoint.full);
  }
  return checkpoint;
}

Checkpoint load_checkpoint(const std::string& requested_dir, const Model& model) {
  // Resolved here as well, so that errors name the metadata file that was read.
  const std::string dir = checkpoint_dir_to_read(requested_dir);
  Checkpoint checkpoint = read_checkpoint(dir);
  const std::string file = join_path(dir, kCheckpointMetadataFile);
  const CheckpointManifest expected = manifest_of(model, 1, 0, 0, {}, {});
  const std::vector<CheckpointParam>& saved = checkpoint.manifest.params;
  for (size_t id = 0; id < std::min(saved.size(), expected.params.size()); ++id) {
    const std::string at = "/parameters/" + std::to_string(id);
    if (saved[id].name != expected.params[id].name) {
      mismatch(file, at + "/name",
               "'" + expected.params[id].name + "' (the model's parameter " + std::to_string(id) + ")",
               "'" + saved[id].name + "'; the checkpoint is from another model");
    }
    if (saved[id].shape != expected.params[id].shape) {
      mismatch(file, at + "/shape",
               shape_str(expected.params[id].shape) + " for '" + saved[id].name + "' (the model's)",
               shape_str(saved[id].shape));
    }
  }
  if (saved.size() != expected.params.size()) {
    const bool model_has_more = expected.params.size() > saved.size();
    const std::string first = model_has_more ? expected.params[saved.size()].name : saved[expected.params.size()].name;
    mismatch(file, "/parameters", std::to_string(expected.params.size()) + " parameters (the model's)",
             std::to_string(saved.size()) + "; '" + first + "' is " +
                 (model_has_more ? "missing from the checkpoint" : "not in the model"));
  }
  if (checkpoint.manifest.ties != expected.ties) {
    mismatch(file, "/ties", describe_ties(expected.ties) + " (the model's)", describe_ties(checkpoint.manifest.ties));
  }
  return checkpoint;
}

void consolidate_checkpoint(const std::string& dir, const std::string& out) {
  Checkpoint checkpoint = read_checkpoint(dir);
  checkpoint.manifest.world = 1;
  save_checkpoint(out, checkpoint.manifest, checkpoint.full);
}

}  // namespace zero3
