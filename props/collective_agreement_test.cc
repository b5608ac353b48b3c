// Property 4, collective agreement: a rank-divergent model (MoE routing that differs by rank)
// ends in a collective mismatch or deadlock report on every rank — never a hang, never a silently
// corrupted state — and with the leaf-module policy it trains and equals the DDP reference.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "props/generators.h"
#include "props/properties.h"

namespace zero3 {
namespace {

RC_GTEST_PROP(CollectiveAgreement, DivergentRanksGetAReportAndTheLeafPolicyMakesThemEqual, ()) {
  const Verdict verdict = check_collective_agreement(*gen_divergent_case({.max_ranks = 8}));
  if (!verdict.ok) RC_FAIL(verdict.message);
}

}  // namespace
}  // namespace zero3
