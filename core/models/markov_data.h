// MarkovData: token sequences from a fixed random Markov chain over the vocab, a function of the
// seed alone. Each token has kSuccessors successors, chosen through random permutations of the
// vocab and weighted by peaked probabilities, so the chain is sparse, learnable and doubly
// stochastic: its stationary (unigram) distribution is exactly uniform. Sequences start from that
// distribution, so every position's marginal is uniform too, and a model that ignores context
// cannot beat log(vocab) nats while one that learns the chain approaches the chain's entropy.
#pragma once
#include <array>
#include <vector>

#include "core/models/data.h"

namespace zero3 {

class MarkovData : public DataSource {
 public:
  static constexpr int kSuccessors = 4;
  static constexpr std::array<double, kSuccessors> kSuccessorProbabilities = {0.7, 0.15, 0.1, 0.05};

  MarkovData(uint64_t seed, int64_t vocab, int64_t context);

  // Token ids [B, context] and the next tokens [B, context], as floats.
  Batch batch(int64_t step, int64_t micro, int rank, int world, int64_t batch_size) const override;
  std::string description() const override;
  std::optional<double> unigram_entropy_nats() const override;
  // The expected next-token entropy under the chain: the best loss any model can reach.
  double chain_entropy_nats() const;
  // The successor of `token` reached by choice `choice` in [0, kSuccessors).
  int64_t successor(int64_t token, int choice) const;

 private:
  uint64_t seed_;
  int64_t vocab_;
  int64_t context_;
  std::array<std::vector<int32_t>, kSuccessors> successors_;  // one permutation of the vocab per choice
};

}  // namespace zero3
