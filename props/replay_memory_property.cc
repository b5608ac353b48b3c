// The replay-memory property: a recorded run's trace, replayed, predicts the run's own per-rank
// memory peaks — every category and the total — to the byte (see properties.h).
#include "core/tensor/allocator.h"
#include "props/properties.h"
#include "traces/replay/replay.h"
#include "traces/format/trace_recorder.h"

namespace zero3 {

Verdict check_replay_memory(const FuzzCase& fuzz_case) {
  const DistributedRunOptions options = run_options(fuzz_case);
  const DistributedRunResult run = run_distributed(options);
  if (!run.sim.all_ok()) {
    return {.ok = false, .message = "ZeRO-3 failed where DDP trains, rank " + std::to_string(run.sim.root_cause_rank) +
                                    ": " + run.sim.root_cause()};
  }
  const Trace trace = record_training_trace(options, run.sim.event_log());
  ReplayOptions replay;
  replay.world = fuzz_case.world;
  replay.config = fuzz_case.config;
  const ShapeReplayResult result = replay_trace(trace, replay);
  if (result.failure) {
    return {.ok = false, .message = "the replay of the recorded run failed: " + result.failure->message};
  }
  // A full replay simulates every rank; a symmetric one simulates rank 0 for all of them, and in an
  // SPMD run every rank holds the same (shards are padded to one size), so each is held to it.
  for (int measured_rank = 0; measured_rank < fuzz_case.world; ++measured_rank) {
    const bool symmetric = result.ranks.size() == 1;
    const RankReplay& rank = result.ranks[symmetric ? 0 : static_cast<size_t>(measured_rank)];
    const RankMemory& measured = run.memory[static_cast<size_t>(measured_rank)];
    const auto mismatch = [&](const std::string& what, const PeakMoment& predicted, int64_t actual) -> Verdict {
      return {.ok = false,
              .message = "rank " + std::to_string(measured_rank) + " " + what + ": the replay predicts a peak of " +
                         std::to_string(predicted.bytes) + " bytes (step " + std::to_string(predicted.step) + ", " +
                         predicted.phase + (predicted.module.empty() ? "" : " in '" + predicted.module + "'") +
                         "), the run measured " + std::to_string(actual) + " (" + result.simulation + " replay)"};
    };
    for (int category = 0; category < kMemoryCategoryCount; ++category) {
      const PeakMoment& predicted = rank.peaks[static_cast<size_t>(category)];
      const int64_t actual = measured.peak_bytes[static_cast<size_t>(category)];
      if (predicted.bytes != actual) {
        return mismatch(memory_category_name(static_cast<MemoryCategory>(category)), predicted, actual);
      }
    }
    if (rank.peak_total.bytes != measured.peak_total_bytes) {
      return mismatch("total", rank.peak_total, measured.peak_total_bytes);
    }
  }
  return {};
}

}  // namespace zero3
