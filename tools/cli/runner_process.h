// A differential runner as a child process (tools/zero3py/runners/PROTOCOL.md): started once,
// one JSON line out per request and one line back, its stderr in a log file. Everything that is
// not the protocol — no hello, a line that is not JSON, an answer that does not come, the process
// ending — is a BackendError (exit 4) naming the runner and what it printed: a broken runner is
// never a finding.
//
//   RunnerProcess runner("python -m zero3py.runners --target torch", "torch", "fuzz-out/runner.log", 900);
//   nlohmann::json answer = runner.request({{"case", "/abs/case-1"}}, 660);
#pragma once
#include <string>
#include <sys/types.h>

#include <nlohmann/json.hpp>

namespace zero3 {

class RunnerProcess {
 public:
  // Starts `command` under /bin/sh and waits up to `hello_timeout_s` for its hello line.
  RunnerProcess(const std::string& command, std::string name, std::string log_path, double hello_timeout_s);
  ~RunnerProcess();  // end of stdin, then up to 10 s to exit, then SIGKILL
  RunnerProcess(const RunnerProcess&) = delete;
  RunnerProcess& operator=(const RunnerProcess&) = delete;

  const nlohmann::json& hello() const { return hello_; }
  const std::string& name() const { return name_; }
  // Sends `request` with a fresh "id" and returns the answer carrying that id.
  nlohmann::json request(nlohmann::json request, double timeout_s);

 private:
  [[noreturn]] void fail(const std::string& what) const;
  // The next line of stdout; BackendError at end of file or after `timeout_s`.
  std::string read_line(double timeout_s);
  nlohmann::json read_json_line(double timeout_s);

  std::string name_;
  std::string log_path_;
  pid_t pid_ = -1;
  int to_runner_ = -1;
  int from_runner_ = -1;
  std::string pending_;  // read but not yet a whole line
  nlohmann::json hello_;
  int64_t next_id_ = 1;
};

}  // namespace zero3
