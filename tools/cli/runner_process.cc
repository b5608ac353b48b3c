// The runner child process (runner_process.h).
#include "tools/cli/runner_process.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <poll.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "core/base/errors.h"

namespace zero3 {

namespace {

std::string file_tail(const std::string& path, size_t bytes) {
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.size() > bytes ? "..." + text.substr(text.size() - bytes) : text;
}

}  // namespace

RunnerProcess::RunnerProcess(const std::string& command, std::string name, std::string log_path,
                             double hello_timeout_s)
    : name_(std::move(name)), log_path_(std::move(log_path)) {
  int in_pipe[2], out_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0 || ::pipe2(out_pipe, O_CLOEXEC) != 0) {
    throw BackendError("runner '" + name_ + "': pipe: " + std::strerror(errno));
  }
  const int log = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log < 0) throw BackendError("runner '" + name_ + "': cannot write its log " + log_path_ + ": " + std::strerror(errno));
  pid_ = ::fork();
  if (pid_ == 0) {
    ::dup2(in_pipe[0], 0);
    ::dup2(out_pipe[1], 1);
    ::dup2(log, 2);
    ::setpgid(0, 0);  // its own process group: the ranks it starts are killed with it
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(log);
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  if (pid_ < 0) throw BackendError("runner '" + name_ + "': fork: " + std::strerror(errno));
  to_runner_ = in_pipe[1];
  from_runner_ = out_pipe[0];
  hello_ = read_json_line(hello_timeout_s);
  if (hello_.value("status", "") == "error") fail("cannot start: " + hello_.value("message", hello_.dump()));
  if (hello_.value("hello", "") != "zero3-runner" || hello_.value("protocol", 0) != 1) {
    fail("did not say hello (protocol 1) but: " + hello_.dump());
  }
}

RunnerProcess::~RunnerProcess() {
  if (to_runner_ >= 0) ::close(to_runner_);
  if (pid_ > 0) {
    int status = 0;
    for (int tries = 0; tries < 100; ++tries) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (pid_ > 0) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
    }
  }
  if (from_runner_ >= 0) ::close(from_runner_);
}

void RunnerProcess::fail(const std::string& what) const {
  throw BackendError("the runner '" + name_ + "' " + what + "\n  its log (" + log_path_ + ") ends:\n" +
                     file_tail(log_path_, 2000));
}

std::string RunnerProcess::read_line(double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    const size_t newline = pending_.find('\n');
    if (newline != std::string::npos) {
      std::string line = pending_.substr(0, newline);
      pending_.erase(0, newline + 1);
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      return line;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) fail("gave no answer within " + std::to_string(static_cast<int>(timeout_s)) + " s");
    pollfd readable{.fd = from_runner_, .events = POLLIN, .revents = 0};
    const int ready = ::poll(&readable, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) fail(std::string("could not be read: ") + std::strerror(errno));
    if (ready <= 0) continue;
    char chunk[65536];
    const ssize_t got = ::read(from_runner_, chunk, sizeof(chunk));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) fail("ended" + (pending_.empty() ? std::string() : " after printing: " + pending_.substr(0, 500)));
    pending_.append(chunk, static_cast<size_t>(got));
  }
}

nlohmann::json RunnerProcess::read_json_line(double timeout_s) {
  const std::string line = read_line(timeout_s);
  try {
    nlohmann::json parsed = nlohmann::json::parse(line);
    if (!parsed.is_object()) fail("printed a line that is not a JSON object: " + line.substr(0, 500));
    return parsed;
  } catch (const nlohmann::json::parse_error&) {
    fail("printed a line that is not JSON: " + line.substr(0, 500));
  }
}

nlohmann::json RunnerProcess::request(nlohmann::json request, double timeout_s) {
  const int64_t id = next_id_++;
  request["id"] = id;
  const std::string line = request.dump() + "\n";
  ::signal(SIGPIPE, SIG_IGN);  // a runner that died answers EPIPE here, reported below
  for (size_t sent = 0; sent < line.size();) {
    const ssize_t wrote = ::write(to_runner_, line.data() + sent, line.size() - sent);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) fail(std::string("cannot be written to: ") + std::strerror(errno));
    sent += static_cast<size_t>(wrote);
  }
  nlohmann::json answer = read_json_line(timeout_s);
  if (answer.value("id", nlohmann::json()) != nlohmann::json(id)) {
    fail("answered request " + std::to_string(id) + " with: " + answer.dump().substr(0, 1500));
  }
  return answer;
}

}  // namespace zero3
