// The properties every generated case must satisfy, as plain functions of a case, so that the
// RapidCheck tests (props/*_test.cc) and `zero3 fuzz` check exactly the same thing.
//
//   equivalence         SPMD case: ZeRO-3 on W ranks equals the DDP reference bit for bit
//                       (losses, grad norms, parameters, AdamW moments), benign faults included;
//                       under HSDP the reference reduces over the same tree (reference_options).
//   no-silent-failure   any case, default placeholder policy: the run equals the reference or ends
//                       in a specific (typed) error — never a silent mismatch.
//   lifecycle           SPMD case: the LifecycleChecker invariants hold on every rank at every hook.
//   collective-agreement  rank-divergent case: the run ends in a collective mismatch or deadlock
//                       report on every rank (or, if routing happened to agree, equals the
//                       reference), naming the group under HSDP; with the leaf policy it trains
//                       and equals the reference.
//   determinism         any case run twice: the same event-log hash, outcome and final state.
//   checkpoint-round-trip  SPMD case with a CheckpointPlan: ZeRO-3 saving at step k on W1 and
//                       resuming on W2 equals the DDP reference doing the same from its own
//                       checkpoint (and, when W2 = W1, the uninterrupted run); the consolidated
//                       checkpoint equals the reference's parameters and moments at step k.
//   replay-memory       SPMD case, groups included (gen_replay_case): its recorded trace, replayed,
//                       predicts the run's own per-rank peak of every memory category and of
//                       the total, to the byte.
//   fault-tolerance     (props/fault_tolerance.h) SPMD case under a fault plan: equal to the same
//                       case without faults or the fired fault's specific error, and the last
//                       complete checkpoint of a saved series equal to the fault-free run's.
//   device-agreement    SPMD case: the run on the opaque device (the simulator's stand-in for a
//                       GPU) equals the run on cpu bit for bit. Every other property compares
//                       runs on one device, so a device's own error (a bf16 write-back rounding
//                       differently) would pass them all.
//
//   Verdict verdict = check_equivalence(*gen_spmd_case({}));
//   RC_ASSERT(verdict.ok);
#pragma once
#include <string>

#include "props/fuzz_case.h"

namespace zero3 {

struct Verdict {
  bool ok = true;
  std::string message{};  // why not: the root cause or the first differences
  // The harness itself threw while judging: a failure, but not evidence about the engine, so an
  // injection is never credited with it (the fuzzer sets this, properties do not).
  bool harness_error = false;
};

Verdict check_equivalence(const FuzzCase& fuzz_case);
Verdict check_no_silent_failure(const FuzzCase& fuzz_case);
Verdict check_lifecycle(const FuzzCase& fuzz_case);
Verdict check_collective_agreement(const FuzzCase& fuzz_case);
Verdict check_determinism(const FuzzCase& fuzz_case);
Verdict check_checkpoint_round_trip(const FuzzCase& fuzz_case);
Verdict check_replay_memory(const FuzzCase& fuzz_case);
Verdict check_device_agreement(const FuzzCase& fuzz_case);

// How one ZeRO-3 run of a case ended, against the DDP reference.
enum class RunOutcome : uint8_t {
  equal,            // completed, bitwise equal to the reference
  specific_error,   // ended in a typed error (Zero3Error): named, exit code 1-4
  silent_mismatch,  // completed, but differs from the reference
  unspecific_error, // ended in an internal assertion or an untyped exception
};
const char* run_outcome_name(RunOutcome outcome);
struct ClassifiedRun {
  RunOutcome outcome = RunOutcome::equal;
  std::string detail;
  // Reads of a parameter that was not available through a raw handle, over every rank (the engine
  // reports each before its placeholder policy answers): 0 means the trap was never reached.
  int64_t placeholder_reads = 0;
};
ClassifiedRun classify_run(const FuzzCase& fuzz_case);
// check_no_silent_failure's verdict on an already classified run.
Verdict no_silent_failure_verdict(const ClassifiedRun& run);

}  // namespace zero3
