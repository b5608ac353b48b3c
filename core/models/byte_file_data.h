// ByteFileData: byte-level tokens (vocab 256) from a file. Example i of a micro-batch is the
// window of context + 1 bytes at a seeded random offset, wrapping around the file's end, so every
// position's marginal is exactly the file's byte frequency and unigram_entropy_nats() is exact.
#pragma once
#include <vector>

#include "core/models/data.h"

namespace zero3 {

class ByteFileData : public DataSource {
 public:
  static constexpr int64_t kVocab = 256;

  // InputError naming the path when the file cannot be read or is empty.
  ByteFileData(const std::string& path, uint64_t seed, int64_t context);

  Batch batch(int64_t step, int64_t micro, int rank, int world, int64_t batch_size) const override;
  std::string description() const override;
  std::optional<double> unigram_entropy_nats() const override;

 private:
  std::string path_;
  uint64_t seed_;
  int64_t context_;
  std::vector<uint8_t> bytes_;
};

}  // namespace zero3
