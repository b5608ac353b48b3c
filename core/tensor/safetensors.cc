// Reading and writing safetensors (safetensors.h).
#include "core/tensor/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/base/atomic_file.h"
#include "core/base/errors.h"
#include "core/base/json_reader.h"

namespace zero3 {

namespace {

constexpr uint64_t kHeaderBytesMax = uint64_t{100} << 20;  // the format's own limit
constexpr const char* kMetadataKey = "__metadata__";

const char* safetensors_dtype(DType dtype) { return dtype == DType::bf16 ? "BF16" : "F32"; }

uint64_t read_le64(const std::string& bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | static_cast<uint8_t>(bytes[static_cast<size_t>(i)]);
  return value;
}

std::string le64(uint64_t value) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((value >> (8 * i)) & 0xFF);
  return out;
}

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  int64_t begin, end;
};

Entry read_entry(const JsonReader& entry, const std::string& name) {
  entry.expect_object();
  entry.expect_only_keys({"dtype", "shape", "data_offsets"});
  const std::string dtype = entry.at("dtype").as_string();
  if (dtype != "F32" && dtype != "BF16") {
    entry.at("dtype").fail("F32 or BF16 (zero3 reads those; got \"" + dtype + "\")");
  }
  const JsonReader shape = entry.at("shape");
  shape.expect_array();
  Shape dims;
  int64_t numel = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    dims.push_back(shape.at(i).as_int(0, int64_t{1} << 40));
    if (dims.back() > 0 && numel > (int64_t{1} << 50) / dims.back()) shape.fail("a shape of at most 2^50 elements");
    numel *= dims.back();
  }
  const JsonReader offsets = entry.at("data_offsets");
  if (offsets.size() != 2) offsets.fail("[BEGIN, END], two byte offsets");
  const int64_t begin = offsets.at(size_t{0}).as_int(0, std::numeric_limits<int64_t>::max());
  const int64_t end = offsets.at(size_t{1}).as_int(0, std::numeric_limits<int64_t>::max());
  const DType parsed = dtype == "BF16" ? DType::bf16 : DType::f32;
  if (end < begin) offsets.fail("BEGIN <= END (got [" + std::to_string(begin) + ", " + std::to_string(end) + "])");
  if (end - begin != numel * dtype_bytes(parsed)) {
    offsets.fail(std::to_string(numel * dtype_bytes(parsed)) + " bytes for " + dtype + " of " +
                 std::to_string(numel) + " elements (got " + std::to_string(end - begin) + ")");
  }
  return Entry{name, parsed, dims, begin, end};
}

}  // namespace

const Tensor* SafetensorsFile::find(const std::string& name) const {
  for (const NamedTensor& named : tensors) {
    if (named.name == name) return &named.tensor;
  }
  return nullptr;
}

std::string encode_safetensors(const std::vector<NamedTensor>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  std::set<std::string> names;
  int64_t offset = 0;
  for (const NamedTensor& named : tensors) {
    ZERO3_CHECK(named.name != kMetadataKey && names.insert(named.name).second, "tensor name " + named.name);
    ZERO3_CHECK(named.tensor.device() == Device::cpu && !named.tensor.is_meta(), named.name + " must be on the cpu");
    header[named.name] = {{"dtype", safetensors_dtype(named.tensor.dtype())},
                          {"shape", named.tensor.shape()},
                          {"data_offsets", {offset, offset + named.tensor.bytes()}}};
    offset += named.tensor.bytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the buffer starts 8-byte aligned
  std::string out = le64(text.size()) + text;
  out.reserve(out.size() + static_cast<size_t>(offset));
  // Elements are stored little-endian, as on every machine zero3 runs on.
  for (const NamedTensor& named : tensors) {
    out.append(static_cast<const char*>(named.tensor.device_bytes()), static_cast<size_t>(named.tensor.bytes()));
  }
  return out;
}

void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  write_file_atomically(path, encode_safetensors(tensors, metadata));
}

SafetensorsFile decode_safetensors(const std::string& bytes, const std::string& source) {
  if (bytes.size() < 8) {
    throw InputError(source + ": " + std::to_string(bytes.size()) +
                     " bytes: expected a safetensors file (an 8-byte header length first)");
  }
  const uint64_t header_bytes = read_le64(bytes);
  if (header_bytes > kHeaderBytesMax || header_bytes > bytes.size() - 8) {
    throw InputError(source + ": the header length " + std::to_string(header_bytes) + " is over " +
                     (header_bytes > kHeaderBytesMax ? "the format's 100 MiB limit"
                                                     : "the " + std::to_string(bytes.size() - 8) +
                                                           " bytes that follow it"));
  }
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.substr(8, header_bytes));
  } catch (const nlohmann::json::exception& error) {  // parse_error, or out_of_range for a number too large
    throw InputError(source + ": the header is not JSON: " + error.what());
  }
  const JsonReader root(header, source);
  root.expect_object();
  SafetensorsFile file;
  std::vector<Entry> entries;
  for (const std::string& name : root.keys()) {
    if (name == kMetadataKey) {
      const JsonReader metadata = root.at(name);
      for (const std::string& key : metadata.keys()) file.metadata[key] = metadata.at(key).as_string();
      continue;
    }
    entries.push_back(read_entry(root.at(name), name));
  }
  // Packed: sorted by offset, each tensor starts where the previous ended, the last ends the file.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const int64_t buffer_bytes = static_cast<int64_t>(bytes.size() - 8 - header_bytes);
  int64_t expected_begin = 0;
  for (const Entry& entry : entries) {
    if (entry.begin != expected_begin) {
      root.at(entry.name).at("data_offsets").fail(
          "data starting at byte " + std::to_string(expected_begin) + " (" +
          (entry.begin < expected_begin ? "it overlaps the tensor before it" : "there is a hole before it") + ")");
    }
    if (entry.end > buffer_bytes) {
      root.at(entry.name).at("data_offsets").fail("an END within the " + std::to_string(buffer_bytes) +
                                                  "-byte buffer (got " + std::to_string(entry.end) + ")");
    }
    expected_begin = entry.end;
  }
  if (expected_begin != buffer_bytes) {
    throw InputError(source + ": " + std::to_string(buffer_bytes - expected_begin) +
                     " bytes after the last tensor: expected the tensors to cover the whole buffer");
  }
  const char* buffer = bytes.data() + 8 + header_bytes;
  for (const Entry& entry : entries) {
    Tensor tensor = Tensor::zeros(entry.shape, entry.dtype);
    if (entry.end > entry.begin) {
      std::memcpy(tensor.device_bytes(), buffer + entry.begin, static_cast<size_t>(entry.end - entry.begin));
    }
    file.tensors.push_back({entry.name, std::move(tensor)});
  }
  return file;
}

SafetensorsFile read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open the safetensors file");
  std::ostringstream contents;
  contents << in.rdbuf();
  return decode_safetensors(contents.str(), path);
}

}  // namespace zero3
