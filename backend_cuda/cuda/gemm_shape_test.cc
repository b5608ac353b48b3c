// The GEMM shape log that `zero3 bench step --backend cuda` replays: it keeps calls only while
// recording, starts each recording empty, refuses a start or stop out of turn, and describes a
// shape with its transposes, sharing and dtypes. CPU only.
#include "backend_cuda/cuda/gemm_shape.h"

#include <gtest/gtest.h>

namespace zero3 {
namespace {

const GemmShape kProjection{.batch = 1, .m = 64, .n = 96, .k = 32, .trans_b = true};
const GemmShape kAttentionScores{.batch = 8, .m = 16, .n = 16, .k = 4, .trans_b = true, .a_dtype = DType::bf16,
                                 .b_dtype = DType::bf16, .out_dtype = DType::bf16};

TEST(GemmShapeLog, KeepsOnlyTheCallsMadeWhileRecordingAndStartsEachRecordingEmpty) {
  GemmShapeLog log;
  log.record(kProjection);
  EXPECT_TRUE(log.shapes().empty());
  log.start();
  log.record(kProjection);
  log.record(kAttentionScores);
  log.stop();
  log.record(kProjection);
  ASSERT_EQ(log.shapes().size(), 2u);
  EXPECT_EQ(log.shapes()[0], kProjection);
  EXPECT_EQ(log.shapes()[1], kAttentionScores);
  log.start();
  EXPECT_TRUE(log.shapes().empty());
  log.stop();
}

TEST(GemmShapeLog, RefusesAStartWhileRecordingAndAStopWhileNot) {
  GemmShapeLog log;
  EXPECT_THROW(log.stop(), std::logic_error);
  log.start();
  EXPECT_THROW(log.start(), std::logic_error);
  EXPECT_TRUE(log.recording());
}

TEST(GemmShape, CountsOperandsAndFlopsAndDescribesItsLayout) {
  const GemmShape shared{.batch = 4, .m = 2, .n = 3, .k = 5, .trans_a = true, .b_shared = true, .accumulates = true};
  EXPECT_EQ(shared.a_numel(), 40);
  EXPECT_EQ(shared.b_numel(), 15);
  EXPECT_EQ(shared.out_numel(), 24);
  EXPECT_EQ(shared.flops(), 240.0);
  EXPECT_EQ(shared.describe(), "4 x (2x5 @ 5x3) a^T b-shared f32*f32->f32 +=");
  EXPECT_EQ(kAttentionScores.describe(), "8 x (16x4 @ 4x16) b^T bf16*bf16->bf16");
}

}  // namespace
}  // namespace zero3
