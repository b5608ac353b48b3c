// Failure kinds for reports (see failure_kind.h).
#include "tools/runs/failure_kind.h"

#include "core/base/errors.h"
#include "sim/fault_plan.h"

namespace zero3 {

int failure_exit_code(const std::exception& error) {
  const auto* typed = dynamic_cast<const Zero3Error*>(&error);
  return typed ? typed->exit_code() : kExitCorrectness;
}

std::string exit_class_name(int exit_code) {
  switch (exit_code) {
    case kExitOk: return "ok";
    case kExitBadInput: return "bad_input";
    case kExitCorrectness: return "correctness";
    case kExitLiveness: return "liveness";
    case kExitBackend: return "backend";
  }
  return "exit_" + std::to_string(exit_code);
}

std::string failure_kind(const std::exception& error) {
  // Subclasses before the classes they refine.
  if (dynamic_cast<const DeadlockError*>(&error)) return "deadlock";
  if (dynamic_cast<const CollectiveMismatchError*>(&error)) return "collective_mismatch";
  if (dynamic_cast<const PeerFailureError*>(&error)) return "peer_failure";
  if (dynamic_cast<const RankCrashedError*>(&error)) return "rank_crashed";
  if (dynamic_cast<const LivenessError*>(&error)) return "liveness";
  if (dynamic_cast<const OutOfMemoryError*>(&error)) return "out_of_memory";
  if (dynamic_cast<const BackendError*>(&error)) return "backend";
  if (dynamic_cast<const ShapeError*>(&error)) return "shape";
  if (dynamic_cast<const HostAccessError*>(&error)) return "host_access";
  if (dynamic_cast<const CorrectnessError*>(&error)) return "correctness";
  if (dynamic_cast<const InputError*>(&error)) return "bad_input";
  return "internal";
}

}  // namespace zero3
