// Synthetic, learnable training data generated from a seed, sharded by rank.
//
// Example i of global micro-batch (step, micro) is a pure function of (seed, step, micro, i).
// Rank r of W with B examples per rank gets examples [r*B, (r+1)*B), so the W rank batches
// concatenated are exactly batch(step, micro, 0, 1, W*B): the single-process reference trains on
// the same global batch as the sharded run.
#pragma once
#include <optional>
#include <string>

#include "core/nn/model.h"

namespace zero3 {

class DataSource {
 public:
  virtual ~DataSource() = default;
  virtual Batch batch(int64_t step, int64_t micro, int rank, int world, int64_t batch_size) const = 0;
  // One line for the run banner ("markov chain over 64 tokens, seed 7").
  virtual std::string description() const = 0;
  // For token data: the entropy (nats) of the unigram distribution, the loss a model that
  // ignores context converges to. A model that learns must go clearly below it.
  virtual std::optional<double> unigram_entropy_nats() const { return std::nullopt; }
};

}  // namespace zero3
