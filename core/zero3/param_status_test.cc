// Only the three lifecycle transitions are legal; anything else is an error naming its site.
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

}  // namespace
}  // namespace zero3
