// Checkpoint shard files: one rank's master, exp_avg and exp_avg_sq shards in an explicit
// little-endian encoding behind a 28-byte header (the layout is in checkpoint.h).
#include <bit>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/base/atomic_file.h"
#include "core/base/errors.h"
#include "core/base/hash.h"
#include "core/sharding/partition.h"
#include "core/training/checkpoint.h"
#include "core/training/checkpoint_files.h"

namespace zero3 {

using namespace checkpoint_files;

namespace {

constexpr char kShardMagic[8] = {'Z', 'E', 'R', 'O', '3', 'S', 'H', 'D'};
constexpr uint32_t kShardVersion = 1;

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

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot be read (missing file or no permission)");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The header of a shard file: magic, version, and rank and world as the metadata expects them.
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

}  // namespace

namespace checkpoint_files {

void check_shard_size(uintmax_t size, const std::string& path, const CheckpointManifest& manifest) {
  const int64_t expected = shard_file_bytes(manifest);
  if (size == static_cast<uintmax_t>(expected)) return;
  throw InputError(path + ": " + std::to_string(size) + " bytes, expected " + std::to_string(expected) +
                   " (header + 3 f32 shards per parameter for world " + std::to_string(manifest.world) +
                   "); the file is truncated or from another checkpoint");
}

ShardFileBytes read_checked_shard_file(const std::string& path, const CheckpointManifest& manifest, int rank) {
  ShardFileBytes file{.bytes = read_bytes(path), .fnv1a = {}};
  check_shard_size(file.bytes.size(), path, manifest);
  check_shard_header(file.bytes, path, manifest, rank);
  Fnv1a hash;
  hash.add_bytes(file.bytes.data(), file.bytes.size());
  file.fnv1a = hex64(hash.value());
  return file;
}

void read_shard_file(const std::string& dir, const JsonReader& entry, const CheckpointManifest& manifest, int rank,
                     std::vector<OptimizerSlot>& full) {
  const std::string expected_checksum = entry.at("fnv1a").as_string();
  const std::string path = join_path(dir, shard_file_name(rank));
  const ShardFileBytes file = read_checked_shard_file(path, manifest, rank);
  const std::string& bytes = file.bytes;
  if (file.fnv1a != expected_checksum) {
    throw InputError(path + ": checksum mismatch: FNV-1a of the file is " + file.fnv1a + ", expected " +
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

}  // namespace checkpoint_files

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

}  // namespace zero3
