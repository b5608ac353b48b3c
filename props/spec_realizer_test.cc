// Generated models are valid by construction: every draw list realizes as a spec the model zoo
// builds, and the realizer adapts draws to the widths they meet.
#include "props/spec_realizer.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "core/models/model_zoo.h"
#include "props/generators.h"

namespace zero3 {
namespace {

BuiltModel build(const nlohmann::json& spec) { return build_model_from_spec(spec, "model_spec", {.seed = 1}); }

TEST(SpecRealizer, AZeroSizedLinearIsFollowedByALinearThatRestoresAnOutput) {
  const nlohmann::json spec = realize_model_spec(8, false, {{.kind = LayerKind::linear, .size = 0}}, {});
  ASSERT_EQ(spec["layers"].size(), 2u);
  EXPECT_EQ(spec["layers"][0]["out"], 0);
  EXPECT_EQ(build(spec).model->parameters().front()->numel(), 0);
}

TEST(SpecRealizer, ATiedLinearWithNoFittingWeightBecomesALinear) {
  const nlohmann::json spec = realize_model_spec(3, false, {{.kind = LayerKind::tied_linear, .size = 2}}, {});
  EXPECT_EQ(spec["layers"][0]["type"], "linear");
}

TEST(SpecRealizer, ATiedLinearUsesAnEarlierWeightTransposedToReturnToItsWidth) {
  const nlohmann::json spec = realize_model_spec(
      3, false, {{.kind = LayerKind::linear, .size = 5}, {.kind = LayerKind::tied_linear, .pick = 0}}, {});
  EXPECT_EQ(spec["layers"][1]["tie_to"], "layers.0");
  EXPECT_EQ(spec["layers"][1]["transpose"], true);
  build(spec);
}

TEST(SpecRealizer, AResidualBodyThatChangesTheWidthIsProjectedBack) {
  const LayerDraw residual{.kind = LayerKind::residual, .body = {{.kind = LayerKind::linear, .size = 7}}};
  const nlohmann::json spec = realize_model_spec(4, false, {residual}, {});
  EXPECT_EQ(spec["layers"][0]["layers"].size(), 2u);
  EXPECT_EQ(spec["layers"][0]["layers"][1]["out"], 4);
  build(spec);
}

TEST(SpecRealizer, ALayerNormOnWidthZeroIsDropped) {
  const nlohmann::json spec = realize_model_spec(0, false, {{.kind = LayerKind::layer_norm}}, {});
  EXPECT_EQ(spec["layers"][0]["type"], "linear");
}

TEST(SpecRealizer, ARawScaleReadsAnEarlierLayersParameterOnlyWhenAllowed) {
  const std::vector<LayerDraw> draws = {{.kind = LayerKind::scale, .pick = 0},
                                        {.kind = LayerKind::raw_scale, .pick = 1, .flag = true}};
  EXPECT_EQ(realize_model_spec(4, false, draws, {.raw_foreign = true})["layers"][1]["param"], "layers.0.scale");
  EXPECT_TRUE(realize_model_spec(4, false, draws, {.raw_foreign = false})["layers"][1].contains("shape"));
}

TEST(SpecRealizer, AnEvenPickReadsOnlyATargetThatCollapsesTheWidthAgainstItsPlaceholder) {
  // At width 4 a [4] target meets a [0] placeholder with a shape error; a [4, 1] column (a
  // scale's, or a linear's weight over one input) collapses the width to 0 silently.
  const LayerDraw read{.kind = LayerKind::raw_scale, .pick = 0, .flag = true};
  const nlohmann::json vector_only =
      realize_model_spec(4, false, {{.kind = LayerKind::scale, .pick = 0}, read}, {.raw_foreign = true});
  EXPECT_TRUE(vector_only["layers"][1].contains("shape")) << vector_only.dump();
  const nlohmann::json column =
      realize_model_spec(4, false, {{.kind = LayerKind::scale, .pick = 1}, read}, {.raw_foreign = true});
  EXPECT_EQ(column["layers"][1]["param"], "layers.0.scale") << column.dump();
  const nlohmann::json weight = realize_model_spec(
      1, false, {{.kind = LayerKind::linear, .size = 4}, {.kind = LayerKind::relu}, read}, {.raw_foreign = true});
  EXPECT_EQ(weight["layers"][2]["param"], "layers.0.weight") << weight.dump();
}

TEST(SpecRealizer, ASplicedContainerIsItsBodysLayersInItsPlace) {
  const LayerDraw residual{.kind = LayerKind::residual, .splice = true,
                           .body = {{.kind = LayerKind::gelu}, {.kind = LayerKind::relu}}};
  const nlohmann::json spec = realize_model_spec(3, false, {residual, {.kind = LayerKind::gelu}}, {});
  ASSERT_EQ(spec["layers"].size(), 3u) << spec.dump();  // gelu, relu, gelu
  EXPECT_EQ(spec["layers"][0]["type"], "gelu");
  EXPECT_EQ(spec["layers"][1]["type"], "relu");
}

TEST(SpecRealizer, AnMoeIsAppendedWhenOneIsRequiredAndNoneWasDrawn) {
  const nlohmann::json spec = realize_model_spec(3, true, {{.kind = LayerKind::gelu}}, {.require_moe = true});
  EXPECT_EQ(spec["layers"][1]["type"], "moe");
  build(spec);
}

RC_GTEST_PROP(SpecRealizer, EveryGeneratedModelSpecBuilds, ()) {
  const int world = *gen_world(16);
  const RealizeOptions options{.moe = true, .raw_foreign = *rc::gen::arbitrary<bool>(),
                               .require_moe = *rc::gen::arbitrary<bool>()};
  const nlohmann::json spec = *gen_model_spec(world, options, /*trap_motif=*/*rc::gen::arbitrary<bool>());
  const BuiltModel built = build(spec);
  RC_ASSERT(built.spec.at("layers").size() == spec.at("layers").size());
}

}  // namespace
}  // namespace zero3
