// The parts of the trace reader that live in their own files: per-rank event validation
// (trace_validation.cc) and the collective log and functional sections (trace_sections.cc).
#pragma once
#include <string>

#include "core/base/json_reader.h"
#include "traces/format/trace.h"

namespace zero3 {

// Checks rank `rank`'s expansion of `step`: nesting, phases, accesses by the running module.
// `path` is the step's events array ("/steps/3/events").
void validate_step_events(const Trace& trace, const TraceStep& step, const std::string& source,
                          const std::string& path, int rank);
TraceCollective read_collective(const JsonReader& node);
// /model_spec, /run and /expected.
void read_functional_sections(const JsonReader& root, const std::string& source, Trace& trace);

}  // namespace zero3
