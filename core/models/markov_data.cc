// Markov-chain token data.
#include "core/models/markov_data.h"

#include <cmath>
#include <map>
#include <numeric>
#include <sstream>

#include "core/base/errors.h"
#include "core/base/rng.h"

namespace zero3 {

MarkovData::MarkovData(uint64_t seed, int64_t vocab, int64_t context) : seed_(seed), vocab_(vocab), context_(context) {
  ZERO3_CHECK(vocab > 0 && vocab <= INT32_MAX && context > 0, "markov data needs vocab and context > 0");
  for (int choice = 0; choice < kSuccessors; ++choice) {
    // Fisher-Yates from a counter stream per choice: the chain depends on the seed alone.
    auto& permutation = successors_[static_cast<size_t>(choice)];
    permutation.resize(static_cast<size_t>(vocab));
    std::iota(permutation.begin(), permutation.end(), 0);
    CounterRng rng(seed, mix64(stream_id("markov.successors"), static_cast<uint64_t>(choice), 0));
    for (int64_t i = vocab - 1; i > 0; --i) {
      const auto j = static_cast<int64_t>(rng.next_below(static_cast<uint64_t>(i + 1)));
      std::swap(permutation[static_cast<size_t>(i)], permutation[static_cast<size_t>(j)]);
    }
  }
}

int64_t MarkovData::successor(int64_t token, int choice) const {
  return successors_[static_cast<size_t>(choice)][static_cast<size_t>(token)];
}

Batch MarkovData::batch(int64_t step, int64_t micro, int rank, int world, int64_t batch_size) const {
  ZERO3_CHECK(rank >= 0 && rank < world && batch_size >= 0, "batch for rank " + std::to_string(rank) + " of " +
                                                                std::to_string(world));
  const uint64_t stream = mix64(stream_id("markov.sequences"), static_cast<uint64_t>(step), static_cast<uint64_t>(micro));
  const auto span = static_cast<uint64_t>(context_ + 1);
  Tensor inputs = Tensor::zeros({batch_size, context_});
  Tensor targets = Tensor::zeros({batch_size, context_});
  for (int64_t b = 0; b < batch_size; ++b) {
    const auto example = static_cast<uint64_t>(rank * batch_size + b);
    // The first token from the uniform stationary distribution, then one chain step per token.
    auto token = static_cast<int64_t>(uniform01(seed_, stream, example * span) * static_cast<double>(vocab_));
    for (int64_t t = 0; t < context_; ++t) {
      double u = uniform01(seed_, stream, example * span + static_cast<uint64_t>(t) + 1);
      int choice = 0;
      while (choice + 1 < kSuccessors && u >= kSuccessorProbabilities[static_cast<size_t>(choice)]) {
        u -= kSuccessorProbabilities[static_cast<size_t>(choice)];
        ++choice;
      }
      const int64_t next = successor(token, choice);
      inputs.data()[b * context_ + t] = static_cast<float>(token);
      targets.data()[b * context_ + t] = static_cast<float>(next);
      token = next;
    }
  }
  return {inputs, targets};
}

std::string MarkovData::description() const {
  std::ostringstream out;
  out << "markov chain over " << vocab_ << " tokens (" << kSuccessors << " successors each), context " << context_
      << ", seed " << seed_ << "; unigram entropy " << *unigram_entropy_nats() << " nats, chain entropy "
      << chain_entropy_nats() << " nats";
  return out.str();
}

std::optional<double> MarkovData::unigram_entropy_nats() const {
  // Each permutation matrix is doubly stochastic, so their mixture is too: uniform is stationary.
  return std::log(static_cast<double>(vocab_));
}

double MarkovData::chain_entropy_nats() const {
  double total = 0.0;
  for (int64_t token = 0; token < vocab_; ++token) {
    // Two choices may lead to the same successor; their probabilities then add up.
    std::map<int64_t, double> row;
    for (int choice = 0; choice < kSuccessors; ++choice) {
      row[successor(token, choice)] += kSuccessorProbabilities[static_cast<size_t>(choice)];
    }
    for (const auto& [next, p] : row) total -= p * std::log(p);
  }
  return total / static_cast<double>(vocab_);
}

}  // namespace zero3
