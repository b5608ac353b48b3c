// The replay-memory property over generated cases: what `zero3 replay` predicts for a recorded run
// is what the run measured, per rank, in every memory category and in total.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "props/generators.h"
#include "props/properties.h"

namespace zero3 {
namespace {

RC_GTEST_PROP(ReplayMemory, ARecordedRunReplaysToItsOwnPerRankPeaksOnEverySpmdModelAndConfig, ()) {
  const FuzzCase fuzz_case = *gen_replay_case({.max_ranks = 16});
  const Verdict verdict = check_replay_memory(fuzz_case);
  if (!verdict.ok) RC_FAIL(verdict.message);
}

}  // namespace
}  // namespace zero3
