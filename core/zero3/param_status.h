// The lifecycle of one parameter on one rank: NOT_AVAILABLE (only the shard is held) → INFLIGHT
// (a gather was issued) → AVAILABLE (the full value is readable) → NOT_AVAILABLE (released).
// Every transition goes through `transition`, which checks it against the legal-transition table,
// so an engine bug surfaces as an error naming the parameter, rank, step and module instead of as
// a silently wrong value. A zero-sized parameter moves through the same states as any other.
#pragma once
#include <cstdint>
#include <string>

namespace zero3 {

enum class ParamStatus : uint8_t { not_available, inflight, available };
const char* param_status_name(ParamStatus status);

bool is_legal_transition(ParamStatus from, ParamStatus to);

struct TransitionSite {
  std::string param;
  int rank = 0;
  int64_t step = 0;
  std::string module;
};

// Moves `status` to `to`, or throws CorrectnessError naming the illegal transition and its site.
void transition(ParamStatus& status, ParamStatus to, const TransitionSite& site);

}  // namespace zero3
