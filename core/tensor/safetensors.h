// safetensors files (Hugging Face's weight format), read and written here with nlohmann/json:
//   8 bytes    little-endian uint64 N, the header's length
//   N bytes    a JSON object: {"NAME": {"dtype": "F32", "shape": [2, 3], "data_offsets": [BEGIN, END]},
//              ..., "__metadata__": {"key": "value"}}, padded with spaces to a multiple of 8
//   the rest   the byte buffer: each tensor's little-endian elements at [BEGIN, END), the tensors
//              packed without holes or overlaps and covering the whole buffer
// zero3 reads and writes F32 and BF16 (real bf16 bits). Every malformed file is an InputError naming
// the file, the header's JSON path and what was expected; writes are atomic.
//
//   write_safetensors("w.safetensors", {{"wte.weight", tensor}}, {{"format", "pt"}});
//   SafetensorsFile file = read_safetensors("w.safetensors");
//   const Tensor* wte = file.find("wte.weight");
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/tensor/tensor.h"

namespace zero3 {

struct NamedTensor {
  std::string name;
  Tensor tensor;  // cpu, f32 or bf16
};

struct SafetensorsFile {
  std::vector<NamedTensor> tensors;  // in the order of their data offsets
  std::map<std::string, std::string> metadata;
  const Tensor* find(const std::string& name) const;  // null when absent
};

SafetensorsFile read_safetensors(const std::string& path);
// The tensors in the given order; names must be distinct and not "__metadata__".
void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});
// The file's bytes, as write_safetensors writes them (for tests and in-memory use).
std::string encode_safetensors(const std::vector<NamedTensor>& tensors, const std::map<std::string, std::string>& metadata);
// Parses bytes that came from `source` (named in errors).
SafetensorsFile decode_safetensors(const std::string& bytes, const std::string& source);

}  // namespace zero3
