// checkpoint's metadata.json: the parameter table, ties and shard list built from a model, written
// with a checksum of itself, and read back against its schema (the layout is in checkpoint.h).
#include <filesystem>
#include <map>

#include "core/base/atomic_file.h"
#include "core/base/errors.h"
#include "core/base/hash.h"
#include "core/nn/tied_linear.h"
#include "core/sharding/partition.h"
#include "core/training/checkpoint.h"
#include "core/training/checkpoint_files.h"

namespace zero3 {

using namespace checkpoint_files;

namespace {

namespace fs = std::filesystem;

uint64_t read_seed(const JsonReader& seed) {
  if (!seed.json().is_number_unsigned()) seed.fail("an unsigned integer seed");
  return seed.json().get<uint64_t>();
}

CheckpointParam read_param(const JsonReader& entry, size_t id, int world) {
  entry.expect_only_keys({"id", "name", "shape", "numel", "shard_numel", "owner"});
  if (entry.at("id").as_int(0, INT64_MAX) != static_cast<int64_t>(id))
    entry.at("id").fail(std::to_string(id) + " (ids in order)");
  CheckpointParam param{.name = entry.at("name").as_string(), .shape = {}, .owner = entry.at("owner").as_string()};
  const JsonReader shape = entry.at("shape");
  int64_t numel = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    // Bounded, so that a damaged shape can neither overflow nor ask for an absurd allocation.
    const int64_t dim = shape.at(i).as_int(0, kNumelMax);
    if (dim != 0 && numel > kNumelMax / dim) shape.fail("a shape of at most 2^40 elements");
    numel *= dim;
    param.shape.push_back(dim);
  }
  if (entry.at("numel").as_int(0, INT64_MAX) != numel)
    entry.at("numel").fail(std::to_string(numel) + " (the shape's product)");
  if (entry.at("shard_numel").as_int(0, INT64_MAX) != shard_numel(numel, world)) {
    entry.at("shard_numel").fail(std::to_string(shard_numel(numel, world)) + " (ceil(numel / world))");
  }
  return param;
}

}  // namespace

namespace checkpoint_files {

nlohmann::json manifest_to_json(const CheckpointManifest& manifest) {
  nlohmann::json params = nlohmann::json::array();
  for (size_t id = 0; id < manifest.params.size(); ++id) {
    const CheckpointParam& param = manifest.params[id];
    params.push_back({{"id", id},
                      {"name", param.name},
                      {"shape", param.shape},
                      {"numel", param_numel(param)},
                      {"shard_numel", shard_numel(param_numel(param), manifest.world)},
                      {"owner", param.owner}});
  }
  nlohmann::json ties = nlohmann::json::array();
  for (const CheckpointTie& tie : manifest.ties) ties.push_back({{"parameter", tie.parameter}, {"users", tie.users}});
  return {{"zero3_checkpoint", kCheckpointVersion},
          {"world", manifest.world},
          {"step", manifest.step},
          {"seed", manifest.seed},
          {"model", manifest.model_spec},
          {"train_config", manifest.train_config},
          {"parameters", params},
          {"ties", ties}};
}

// FNV-1a over the compact dump of every other value.
// nlohmann's objects keep their keys sorted, so the dump is canonical and survives re-indenting.
std::string metadata_checksum(nlohmann::json metadata) {
  metadata.erase(kMetadataChecksumKey);
  Fnv1a hash;
  hash.add_string(metadata.dump());
  return hex64(hash.value());
}

CheckpointManifest read_manifest(const JsonReader& root) {
  root.expect_only_keys({"zero3_checkpoint", "world", "step", "seed", "model", "train_config", "parameters", "ties",
                         "shard_files", kMetadataChecksumKey});
  const JsonReader version = root.at("zero3_checkpoint");
  if (version.as_int(1, INT64_MAX) > kCheckpointVersion) {
    version.fail("checkpoint format version " + std::to_string(kCheckpointVersion) +
                 " (this checkpoint was written by a newer zero3; upgrade to load it)");
  }
  if (version.as_int(1, INT64_MAX) < kCheckpointVersion) {
    version.fail("checkpoint format version " + std::to_string(kCheckpointVersion) +
                 " (version 1 metadata carries no checksum of its own, so its values cannot be trusted)");
  }
  CheckpointManifest manifest;
  manifest.world = static_cast<int>(root.at("world").as_int(1, kWorldMax));
  manifest.step = root.at("step").as_int(0, INT64_MAX);
  manifest.seed = read_seed(root.at("seed"));
  root.at("model").expect_object();
  root.at("train_config").expect_object();
  manifest.model_spec = root.at("model").json();
  manifest.train_config = root.at("train_config").json();
  const JsonReader params = root.at("parameters");
  for (size_t id = 0; id < params.size(); ++id)
    manifest.params.push_back(read_param(params.at(id), id, manifest.world));
  const JsonReader ties = root.at("ties");
  for (size_t i = 0; i < ties.size(); ++i) {
    ties.at(i).expect_only_keys({"parameter", "users"});
    CheckpointTie tie{.parameter = ties.at(i).at("parameter").as_string(), .users = {}};
    const JsonReader users = ties.at(i).at("users");
    for (size_t u = 0; u < users.size(); ++u) tie.users.push_back(users.at(u).as_string());
    manifest.ties.push_back(tie);
  }
  return manifest;
}

// One shard_files entry against the parameter table and the file on disk, before anything is
// allocated for the full state (its size is then bounded by the files that exist).
void check_shard_entry(const std::string& dir, const JsonReader& entry, const CheckpointManifest& manifest, int rank) {
  entry.expect_only_keys({"rank", "file", "bytes", "fnv1a"});
  if (entry.at("rank").as_int(0, kWorldMax) != rank) entry.at("rank").fail(std::to_string(rank) + " (ranks in order)");
  // Only the canonical name: metadata must not send the loader to files outside the directory.
  if (entry.at("file").as_string() != shard_file_name(rank)) entry.at("file").fail("\"" + shard_file_name(rank) + "\"");
  if (entry.at("bytes").as_int(0, INT64_MAX) != shard_file_bytes(manifest)) {
    entry.at("bytes").fail(std::to_string(shard_file_bytes(manifest)) + " (from the parameter table)");
  }
  const std::string checksum = entry.at("fnv1a").as_string();
  if (checksum.size() != 16 || checksum.find_first_not_of("0123456789abcdef") != std::string::npos) {
    entry.at("fnv1a").fail("16 lowercase hex digits (an FNV-1a checksum)");
  }
  const std::string path = join_path(dir, shard_file_name(rank));
  std::error_code error;
  const uintmax_t size = fs::file_size(path, error);
  if (error)
    throw InputError(path + ": cannot be read: " + error.message() + " (listed in " + kCheckpointMetadataFile + ")");
  check_shard_size(size, path, manifest);
}

// Last of the metadata's checks: a file that breaks the schema is reported by what is wrong with
// it; a well-formed one whose values were changed after the save ("step": 2 edited to 3) only
// by this checksum.
void check_metadata_checksum(const JsonReader& root) {
  const JsonReader stored = root.at(kMetadataChecksumKey);
  const std::string got = stored.as_string();
  if (got.size() != 16 || got.find_first_not_of("0123456789abcdef") != std::string::npos) {
    stored.fail("16 lowercase hex digits (an FNV-1a checksum)");
  }
  const std::string expected = metadata_checksum(root.json());
  if (got == expected) return;
  stored.fail(expected + ", the FNV-1a of the file's other values (they were changed after the save, or the file "
              "is damaged)");
}

}  // namespace checkpoint_files

