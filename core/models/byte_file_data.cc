// Byte-level token data from a file.
#include "core/models/byte_file_data.h"

#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "core/base/errors.h"
#include "core/base/rng.h"

namespace zero3 {

ByteFileData::ByteFileData(const std::string& path, uint64_t seed, int64_t context)
    : path_(path), seed_(seed), context_(context) {
  ZERO3_CHECK(context > 0, "byte data needs context > 0");
  std::ifstream file(path, std::ios::binary);
  if (!file) throw InputError("data file '" + path + "': cannot open it (" + std::strerror(errno) + ")");
  bytes_.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  if (file.bad()) throw InputError("data file '" + path + "': read failed (" + std::strerror(errno) + ")");
  if (bytes_.empty()) throw InputError("data file '" + path + "' is empty; expected at least one byte of text");
}

Batch ByteFileData::batch(int64_t step, int64_t micro, int rank, int world, int64_t batch_size) const {
  ZERO3_CHECK(rank >= 0 && rank < world && batch_size >= 0, "batch for rank " + std::to_string(rank) + " of " +
                                                                std::to_string(world));
  const uint64_t stream = mix64(stream_id("bytes.offsets"), static_cast<uint64_t>(step), static_cast<uint64_t>(micro));
  const auto size = static_cast<uint64_t>(bytes_.size());
  Tensor inputs = Tensor::zeros({batch_size, context_});
  Tensor targets = Tensor::zeros({batch_size, context_});
  for (int64_t b = 0; b < batch_size; ++b) {
    const uint64_t start = mix64(seed_, stream, static_cast<uint64_t>(rank * batch_size + b)) % size;
    for (int64_t t = 0; t < context_; ++t) {
      const uint64_t at = start + static_cast<uint64_t>(t);
      inputs.data()[b * context_ + t] = bytes_[at % size];
      targets.data()[b * context_ + t] = bytes_[(at + 1) % size];
    }
  }
  return {inputs, targets};
}

std::string ByteFileData::description() const {
  std::ostringstream out;
  out << "bytes of '" << path_ << "' (" << bytes_.size() << " bytes), context " << context_ << ", seed " << seed_
      << "; unigram entropy " << *unigram_entropy_nats() << " nats";
  return out.str();
}

std::optional<double> ByteFileData::unigram_entropy_nats() const {
  std::array<int64_t, kVocab> counts{};
  for (uint8_t byte : bytes_) ++counts[byte];
  double entropy = 0.0;
  for (int64_t count : counts) {
    if (count == 0) continue;
    const double p = static_cast<double>(count) / static_cast<double>(bytes_.size());
    entropy -= p * std::log(p);
  }
  return entropy;
}

}  // namespace zero3
