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

// One rank's running totals of its parameters by status. Each transition moves one parameter
// between them (`move`), so no change ever recounts every parameter; a change checks the totals
// only against the parameter it moves (`totals_problem`), and the step boundary recounts them all.
struct StatusTotals {
  int64_t inflight_params = 0;
  int64_t inflight_elements = 0;  // elements of issued gathers not yet completed
  int64_t available_params = 0;
  int64_t live_elements = 0;      // elements of AVAILABLE parameters: what is gathered now
  void move(ParamStatus from, ParamStatus to, int64_t numel);
};

// What is wrong with `totals` holding a parameter of `numel` elements in `status`: a total below
// zero, elements counted with no parameter to hold them, or `status` not counting the parameter.
// Empty when nothing is (no allocation then: it runs at every transition).
std::string totals_problem(const StatusTotals& totals, ParamStatus status, int64_t numel);

}  // namespace zero3
