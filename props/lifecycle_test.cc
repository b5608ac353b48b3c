// Property 3: the parameter lifecycle invariants (lifecycle_checker.h) hold on every rank at every
// hook of every generated SPMD case; and the checker itself notices broken invariants.
#include "props/lifecycle_checker.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "core/models/model_zoo.h"
#include "props/generators.h"
#include "props/properties.h"

namespace zero3 {
namespace {

RC_GTEST_PROP(Lifecycle, InvariantsHoldAtEveryHookOnEveryRank, ()) {
  const Verdict verdict = check_lifecycle(*gen_spmd_case({.max_ranks = 8}));
  if (!verdict.ok) RC_FAIL(verdict.message);
}

TEST(LifecycleChecker, FlagsATransitionThatDoesNotStartWhereTheLastOneEnded) {
  const BuiltModel built = build_model("mlp-tiny", {});
  LifecycleChecker checker(TrainConfig{}, 0);
  const Parameter& param = *built.model->parameters().front();
  checker.on_transition(param, ParamStatus::not_available, ParamStatus::inflight, "layers.0");
  EXPECT_TRUE(checker.violations().empty());
  checker.on_transition(param, ParamStatus::available, ParamStatus::not_available, "layers.0");
  ASSERT_EQ(checker.violations().size(), 1u);
  EXPECT_NE(checker.violations().front().find("without an event"), std::string::npos);
}

TEST(LifecycleChecker, FlagsAnIllegalTransition) {
  const BuiltModel built = build_model("mlp-tiny", {});
  LifecycleChecker checker(TrainConfig{}, 0);
  checker.on_transition(*built.model->parameters().front(), ParamStatus::not_available, ParamStatus::available,
                        "layers.0");
  ASSERT_EQ(checker.violations().size(), 1u);
  EXPECT_NE(checker.violations().front().find("illegal transition NOT_AVAILABLE -> AVAILABLE"), std::string::npos);
}

}  // namespace
}  // namespace zero3
