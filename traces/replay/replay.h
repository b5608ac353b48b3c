// Shape replay of a trace through the ZeRO-3 engine (`zero3 replay`): the model's parameters are
// meta tensors, so nothing is computed or moved, but every fetch, release, bucket and collective
// happens as in training, timed by the cost model, and every byte is accounted.
//
// Two simulations, chosen by the trace (README.md, "Design"):
//   - symmetric: an SPMD trace (every rank runs the same events) replays ONE representative rank
//     over a SymmetricCommunicator of world W. Every rank is assumed to issue the same collectives,
//     which the identical events guarantee, so GPT-3 at 1024 ranks costs one engine, not 1024.
//   - full: a rank-divergent trace (per-rank groups, e.g. MoE routing) runs on a SimWorld, where
//     mismatched collectives and deadlocks are found and reported with each rank's call and
//     module. Ranks with identical event streams run the same program (the engine's decisions
//     depend on the events and W, not on the rank's number), so each such group runs once, as a
//     fiber with its own engine at world W, and every rank of the group reports its results:
//     Mixtral's two routings at 1024 ranks cost two engines, not 1024. `full_simulation` forces
//     this path for SPMD traces; `share_identical_ranks = false` gives every rank its own fiber,
//     which is how the tests check that sharing changes nothing.
//
//   ReplayOptions options{.world = 1024};
//   ShapeReplayResult result = replay_trace(load_trace("traces/models/gpt3-175b.json"), options);
//   nlohmann::json report = replay_report(trace, options, result);
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/training/train_config.h"
#include "sim/hardware_profile.h"
#include "traces/replay/kernel_rates.h"
#include "traces/replay/replay_driver.h"
#include "traces/format/trace.h"

namespace zero3 {

struct ReplayOptions {
  int world = 0;  // 0: the trace's recorded world, else 1
  TrainConfig config;
  HardwareProfile hardware{};
  KernelRates kernel_rates{};  // the profile's (HardwareChoice::kernel_rates); none: flops alone
  bool full_simulation = false;
  bool share_identical_ranks = true;  // full simulation: one fiber per group of identical ranks
  // Called after every replayed step of rank 0 (steps done, steps in all).
  std::function<void(int64_t, int64_t)> on_progress;
};

// A collective failure that real NCCL would hang on (or an error that ended a rank).
struct ReplayFailure {
  std::string kind{};  // collective_mismatch, deadlock, peer_failure, out_of_memory, error
  std::string message{};
  int exit_code = 0;
};

struct ShapeReplayResult {
  std::string simulation{};  // "symmetric" or "full"
  int world = 1;
  int64_t steps = 0;
  std::vector<RankReplay> ranks{};                          // every rank; one (rank 0) when symmetric
  std::vector<std::vector<TraceCollective>> collectives{};  // by rank; empty where a rank shares a simulation
  std::optional<ReplayFailure> failure{};
  std::vector<Finding> findings{};                          // every rank's, then cross-rank ones
  int exit_code() const;                                  // 0, 2 (correctness) or 3 (liveness)
  // The rank that was simulated for `rank` (itself, or the one it shares with): its timeline.
  const RankReplay& simulated(const RankReplay& rank) const;
  const std::vector<TraceCollective>& collectives_of(const RankReplay& rank) const;
};

// The world a replay runs at: `requested`, else the trace's recorded world, else 1.
int replay_world(const Trace& trace, int requested);
ShapeReplayResult replay_trace(const Trace& trace, const ReplayOptions& options);

}  // namespace zero3
