// TokenFileData: an llm.c token file (the .bin files its data scripts write), read as llm.c's
// DataLoader reads it, so that a Python script reproduces every batch:
//   header   256 little-endian int32: [0] = 20240520 (magic), [1] = 1 (version), [2] = token count N
//   tokens   N little-endian uint16
// Micro-step (step, micro) is global window g = step * micro_steps + micro (micro_steps: the
// gradient accumulation steps). With W ranks of B examples of context T, a global window is
// W·B·T + 1 consecutive tokens starting at token (g mod E)·W·B·T, where E = (N - 1) / (W·B·T)
// windows fit in the file (llm.c wraps to the start the same way). Rank r takes the B·T + 1 tokens
// from r·B·T on: inputs are the first B·T as B rows of T, targets the same shifted by one. The W
// rank batches concatenated are exactly the world-1 batch of W·B rows, as every DataSource promises.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/models/data.h"

namespace zero3 {

class TokenFileData : public DataSource {
 public:
  static constexpr int32_t kMagic = 20240520;
  static constexpr int32_t kVersion = 1;
  static constexpr int64_t kHeaderInts = 256;

  // InputError naming the path: unreadable, a bad header, a size that disagrees with the count,
  // or a token >= vocab (its index named).
  TokenFileData(const std::string& path, int64_t vocab, int64_t context, int64_t micro_steps);
  // Whether `path` starts with the llm.c magic (and so is read as tokens, not bytes).
  static bool is_token_file(const std::string& path);

  Batch batch(int64_t step, int64_t micro, int rank, int world, int64_t batch_size) const override;
  std::string description() const override;
  std::optional<double> unigram_entropy_nats() const override;

 private:
  std::string path_;
  int64_t context_;
  int64_t micro_steps_;
  std::vector<uint16_t> tokens_;
  double unigram_entropy_ = 0.0;
};

}  // namespace zero3
