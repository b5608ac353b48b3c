// The engine's phase table: a step's calls in their order are legal and come back to
// BETWEEN_STEPS; anything else is an error naming the call, the phase, the rank and the step.
#include "core/zero3/engine_phase.h"

#include <gtest/gtest.h>

#include "core/base/errors.h"

namespace zero3 {
namespace {

EnginePhase run(EnginePhase phase, std::initializer_list<EngineCall> calls) {
  for (EngineCall call : calls) phase = phase_after(phase, call, 0, 0);
  return phase;
}

TEST(EnginePhase, AStepWithGradientAccumulationRunsThroughEveryPhase) {
  using enum EngineCall;
  EnginePhase phase = run(EnginePhase::between_steps, {load_shard_state, begin_step});
  EXPECT_EQ(phase, EnginePhase::in_step);
  for (int micro = 0; micro < 2; ++micro) {
    phase = run(phase, {begin_micro_step, pre_forward, checked_access, post_forward, record_micro_loss, begin_backward,
                        pre_backward, pre_forward, post_forward, post_backward, end_micro_step});
    EXPECT_EQ(phase, EnginePhase::in_step);
  }
  EXPECT_EQ(run(phase, {end_step}), EnginePhase::step);
  EXPECT_EQ(run(EnginePhase::between_steps, {gather_full_state}), EnginePhase::between_steps);
}

TEST(EnginePhase, BetweenStepsOnlyAStepOrACheckpointCallIsLegal) {
  int legal = 0;
  for (int call = 0; call <= static_cast<int>(EngineCall::gather_full_state); ++call) {
    legal += is_legal_call(EnginePhase::between_steps, static_cast<EngineCall>(call)) ? 1 : 0;
  }
  EXPECT_EQ(legal, 3);
  EXPECT_TRUE(is_legal_call(EnginePhase::between_steps, EngineCall::begin_step));
  EXPECT_FALSE(is_legal_call(EnginePhase::in_step, EngineCall::begin_step));
  EXPECT_FALSE(is_legal_call(EnginePhase::forward, EngineCall::pre_backward));
  EXPECT_FALSE(is_legal_call(EnginePhase::step, EngineCall::begin_step));
}

TEST(EnginePhase, AnIllegalCallNamesTheCallThePhaseTheRankAndTheStep) {
  try {
    phase_after(EnginePhase::forward, EngineCall::begin_step, 1, 3);
    FAIL() << "expected CorrectnessError";
  } catch (const CorrectnessError& error) {
    EXPECT_PRED_FORMAT2(testing::IsSubstring, "illegal engine call begin_step() in phase FORWARD on rank 1 at step 3",
                        error.what());
  }
}

TEST(EnginePhase, CollectivesKeepTheirPhaseLabels) {
  EXPECT_STREQ(engine_phase_label(EnginePhase::forward), "forward");
  EXPECT_STREQ(engine_phase_label(EnginePhase::backward), "backward");
  EXPECT_STREQ(engine_phase_label(EnginePhase::step), "step");
}

}  // namespace
}  // namespace zero3
