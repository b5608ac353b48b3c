// Checkpoint files: the shard file encoding, the metadata JSON, saving (metadata last) and the
// validating, resharding load (see checkpoint.h for the layout).
#include "core/training/checkpoint.h"

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/base/atomic_file.h"
#include "core/sharding/bucket_layout.h"
#include "core/base/errors.h"
#include "core/base/hash.h"
#include "core/base/json_reader.h"
#include "core/sharding/partition.h"
#include "core/nn/tied_linear.h"

namespace zero3 {

namespace {

namespace fs = std::filesystem;

constexpr char kShardMagic[8] = {'Z', 'E', 'R', 'O', '3', 'S', 'H', 'D'};
constexpr uint32_t kShardVersion = 1;
constexpr int kWorldMax = 1 << 16;
constexpr int64_t kNumelMax = int64_t{1} << 40;
constexpr const char* kMetadataChecksumKey = "metadata_fnv1a";

std::string join_path(const std::string& dir, const std::string& file) { return (fs::path(dir) / file).string(); }

// Explicit little-endian encoding, so a file means the same on any host.
void put_u32(std::string& out, uint32_t value) {
  for (int byte = 0; byte < 4; ++byte) out.push_back(static_cast<char>((value >> (8 * byte)) & 0xFF));
}
void put_u64(std::string& out, uint64_t value) {
  put_u32(out, static_cast<uint32_t>(value));
  put_u32(out, static_cast<uint32_t>(value >> 32));
}
uint32_t get_u32(const std::string& in, size_t offset) {
  uint32_t value = 0;
  for (int byte = 0; byte < 4; ++byte)
    value |= static_cast<uint32_t>(static_cast<unsigned char>(in[offset + byte])) << (8 * byte);
  return value;
}
uint64_t get_u64(const std::string& in, size_t offset) {
  return get_u32(in, offset) | (static_cast<uint64_t>(get_u32(in, offset + 4)) << 32);
}
void put_floats(std::string& out, const Tensor& values) {
  if constexpr (std::endian::native == std::endian::little) {
    // The in-memory bytes are the file's bytes: one append instead of four per element.
    out.append(reinterpret_cast<const char*>(values.data()), static_cast<size_t>(values.numel()) * 4);
    return;
  }
  for (const float value : values.values()) put_u32(out, std::bit_cast<uint32_t>(value));
}

int64_t param_numel(const CheckpointParam& param) { return shape_numel(param.shape); }

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot be read (missing file or no permission)");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The header of a shard file: rank and world as the metadata expects them.
void check_shard_header(const std::string& bytes, const std::string& path, const CheckpointManifest& manifest,
                        int rank) {
  if (static_cast<int64_t>(bytes.size()) < kShardHeaderBytes || std::memcmp(bytes.data(), kShardMagic, 8) != 0) {
    throw InputError(path + ": not a zero3 shard file (expected the magic \"ZERO3SHD\" in a " +
                     std::to_string(kShardHeaderBytes) + "-byte header)");
  }
  const auto expect = [&](const char* field, uint64_t got, uint64_t expected) {
    if (got == expected) return;
    throw InputError(path + ": header field '" + field + "' is " + std::to_string(got) + ", expected " +
                     std::to_string(expected) + " (from " + kCheckpointMetadataFile + ")");
  };
  expect("version", get_u32(bytes, 8), kShardVersion);
  expect("rank", get_u32(bytes, 12), static_cast<uint64_t>(rank));
  expect("world", get_u32(bytes, 16), static_cast<uint64_t>(manifest.world));
  expect("parameter count", get_u64(bytes, 20), manifest.params.size());
}

void check_shard_size(uintmax_t size, const std::string& path, const CheckpointManifest& manifest) {
  const int64_t expected = shard_file_bytes(manifest);
  if (size == static_cast<uintmax_t>(expected)) return;
  throw InputError(path + ": " + std::to_string(size) + " bytes, expected " + std::to_string(expected) +
                   " (header + 3 f32 shards per parameter for world " + std::to_string(manifest.world) +
                   "); the file is truncated or from another checkpoint");
}

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

// The checksum metadata.json carries of itself: FNV-1a over the compact dump of every other value.
// nlohmann's objects keep their keys sorted, so the dump is canonical and survives re-indenting.
std::string metadata_checksum(nlohmann::json metadata) {
  metadata.erase(kMetadataChecksumKey);
  Fnv1a hash;
  hash.add_string(metadata.dump());
  return hex64(hash.value());
}

}  // namespace

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

std::string shard_file_name(int rank) {
  char name[32];
  std::snprintf(name, sizeof(name), "rank_%05d.bin", rank);
  return name;
}

int64_t shard_file_bytes(const CheckpointManifest& manifest) {
  int64_t bytes = kShardHeaderBytes;
  for (const CheckpointParam& param : manifest.params) bytes += 3 * 4 * shard_numel(param_numel(param), manifest.world);
  return bytes;
}

std::string write_shard_file(const std::string& dir, const CheckpointManifest& manifest, int rank,
                             const std::vector<OptimizerSlot>& shards) {
  ZERO3_CHECK(shards.size() == manifest.params.size(), "one optimizer slot per parameter");
  std::string contents(kShardMagic, sizeof(kShardMagic));
  put_u32(contents, kShardVersion);
  put_u32(contents, static_cast<uint32_t>(rank));
  put_u32(contents, static_cast<uint32_t>(manifest.world));
  put_u64(contents, manifest.params.size());
  contents.reserve(static_cast<size_t>(shard_file_bytes(manifest)));
  for (size_t id = 0; id < shards.size(); ++id) {
    const int64_t ps = shard_numel(param_numel(manifest.params[id]), manifest.world);
    const OptimizerSlot& slot = shards[id];
    ZERO3_CHECK(slot.master.numel() == ps && slot.exp_avg.numel() == ps && slot.exp_avg_sq.numel() == ps,
                "shard of '" + manifest.params[id].name + "' must hold shard_numel elements");
    put_floats(contents, slot.master);
    put_floats(contents, slot.exp_avg);
    put_floats(contents, slot.exp_avg_sq);
  }
  const std::string path = join_path(dir, shard_file_name(rank));
  write_file_atomically(path, contents);
  return path;
}

void write_metadata(const std::string& dir, const CheckpointManifest& manifest) {
  nlohmann::json files = nlohmann::json::array();
  for (int rank = 0; rank < manifest.world; ++rank) {
    // Checksums of the files as they are on disk, so a load verifies what was really written.
    const std::string path = join_path(dir, shard_file_name(rank));
    const std::string bytes = read_bytes(path);
    check_shard_size(bytes.size(), path, manifest);
    check_shard_header(bytes, path, manifest, rank);
    Fnv1a hash;
    hash.add_bytes(bytes.data(), bytes.size());
    files.push_back(
        {{"rank", rank}, {"file", shard_file_name(rank)}, {"bytes", bytes.size()}, {"fnv1a", hex64(hash.value())}});
  }
  nlohmann::json metadata = manifest_to_json(manifest);
  metadata["shard_files"] = files;
  metadata[kMetadataChecksumKey] = metadata_checksum(metadata);
  write_file_atomically(join_path(dir, kCheckpointMetadataFile), metadata.dump(1) + "\n");
}

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

// ---- reading -----------------------------------------------------------------------------------

namespace {

[[noreturn]] void mismatch(const std::string& file, const std::string& path, const std::string& expected,
                           const std::string& got) {
  throw InputError(file + ": at " + path + ": expected " + expected + ", got " + got);
}

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

// Copies the owned part of one saved shard into the full value; the padding must be zero.
void unshard_into(const std::string& bytes, size_t& offset, Tensor& full, int world, int rank, const std::string& what,
                  const std::string& path) {
  const int64_t ps = shard_numel(full.numel(), world);
  const ShardRange range = shard_range(full.numel(), world, rank);
  float* values = full.data();
  for (int64_t i = 0; i < ps; ++i, offset += 4) {
    const float value = std::bit_cast<float>(get_u32(bytes, offset));
    if (i < range.owned()) {
      values[range.begin + i] = value;
    } else if (std::bit_cast<uint32_t>(value) != 0) {
      throw InputError(path + ": " + what + " padding element " + std::to_string(i) + " is " + std::to_string(value) +
                       ", expected 0 (padding is zero-filled)");
    }
  }
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

void read_shard_file(const std::string& dir, const JsonReader& entry, const CheckpointManifest& manifest, int rank,
                     std::vector<OptimizerSlot>& full) {
  const std::string expected_checksum = entry.at("fnv1a").as_string();
  const std::string path = join_path(dir, shard_file_name(rank));
  const std::string bytes = read_bytes(path);
  check_shard_size(bytes.size(), path, manifest);
  check_shard_header(bytes, path, manifest, rank);
  Fnv1a hash;
  hash.add_bytes(bytes.data(), bytes.size());
  if (hex64(hash.value()) != expected_checksum) {
    throw InputError(path + ": checksum mismatch: FNV-1a of the file is " + hex64(hash.value()) + ", expected " +
                     expected_checksum + " (" + kCheckpointMetadataFile + " at " + entry.path() +
                     "/fnv1a); the file is corrupted");
  }
  size_t offset = static_cast<size_t>(kShardHeaderBytes);
  for (size_t id = 0; id < full.size(); ++id) {
    const std::string& name = manifest.params[id].name;
    unshard_into(bytes, offset, full[id].master, manifest.world, rank, "'" + name + "' master", path);
    unshard_into(bytes, offset, full[id].exp_avg, manifest.world, rank, "'" + name + "' exp_avg", path);
    unshard_into(bytes, offset, full[id].exp_avg_sq, manifest.world, rank, "'" + name + "' exp_avg_sq", path);
  }
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

}  // namespace

namespace {

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
