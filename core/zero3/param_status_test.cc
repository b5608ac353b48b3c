// Only the three lifecycle transitions are legal; anything else is an error naming its site. The
// running totals by status move with each transition and say what is wrong when they cannot hold
// a parameter in its status.
#include "core/zero3/param_status.h"

#include <gtest/gtest.h>

#include "core/base/errors.h"

namespace zero3 {
namespace {

TEST(ParamStatus, OnlyGatherCompleteAndReleaseAreLegal) {
  const ParamStatus all[] = {ParamStatus::not_available, ParamStatus::inflight, ParamStatus::available};
  int legal = 0;
  for (ParamStatus from : all) {
    for (ParamStatus to : all) legal += is_legal_transition(from, to) ? 1 : 0;
  }
  EXPECT_EQ(legal, 3);
  EXPECT_TRUE(is_legal_transition(ParamStatus::not_available, ParamStatus::inflight));
  EXPECT_TRUE(is_legal_transition(ParamStatus::inflight, ParamStatus::available));
  EXPECT_TRUE(is_legal_transition(ParamStatus::available, ParamStatus::not_available));
}

TEST(ParamStatus, IllegalTransitionNamesParameterRankStepAndModule) {
  ParamStatus status = ParamStatus::not_available;
  try {
    transition(status, ParamStatus::available, {.param = "h.0.attn.weight", .rank = 3, .step = 7, .module = "h.0.attn"});
    FAIL() << "expected CorrectnessError";
  } catch (const CorrectnessError& error) {
    const std::string text = error.what();
    EXPECT_NE(text.find("NOT_AVAILABLE -> AVAILABLE"), std::string::npos) << text;
    EXPECT_NE(text.find("h.0.attn.weight"), std::string::npos);
    EXPECT_NE(text.find("rank 3"), std::string::npos);
    EXPECT_NE(text.find("step 7"), std::string::npos);
    EXPECT_NE(text.find("'h.0.attn'"), std::string::npos);
  }
  EXPECT_EQ(status, ParamStatus::not_available);
}

// A gathered, then released, 6-element parameter and a zero-sized one: each step's totals count
// both in their statuses, and hold each side of every change.
TEST(StatusTotals, EachTransitionMovesOneParameterAndItsElements) {
  StatusTotals totals;
  const auto move_both = [&](ParamStatus from, ParamStatus to) {
    EXPECT_EQ(totals_problem(totals, from, 6), "");
    EXPECT_EQ(totals_problem(totals, from, 0), "");
    totals.move(from, to, 6);
    totals.move(from, to, 0);
    EXPECT_EQ(totals_problem(totals, to, 6), "");
    EXPECT_EQ(totals_problem(totals, to, 0), "");
  };
  move_both(ParamStatus::not_available, ParamStatus::inflight);
  EXPECT_EQ(totals.inflight_params, 2);
  EXPECT_EQ(totals.inflight_elements, 6);
  move_both(ParamStatus::inflight, ParamStatus::available);
  EXPECT_EQ(totals.inflight_params, 0);
  EXPECT_EQ(totals.inflight_elements, 0);
  EXPECT_EQ(totals.available_params, 2);
  EXPECT_EQ(totals.live_elements, 6);
  move_both(ParamStatus::available, ParamStatus::not_available);
  EXPECT_EQ(totals.available_params, 0);
  EXPECT_EQ(totals.live_elements, 0);
}

TEST(StatusTotals, TotalsThatDoNotCountAParameterInItsStatusAreAProblemNamingThem) {
  const StatusTotals none;
  EXPECT_EQ(totals_problem(none, ParamStatus::available, 6),
            "live totals 0 parameters, 0 elements: they do not count this parameter's 6 elements");
  EXPECT_EQ(totals_problem(none, ParamStatus::inflight, 0),
            "in-flight totals 0 parameters, 0 elements: they do not count this parameter's 0 elements");
  EXPECT_EQ(totals_problem(none, ParamStatus::not_available, 6), "");
}

TEST(StatusTotals, ReleasingWhatWasNeverCountedTakesTheTotalsBelowZeroAndIsAProblem) {
  StatusTotals totals;
  totals.move(ParamStatus::available, ParamStatus::not_available, 6);
  EXPECT_EQ(totals_problem(totals, ParamStatus::not_available, 6),
            "live totals -1 parameters, -6 elements: below zero");
}

TEST(StatusTotals, ElementsCountedWithNoParameterAreAProblem) {
  const StatusTotals stray{.inflight_params = 0, .inflight_elements = 5};
  EXPECT_EQ(totals_problem(stray, ParamStatus::not_available, 6),
            "in-flight totals 0 parameters, 5 elements: elements with no parameter");
}

}  // namespace
}  // namespace zero3
