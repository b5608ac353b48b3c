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

// Between hooks too: a gather that takes the non-persistent live elements past max_live + the
// largest fetch unit is flagged at the transition, and releasing first keeps it within.
TEST(LifecycleChecker, FlagsALiveBudgetOvershootAtTheTransitionThatCausesIt) {
  const BuiltModel built = build_model("mlp-tiny", {});
  const std::vector<Parameter*> params = built.model->parameters();
  ASSERT_GE(params.size(), 2u);
  TrainConfig config;
  config.zero.persistence_threshold = 0;
  config.zero.max_live_elements = params[0]->numel();
  LifecycleChecker checker(config, params[1]->numel() - 1);  // the bound is one element short of both
  const auto gather = [&](const Parameter& param) {
    checker.on_transition(param, ParamStatus::not_available, ParamStatus::inflight, "layers.0");
    checker.on_transition(param, ParamStatus::inflight, ParamStatus::available, "layers.0");
  };
  gather(*params[0]);
  checker.on_transition(*params[0], ParamStatus::available, ParamStatus::not_available, "layers.0");
  gather(*params[1]);
  EXPECT_TRUE(checker.violations().empty()) << checker.violations().front();
  gather(*params[0]);
  ASSERT_EQ(checker.violations().size(), 1u);
  EXPECT_NE(checker.violations().front().find("above max_live_elements + the largest fetch unit"), std::string::npos)
      << checker.violations().front();
}

}  // namespace
}  // namespace zero3
