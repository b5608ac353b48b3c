// Markov token data: a pure function of (seed, step, micro, example), sharded by rank, following
// the chain, with an exact unigram entropy that a learning GPT goes clearly below.
#include "core/models/markov_data.h"

#include <cmath>

#include <gtest/gtest.h>

#include "core/tensor/kernels.h"
#include "core/models/model_zoo.h"

namespace zero3 {
namespace {

std::vector<float> values_of(const Tensor& tensor) { return {tensor.values().begin(), tensor.values().end()}; }

TEST(MarkovData, SameSeedGivesTheSameBatchAndAnotherSeedAnotherOne) {
  const MarkovData a(7, 64, 16), b(7, 64, 16), c(8, 64, 16);
  EXPECT_EQ(values_of(a.batch(3, 1, 0, 1, 4).inputs), values_of(b.batch(3, 1, 0, 1, 4).inputs));
  EXPECT_NE(values_of(a.batch(3, 1, 0, 1, 4).inputs), values_of(c.batch(3, 1, 0, 1, 4).inputs));
  EXPECT_NE(values_of(a.batch(3, 1, 0, 1, 4).inputs), values_of(a.batch(3, 2, 0, 1, 4).inputs));
}

TEST(MarkovData, RankShardsConcatenateToTheGlobalBatch) {
  const MarkovData data(7, 64, 8);
  const Batch global = data.batch(2, 0, 0, 1, 12);
  std::vector<float> inputs, targets;
  for (int rank = 0; rank < 3; ++rank) {
    const Batch shard = data.batch(2, 0, rank, 3, 4);
    EXPECT_EQ(shard.inputs.shape(), (Shape{4, 8}));
    for (float v : shard.inputs.values()) inputs.push_back(v);
    for (float v : shard.targets.values()) targets.push_back(v);
  }
  EXPECT_EQ(inputs, values_of(global.inputs));
  EXPECT_EQ(targets, values_of(global.targets));
}

TEST(MarkovData, EveryTargetIsTheNextInputAndASuccessorInTheChain) {
  const MarkovData data(11, 32, 6);
  const Batch batch = data.batch(0, 0, 0, 1, 20);
  for (int64_t b = 0; b < 20; ++b) {
    for (int64_t t = 0; t < 6; ++t) {
      const auto token = static_cast<int64_t>(batch.inputs.data()[b * 6 + t]);
      const auto next = static_cast<int64_t>(batch.targets.data()[b * 6 + t]);
      if (t + 1 < 6) {
        EXPECT_EQ(next, static_cast<int64_t>(batch.inputs.data()[b * 6 + t + 1]));
      }
      bool is_successor = false;
      for (int choice = 0; choice < MarkovData::kSuccessors; ++choice) {
        is_successor = is_successor || data.successor(token, choice) == next;
      }
      EXPECT_TRUE(is_successor) << token << " -> " << next;
    }
  }
}

TEST(MarkovData, UnigramEntropyIsLogVocabAndTheChainIsFarMorePredictable) {
  const MarkovData data(7, 64, 16);
  EXPECT_DOUBLE_EQ(*data.unigram_entropy_nats(), std::log(64.0));
  // Without successor collisions the chain's entropy is that of the successor probabilities.
  double peaked = 0.0;
  for (double p : MarkovData::kSuccessorProbabilities) peaked -= p * std::log(p);
  EXPECT_LE(data.chain_entropy_nats(), peaked + 1e-12);
  EXPECT_GT(data.chain_entropy_nats(), 0.5 * peaked);
  EXPECT_NE(data.description().find("seed 7"), std::string::npos);
}

TEST(MarkovData, TokenFrequenciesAreCloseToTheUniformStationaryDistribution) {
  const MarkovData data(5, 8, 16);
  std::vector<int64_t> counts(8, 0);
  const Batch batch = data.batch(0, 0, 0, 1, 500);
  for (float token : batch.targets.values()) ++counts[static_cast<size_t>(token)];
  for (int64_t count : counts) EXPECT_NEAR(static_cast<double>(count) / 8000.0, 1.0 / 8.0, 0.02);
}

}  // namespace
}  // namespace zero3
