// Private to the checkpoint files (checkpoint.cc, checkpoint_shard_file.cc, checkpoint_metadata.cc):
// what the writer and the validating reader share. Not part of checkpoint.h's interface.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/base/json_reader.h"
#include "core/training/checkpoint.h"

namespace zero3::checkpoint_files {

inline constexpr int kWorldMax = 1 << 16;
inline constexpr int64_t kNumelMax = int64_t{1} << 40;
inline constexpr const char* kMetadataChecksumKey = "metadata_fnv1a";

inline std::string join_path(const std::string& dir, const std::string& file) {
  return (std::filesystem::path(dir) / file).string();
}
inline int64_t param_numel(const CheckpointParam& param) { return shape_numel(param.shape); }

// ---- shard files (checkpoint_shard_file.cc)
void check_shard_size(uintmax_t size, const std::string& path, const CheckpointManifest& manifest);
// The bytes of rank's shard file, their size and header checked against the manifest, and their
// FNV-1a as 16 hex digits: what the writer records in metadata.json and the reader verifies.
struct ShardFileBytes {
  std::string bytes;
  std::string fnv1a;
};
ShardFileBytes read_checked_shard_file(const std::string& path, const CheckpointManifest& manifest, int rank);
// Reads rank's shard file listed by `entry` (its checksum verified) into the full values.
void read_shard_file(const std::string& dir, const JsonReader& entry, const CheckpointManifest& manifest, int rank,
                     std::vector<OptimizerSlot>& full);

// ---- metadata.json (checkpoint_metadata.cc)
nlohmann::json manifest_to_json(const CheckpointManifest& manifest);
// The checksum metadata.json carries of itself.
std::string metadata_checksum(nlohmann::json metadata);
CheckpointManifest read_manifest(const JsonReader& root);
// One shard_files entry against the parameter table and the file on disk.
void check_shard_entry(const std::string& dir, const JsonReader& entry, const CheckpointManifest& manifest, int rank);
void check_metadata_checksum(const JsonReader& root);

}  // namespace zero3::checkpoint_files
