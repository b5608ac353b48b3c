// The legal-transition table of the parameter lifecycle.
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

}  // namespace zero3
