// The legal-transition table of the parameter lifecycle, and the running totals by status.
#include "core/zero3/param_status.h"

#include "core/base/errors.h"

namespace zero3 {

const char* param_status_name(ParamStatus status) {
  switch (status) {
    case ParamStatus::not_available: return "NOT_AVAILABLE";
    case ParamStatus::inflight: return "INFLIGHT";
    case ParamStatus::available: return "AVAILABLE";
  }
  return "UNKNOWN";
}

bool is_legal_transition(ParamStatus from, ParamStatus to) {
  // Rows: from; columns: to (NOT_AVAILABLE, INFLIGHT, AVAILABLE).
  static constexpr bool kLegal[3][3] = {
      {false, true, false},  // NOT_AVAILABLE → INFLIGHT: a gather is issued
      {false, false, true},  // INFLIGHT → AVAILABLE: the gather completed and was waited
      {true, false, false},  // AVAILABLE → NOT_AVAILABLE: released
  };
  return kLegal[static_cast<int>(from)][static_cast<int>(to)];
}

void transition(ParamStatus& status, ParamStatus to, const TransitionSite& site) {
  if (!is_legal_transition(status, to)) {
    throw CorrectnessError(std::string("illegal parameter transition ") + param_status_name(status) + " -> " +
                           param_status_name(to) + " of '" + site.param + "' on rank " + std::to_string(site.rank) +
                           " at step " + std::to_string(site.step) + " in module '" + site.module + "'");
  }
  status = to;
}

void StatusTotals::move(ParamStatus from, ParamStatus to, int64_t numel) {
  if (from == ParamStatus::inflight) {
    --inflight_params;
    inflight_elements -= numel;
  }
  if (from == ParamStatus::available) {
    --available_params;
    live_elements -= numel;
  }
  if (to == ParamStatus::inflight) {
    ++inflight_params;
    inflight_elements += numel;
  }
  if (to == ParamStatus::available) {
    ++available_params;
    live_elements += numel;
  }
}

namespace {

// One status's pair of totals against a parameter of `numel` elements that is (`holds`) or is not
// in that status; "" when they agree.
std::string pair_problem(const char* name, int64_t params, int64_t elements, bool holds, int64_t numel) {
  std::string problem;
  if (params < 0 || elements < 0) {
    problem = "below zero";
  } else if (params == 0 && elements != 0) {
    // A zero-sized parameter counts a parameter with no elements; elements with no parameter, never.
    problem = "elements with no parameter";
  } else if (holds && (params < 1 || elements < numel)) {
    problem = "they do not count this parameter's " + std::to_string(numel) + " elements";
  } else {
    return problem;
  }
  return std::string(name) + " totals " + std::to_string(params) + " parameters, " + std::to_string(elements) +
         " elements: " + problem;
}

}  // namespace

std::string totals_problem(const StatusTotals& totals, ParamStatus status, int64_t numel) {
  std::string problem = pair_problem("in-flight", totals.inflight_params, totals.inflight_elements,
                                     status == ParamStatus::inflight, numel);
  if (problem.empty()) {
    problem = pair_problem("live", totals.available_params, totals.live_elements,
                           status == ParamStatus::available, numel);
  }
  return problem;
}

}  // namespace zero3
