// reduce_in_rank_order works chunk by chunk for speed; these check that every element still gets
// exactly the element-wise rank-order result, across chunk boundaries and at an offset.
#include "core/sharding/rank_order_reduction.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/tensor/dtype.h"

namespace zero3 {
namespace {

// One element at a time, rank by rank: the definition the chunked version must reproduce.
float reference_element(ReduceOp op, const std::vector<std::vector<float>>& ranks, int64_t index, bool bf16) {
  const auto round = [&](float value) { return bf16 ? bf16_value(bf16_bits(value)) : value; };
  float result = round(ranks[0][static_cast<size_t>(index)]);
  for (size_t rank = 1; rank < ranks.size(); ++rank) {
    const float next = round(ranks[rank][static_cast<size_t>(index)]);
    result = op == ReduceOp::max ? ((next > result || std::isnan(next)) ? next : result) : round(result + next);
  }
  return result;
}

struct Case {
  ReduceOp op;
  DType dtype;
};

class RankOrderReduction : public ::testing::TestWithParam<Case> {};

TEST_P(RankOrderReduction, EqualsTheElementwiseRankOrderAcrossChunkBoundariesAndAtAnOffset) {
  const auto [op, dtype] = GetParam();
  const bool bf16 = dtype == DType::bf16;
  constexpr int world = 5;
  // Three whole chunks of the implementation and a ragged tail, after an offset of 7 elements.
  constexpr int64_t count = 3 * 4096 + 123, offset = 7, length = offset + count;
  std::mt19937 generator(12345);
  std::uniform_real_distribution<float> values(-1000.0f, 1000.0f);
  std::vector<std::vector<float>> ranks(world, std::vector<float>(static_cast<size_t>(length)));
  for (auto& rank : ranks) {
    for (float& value : rank) value = values(generator);
  }
  ranks[3][offset + 5000] = std::nanf("");  // max must let NaN through; sum carries it
  std::vector<std::vector<uint16_t>> bf16_storage(world);
  std::vector<const void*> blocks;
  for (int rank = 0; rank < world; ++rank) {
    if (bf16) {
      for (float value : ranks[rank]) bf16_storage[rank].push_back(bf16_bits(value));
      blocks.push_back(bf16_storage[rank].data());
    } else {
      blocks.push_back(ranks[rank].data());
    }
  }
  std::vector<float> out_f32(count);
  std::vector<uint16_t> out_bf16(count);
  void* out = bf16 ? static_cast<void*>(out_bf16.data()) : static_cast<void*>(out_f32.data());
  reduce_in_rank_order(op, dtype, blocks, offset, out, count);

  int64_t wrong = 0;
  for (int64_t j = 0; j < count; ++j) {
    const float expected = reference_element(op, ranks, offset + j, bf16);
    const float got = bf16 ? bf16_value(out_bf16[static_cast<size_t>(j)]) : out_f32[static_cast<size_t>(j)];
    const bool same = std::isnan(expected) ? std::isnan(got) : std::memcmp(&expected, &got, sizeof(float)) == 0;
    if (!same && ++wrong <= 5) ADD_FAILURE() << "element " << j << ": expected " << expected << ", got " << got;
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_TRUE(std::isnan(bf16 ? bf16_value(out_bf16[5000]) : out_f32[5000]));
}

INSTANTIATE_TEST_SUITE_P(OpsAndDtypes, RankOrderReduction,
                         ::testing::Values(Case{ReduceOp::sum, DType::f32}, Case{ReduceOp::sum, DType::bf16},
                                           Case{ReduceOp::max, DType::f32}, Case{ReduceOp::max, DType::bf16}),
                         [](const auto& case_info) {
                           return std::string(case_info.param.op == ReduceOp::sum ? "Sum" : "Max") +
                                  (case_info.param.dtype == DType::bf16 ? "Bf16" : "F32");
                         });

}  // namespace
}  // namespace zero3
