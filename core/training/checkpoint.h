// Checkpoints: one binary shard file per rank plus a metadata file, in one directory. Every file
// is written atomically and metadata.json is written last, so a directory without it is never a
// checkpoint; loading validates everything and reshards when the world size differs.
//
// Layout of DIR:
//   metadata.json      {"zero3_checkpoint": 1, "world", "step" (optimizer steps taken), "seed",
//                       "model" (the resolved spec), "train_config", "parameters" (id, name, shape,
//                       numel, shard_numel, owner), "ties", "shard_files" (rank, file, bytes, fnv1a),
//                       "metadata_fnv1a" (FNV-1a of the compact JSON dump of every other key)}
//   rank_00000.bin ... a 28-byte header (magic "ZERO3SHD", u32 version, u32 rank, u32 world,
//                       u64 parameter count), then for every parameter in id order its master,
//                       exp_avg and exp_avg_sq shards: shard_numel f32 each, little-endian, the
//                       padding past numel zero.
//
// A rank saves its own shard into the staging folder, a barrier follows, then rank 0 writes the
// metadata and moves the checkpoint in place ("Saving" below), and any world size loads it:
//   Checkpoint checkpoint = load_checkpoint(dir, model);
//   engine.load_shard_state(ctx, shard_state(checkpoint.full, comm.world(), comm.rank()));
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/nn/model.h"
#include "core/training/optimizer.h"
#include "core/tensor/shape.h"
#include "core/training/train_config.h"

namespace zero3 {

inline constexpr int64_t kCheckpointVersion = 2;
inline constexpr int64_t kShardHeaderBytes = 28;
inline constexpr const char* kCheckpointMetadataFile = "metadata.json";

struct CheckpointParam {
  std::string name;
  Shape shape;
  std::string owner;  // the owning module's display name
};

// A parameter used by modules that do not own it (a tied LM head). It is one parameter with one
// optimizer slot; the record lets a load refuse a model whose ties differ.
struct CheckpointTie {
  std::string parameter;
  std::vector<std::string> users;  // module names
  bool operator==(const CheckpointTie&) const = default;
};

// Everything metadata.json says besides the shard files' checksums.
struct CheckpointManifest {
  int world = 1;
  int64_t step = 0;  // optimizer steps taken: training resumes with step index `step`
  uint64_t seed = 0;
  nlohmann::json model_spec;
  nlohmann::json train_config;
  std::vector<CheckpointParam> params;  // by id
  std::vector<CheckpointTie> ties;
};

CheckpointManifest manifest_of(const Model& model, int world, int64_t step, uint64_t seed,
                               const nlohmann::json& model_spec, const TrainConfig& config);

std::string shard_file_name(int rank);  // "rank_00003.bin"
// Bytes of one rank's shard file for this parameter table and world size.
int64_t shard_file_bytes(const CheckpointManifest& manifest);

// Saving. A save never destroys the checkpoint it replaces: the files go to a staging folder beside
// the destination (DIR.saving), and only a complete checkpoint is moved in place (the old one is
// renamed DIR.previous for that moment, then removed; a load that finds no DIR reads DIR.previous,
// so a kill at any point leaves a checkpoint to load). Anything else in DIR or DIR.saving is the
// user's: the save is refused before training starts.
//   prepare_checkpoint_save(dir);                                 // once, before any rank writes
//   write_shard_file(checkpoint_staging_dir(dir), manifest, rank, shards);   // every rank
//   barrier; rank 0: write_metadata(checkpoint_staging_dir(dir), manifest); publish_checkpoint(dir);
//   on any failure: abandon_checkpoint_save(dir)
std::string checkpoint_staging_dir(const std::string& dir);
// InputError naming the file when `dir` or its staging folder holds anything but a checkpoint's
// files; then an empty staging folder (a killed save's leftovers removed).
void prepare_checkpoint_save(const std::string& dir);
// Moves the complete staging folder to `dir`, replacing the checkpoint there: the two steps below.
void publish_checkpoint(const std::string& dir);
// Where the replaced checkpoint waits while the new one moves in: DIR.previous.
std::string checkpoint_previous_dir(const std::string& dir);
// Publishing's first step: the checkpoint in `dir` becomes DIR.previous. Without a `dir` (a kill
// after this step left none) DIR.previous is kept: it is the one complete checkpoint.
void set_aside_published_checkpoint(const std::string& dir);
// Publishing's second step: the staging folder becomes `dir`, then DIR.previous is removed.
void move_staged_checkpoint_in_place(const std::string& dir);
// The folder a load of `dir` reads: `dir`, or DIR.previous, with a warning on stderr, when a kill
// between publishing's two steps left no `dir`. The loads below call it; DIR.previous is then
// validated like any checkpoint.
std::string checkpoint_dir_to_read(const std::string& dir);
// Removes the staging folder, whatever it holds; `dir` is left as it was.
void abandon_checkpoint_save(const std::string& dir);

// Rank `rank`'s part of a save: writes its shard file into `dir` (which must exist) atomically and
// returns its path. `shards` by id, each of shard_numel elements. InputError naming the path when
// it cannot be written.
std::string write_shard_file(const std::string& dir, const CheckpointManifest& manifest, int rank,
                             const std::vector<OptimizerSlot>& shards);
// The last part of a save, once every rank's shard file is written: reads each back, checks its
// header and size, and writes metadata.json with the files' FNV-1a checksums.
void write_metadata(const std::string& dir, const CheckpointManifest& manifest);
// A whole save from one process holding the full state (the reference trainer, consolidation):
// shards `full` for manifest.world ranks, staged and published as above.
void save_checkpoint(const std::string& dir, const CheckpointManifest& manifest,
                     const std::vector<OptimizerSlot>& full);

struct Checkpoint {
  CheckpointManifest manifest;
  std::vector<OptimizerSlot> full;  // full f32 master weights and moments by id, in parameter shapes
};

// Reads and validates a checkpoint on its own terms: metadata version, schema and checksum, the
// parameter table, every shard file's size, header and checksum. Every problem is an InputError naming the
// file, the JSON path where there is one, and what was expected. This is `consolidate`: the full
// state of every parameter, whatever world size saved it.
Checkpoint read_checkpoint(const std::string& dir);
// Only metadata.json, validated as read_checkpoint validates it; the shard files are not read.
CheckpointManifest read_checkpoint_manifest(const std::string& dir);
// read_checkpoint, then the parameter table and ties must match `model` (InputError naming the
// parameter and the JSON path).
Checkpoint load_checkpoint(const std::string& dir, const Model& model);
// `zero3 consolidate DIR OUT`: the checkpoint in `dir` rewritten as a world-1 checkpoint in `out`,
// which the reference trainer (and any world size) loads.
void consolidate_checkpoint(const std::string& dir, const std::string& out);

// A run that resumes from `load_dir` ("" when it does not) at `first_step` must have steps left
// before `steps`, and a save step (0: after the last) must be one it takes. InputError otherwise.
void check_checkpoint_steps(const std::string& load_dir, int64_t first_step, int64_t steps, int64_t save_at_step);

// Rank `rank`'s shards of a full state (by id) for `world` ranks, padding zero.
std::vector<OptimizerSlot> shard_state(const std::vector<OptimizerSlot>& full, int world, int rank);

}  // namespace zero3