CheckpointManifest manifest_of(const Model& model, int world, int64_t step, uint64_t seed,
                               const nlohmann::json& model_spec, const TrainConfig& config) {
  CheckpointManifest manifest{.world = world,
                              .step = step,
                              .seed = seed,
                              .model_spec = model_spec,
                              .train_config = train_config_to_json(config),
                              .params = {},
                              .ties = {}};
  for (const Parameter* param : model.parameters()) {
    manifest.params.push_back({.name = param->name(), .shape = param->shape(), .owner = param->owner().display_name()});
  }
  // Ties are by construction: a TiedLinear computes with another module's weight.
  std::map<int64_t, std::vector<std::string>> users_by_id;
  std::vector<const Module*> modules = {&model.root()};
  for (size_t i = 0; i < modules.size(); ++i) {
    if (const auto* tied = dynamic_cast<const TiedLinear*>(modules[i])) {
      users_by_id[tied->tied_weight().id()].push_back(tied->display_name());
    }
    for (const auto& child : modules[i]->children()) modules.push_back(child.get());
  }
  for (const auto& [id, users] : users_by_id) {
    manifest.ties.push_back({.parameter = model.parameters()[static_cast<size_t>(id)]->name(), .users = users});
  }
  return manifest;
}

void write_metadata(const std::string& dir, const CheckpointManifest& manifest) {
  nlohmann::json files = nlohmann::json::array();
  for (int rank = 0; rank < manifest.world; ++rank) {
    // Checksums of the files as they are on disk, so a load verifies what was really written.
    const ShardFileBytes file = read_checked_shard_file(join_path(dir, shard_file_name(rank)), manifest, rank);
    files.push_back(
        {{"rank", rank}, {"file", shard_file_name(rank)}, {"bytes", file.bytes.size()}, {"fnv1a", file.fnv1a}});
  }
  nlohmann::json metadata = manifest_to_json(manifest);
  metadata["shard_files"] = files;
  metadata[kMetadataChecksumKey] = metadata_checksum(metadata);
  write_file_atomically(join_path(dir, kCheckpointMetadataFile), metadata.dump(1) + "\n");
}

}  // namespace zero3
