// How a failed run is named in its JSON report: the exit code main() returns, its class from
// the README's exit codes, and a kind from the error's type, so CI can tell a deadlock from an OOM.
#pragma once
#include <exception>
#include <string>

namespace zero3 {

// The code main() exits with for this error: a Zero3Error's own, correctness (2) for any other.
int failure_exit_code(const std::exception& error);
// "ok", "bad_input", "correctness", "liveness" or "backend": the README's exit codes 0 to 4.
std::string exit_class_name(int exit_code);
// The most specific type: "deadlock", "collective_mismatch", "peer_failure", "rank_crashed",
// "liveness", "out_of_memory", "backend", "shape", "correctness", "bad_input", or "internal".
std::string failure_kind(const std::exception& error);

}  // namespace zero3
