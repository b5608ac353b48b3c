// Recording a trace from a training run on the simulator (`zero3 train --record FILE`).
//
// The events come from re-running the same model, seed, data and config with the DDP reference on
// the same ranks, its module hooks wrapped by a recorder: the reference computes exactly what
// ZeRO-3 computes (bit for bit, README.md "Design"), so data-dependent routing is the same, and
// it records complete steps even when the ZeRO-3 run itself hangs on a rank-divergent collective.
// The collective log comes from the ZeRO-3 run's own event log. The run section is written too,
// so the trace also replays functionally.
//
//   const DistributedRunResult result = run_distributed(options);
//   write_trace(path, record_training_trace(options, result.sim.event_log()));
#pragma once
#include <nlohmann/json.hpp>

#include "sim/distributed_training.h"
#include "traces/format/trace.h"

namespace zero3 {

Trace record_training_trace(const DistributedRunOptions& options, const nlohmann::json& zero3_event_log);

// The collectives of one rank's simulator event log (Recorder::to_json()["ranks"][rank]).
std::vector<TraceCollective> collectives_from_event_log(const nlohmann::json& rank_events);

}  // namespace zero3
