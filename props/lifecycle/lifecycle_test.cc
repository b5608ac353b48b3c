// Property 3: the parameter lifecycle invariants (lifecycle_checker.h) hold on every rank at every
// hook of every generated SPMD case; and the checker itself notices broken invariants.
#include "props/lifecycle/lifecycle_checker.h"

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

ModelFacts facts_with_fetch_unit(int64_t elements) {
  ModelFacts facts;
  facts.fetch_unit_elements_max = elements;
  return facts;
}

TEST(LifecycleChecker, FlagsATransitionThatDoesNotStartWhereTheLastOneEnded) {
  const BuiltModel built = build_model("mlp-tiny", {});
  LifecycleChecker checker(TrainConfig{}, facts_with_fetch_unit(0));
  const Parameter& param = *built.model->parameters().front();
  checker.on_transition(param, ParamStatus::not_available, ParamStatus::inflight, "layers.0");
  EXPECT_TRUE(checker.violations().empty());
  checker.on_transition(param, ParamStatus::available, ParamStatus::not_available, "layers.0");
  ASSERT_EQ(checker.violations().size(), 1u);
  EXPECT_NE(checker.violations().front().find("without an event"), std::string::npos);
}

TEST(LifecycleChecker, FlagsAnIllegalTransition) {
  const BuiltModel built = build_model("mlp-tiny", {});
  LifecycleChecker checker(TrainConfig{}, facts_with_fetch_unit(0));
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
  LifecycleChecker checker(config, facts_with_fetch_unit(params[1]->numel() - 1));  // the bound is one element short of both
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

// A gather issued during another module's work, and still INFLIGHT there, was issued ahead.
TEST(LifecycleChecker, CountsAGatherStillInflightWhenAnotherModuleActsAsIssuedAhead) {
  const BuiltModel built = build_model("mlp-tiny", {});
  const std::vector<Parameter*> params = built.model->parameters();
  LifecycleChecker checker(TrainConfig{}, facts_with_fetch_unit(0));
  checker.on_transition(*params[0], ParamStatus::not_available, ParamStatus::inflight, "layers.0");
  checker.on_transition(*params[0], ParamStatus::inflight, ParamStatus::available, "<gather>");
  EXPECT_EQ(checker.gathers_seen_ahead(), 0);  // its own module's gather, completed at once
  checker.on_transition(*params[2], ParamStatus::not_available, ParamStatus::inflight, "layers.0");
  checker.on_transition(*params[0], ParamStatus::available, ParamStatus::not_available, "layers.2");
  EXPECT_EQ(checker.gathers_seen_ahead(), 1);
  EXPECT_TRUE(checker.violations().empty()) << checker.violations().front();
}

// gpt-tiny on 2 ranks for 3 steps with every budget large enough to prefetch: the clean engine
// passes the lifecycle property with gathers seen ahead; with prefetch silently off, or with
// parameters never released after their module, the same property fails and says why.
FuzzCase prefetching_case() {
  FuzzCase fuzz_case;
  fuzz_case.model_spec = builtin_model_spec("gpt-tiny");
  fuzz_case.world = 2;
  fuzz_case.seed = 3;
  fuzz_case.steps = 3;
  fuzz_case.config.zero.persistence_threshold = 0;
  fuzz_case.config.zero.max_reuse_distance = 0;
  return fuzz_case;
}

TEST(LifecycleProperty, FailsAnEngineWhosePrefetchIsSilentlyOffOrThatNeverReleases) {
  EXPECT_TRUE(check_lifecycle(prefetching_case()).ok) << check_lifecycle(prefetching_case()).message;
  FuzzCase no_prefetch = prefetching_case();
  no_prefetch.inject = {"prefetch-silently-off"};
  const Verdict off = check_lifecycle(no_prefetch);
  EXPECT_FALSE(off.ok);
  EXPECT_NE(off.message.find("prefetch is silently off"), std::string::npos) << off.message;
  FuzzCase hoarding = prefetching_case();
  hoarding.inject = {"never-release"};
  const Verdict kept = check_lifecycle(hoarding);
  EXPECT_FALSE(kept.ok);
  EXPECT_NE(kept.message.find("is still AVAILABLE after the post-forward"), std::string::npos) << kept.message;
}

}  // namespace
}  // namespace zero3
