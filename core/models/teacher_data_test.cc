// Teacher data: deterministic, sharded by rank, targets from the teacher network.
#include "core/models/teacher_data.h"

#include <algorithm>

#include <gtest/gtest.h>

namespace zero3 {
namespace {

std::vector<float> values_of(const Tensor& tensor) { return {tensor.values().begin(), tensor.values().end()}; }

TEST(TeacherData, SameSeedGivesTheSameBatchAndRankShardsConcatenateToTheGlobalBatch) {
  const TeacherData data(3, 5, 2, SequentialLoss::mse);
  const TeacherData again(3, 5, 2, SequentialLoss::mse);
  const Batch global = data.batch(4, 1, 0, 1, 6);
  EXPECT_EQ(values_of(global.targets), values_of(again.batch(4, 1, 0, 1, 6).targets));
  std::vector<float> inputs, targets;
  for (int rank = 0; rank < 2; ++rank) {
    const Batch shard = data.batch(4, 1, rank, 2, 3);
    for (float v : shard.inputs.values()) inputs.push_back(v);
    for (float v : shard.targets.values()) targets.push_back(v);
  }
  EXPECT_EQ(inputs, values_of(global.inputs));
  EXPECT_EQ(targets, values_of(global.targets));
  EXPECT_NE(values_of(global.inputs), values_of(data.batch(5, 1, 0, 1, 6).inputs));
}

TEST(TeacherData, MseTargetsAreTheTeachersOutputs) {
  const TeacherData data(3, 5, 2, SequentialLoss::mse);
  const Batch batch = data.batch(0, 0, 0, 1, 4);
  ASSERT_EQ(batch.targets.shape(), (Shape{4, 2}));
  for (int64_t b = 0; b < 4; ++b) {
    const std::vector<double> out = data.teach(batch.inputs.data() + b * 5);
    for (int64_t o = 0; o < 2; ++o) EXPECT_FLOAT_EQ(batch.targets.data()[b * 2 + o], static_cast<float>(out[o]));
  }
}

TEST(TeacherData, ClassTargetsAreTheTeachersArgmaxAndUseSeveralClasses) {
  const TeacherData data(3, 5, 4, SequentialLoss::cross_entropy);
  const Batch batch = data.batch(0, 0, 0, 1, 64);
  ASSERT_EQ(batch.targets.shape(), (Shape{64}));
  std::vector<int64_t> seen(4, 0);
  for (int64_t b = 0; b < 64; ++b) {
    const std::vector<double> out = data.teach(batch.inputs.data() + b * 5);
    const auto best = std::max_element(out.begin(), out.end()) - out.begin();
    EXPECT_EQ(batch.targets.data()[b], static_cast<float>(best));
    ++seen[static_cast<size_t>(best)];
  }
  EXPECT_GE(std::count_if(seen.begin(), seen.end(), [](int64_t n) { return n > 0; }), 2);
}

}  // namespace
}  // namespace zero3
