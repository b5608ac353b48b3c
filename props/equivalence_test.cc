// Properties 1, 2 and 6 over generated cases: ZeRO-3 equals the DDP reference bit for bit on
// every SPMD case; no case ever fails silently under the default placeholder policy; and the
// same case run twice gives the same event log.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "props/generators.h"
#include "props/properties.h"

namespace zero3 {
namespace {

void assert_verdict(const Verdict& verdict) {
  if (!verdict.ok) RC_FAIL(verdict.message);
}

RC_GTEST_PROP(Zero3Equivalence, EqualsTheDdpReferenceBitForBitOnEverySpmdModelAndConfig, ()) {
  const FuzzCase fuzz_case = *gen_spmd_case({.max_ranks = 16});
  RC_TAG(fuzz_case.world == 1 ? "W=1" : fuzz_case.world <= 4 ? "W=2..4" : "W>4");
  assert_verdict(check_equivalence(fuzz_case));
}

RC_GTEST_PROP(NoSilentFailure, EveryRunEqualsTheReferenceOrEndsInASpecificError, ()) {
  const FuzzCase fuzz_case = *gen_any_case({.max_ranks = 16});
  const ClassifiedRun run = classify_run(fuzz_case);
  RC_TAG(run_outcome_name(run.outcome));
  assert_verdict(no_silent_failure_verdict(run));
}

RC_GTEST_PROP(Determinism, TheSameCaseTwiceGivesTheSameEventLogHash, ()) {
  assert_verdict(check_determinism(*gen_any_case({.max_ranks = 16})));
}

}  // namespace
}  // namespace zero3
