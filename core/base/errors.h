// Typed errors for everything that can go wrong in operation, each with its CLI exit code
// (README.md: 1 bad input, 2 correctness, 3 liveness, 4 backend). Programmer errors use
// ZERO3_CHECK, which names the failed expression and where it is.
#pragma once
#include <stdexcept>
#include <string>

namespace zero3 {

enum ExitCode : int {
  kExitOk = 0,
  kExitBadInput = 1,
  kExitCorrectness = 2,
  kExitLiveness = 3,
  kExitBackend = 4,
};

class Zero3Error : public std::runtime_error {
 public:
  Zero3Error(const std::string& message, int exit_code) : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// Bad model spec, config, trace, checkpoint or flag. The message names the file, the JSON path and
// what was expected.
class InputError : public Zero3Error {
 public:
  explicit InputError(const std::string& message) : Zero3Error(message, kExitBadInput) {}
};

// Operands whose shapes do not fit the op.
class ShapeError : public Zero3Error {
 public:
  explicit ShapeError(const std::string& message) : Zero3Error(message, kExitCorrectness) {}
};

// A result differs from its oracle, or a use of a parameter would silently compute garbage.
class CorrectnessError : public Zero3Error {
 public:
  explicit CorrectnessError(const std::string& message) : Zero3Error(message, kExitCorrectness) {}
};

// Host code read or wrote the memory of a device tensor (opaque or cuda) directly instead of going
// through the Kernels seam: on a GPU that would be an invalid host dereference of device memory.
class HostAccessError : public CorrectnessError {
 public:
  explicit HostAccessError(const std::string& message) : CorrectnessError(message) {}
};

// Collective mismatch, deadlock or peer failure: real NCCL would hang here.
class LivenessError : public Zero3Error {
 public:
  explicit LivenessError(const std::string& message) : Zero3Error(message, kExitLiveness) {}
};

// Ranks issued different collectives (op, dtype, count, root or reduce op) at one sequence number.
// The message lists every rank's call with its CallSite.
// ranks_at_different_modules says the calls came from different modules: the ranks ran different
// modules, most often because the data chose them (MoE routing), and the CLI names the remedy.
class CollectiveMismatchError : public LivenessError {
 public:
  explicit CollectiveMismatchError(const std::string& message, bool ranks_at_different_modules = false)
      : LivenessError(message), ranks_at_different_modules_(ranks_at_different_modules) {}
  bool ranks_at_different_modules() const { return ranks_at_different_modules_; }

 private:
  bool ranks_at_different_modules_;
};

// Every live rank waits in a collective that can no longer complete. The message lists what each
// rank waits on and its last completed collectives.
class DeadlockError : public LivenessError {
 public:
  explicit DeadlockError(const std::string& message) : LivenessError(message) {}
};

// Another rank crashed, threw or aborted while this rank needed it for a collective.
class PeerFailureError : public LivenessError {
 public:
  PeerFailureError(const std::string& message, int failed_rank) : LivenessError(message), failed_rank_(failed_rank) {}
  int failed_rank() const { return failed_rank_; }

 private:
  int failed_rank_;
};

// An allocation that the (possibly fault-injecting) allocator refused.
class OutOfMemoryError : public Zero3Error {
 public:
  explicit OutOfMemoryError(const std::string& message) : Zero3Error(message, kExitBackend) {}
};

// CUDA, NCCL or a missing device.
class BackendError : public Zero3Error {
 public:
  explicit BackendError(const std::string& message) : Zero3Error(message, kExitBackend) {}
};

[[noreturn]] void check_failed(const char* expression, const char* file, int line, const std::string& detail);

}  // namespace zero3

// Programmer-error assertion: always on, prints the expression, file:line and an optional detail.
#define ZERO3_CHECK(condition, ...)                                                         \
  do {                                                                                      \
    if (!(condition)) ::zero3::check_failed(#condition, __FILE__, __LINE__, std::string(__VA_ARGS__)); \
  } while (0)
