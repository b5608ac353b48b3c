// Property 5: checkpoints round-trip. ZeRO-3 saving at step k on W1 ranks and resuming on W2 equals
// the DDP reference that saved and resumed the same way (and, for W2 = W1, the uninterrupted run);
// the consolidated checkpoint equals the reference's parameters and moments at step k.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "props/generators.h"
#include "props/properties.h"

namespace zero3 {
namespace {

RC_GTEST_PROP(CheckpointRoundTrip, SavingAtStepKOnW1AndResumingOnW2EqualsTheUninterruptedReference, ()) {
  const FuzzCase fuzz_case = *gen_checkpoint_case({.max_ranks = 16});
  RC_TAG(fuzz_case.checkpoint.resume_world == fuzz_case.world ? "same W"
         : fuzz_case.checkpoint.resume_world > fuzz_case.world ? "larger W"
                                                                : "smaller W");
  const Verdict verdict = check_checkpoint_round_trip(fuzz_case);
  if (!verdict.ok) RC_FAIL(verdict.message);
}

}  // namespace
}  // namespace zero3
