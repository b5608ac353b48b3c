// Socket plumbing for the ncclUniqueId exchange (tcp_socket.h).
#include "backend_cuda/launch/tcp_socket.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <system_error>

namespace zero3 {

using Clock = std::chrono::steady_clock;

Deadline::Deadline(double timeout_s)
    : end_(Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s))) {}

bool Deadline::passed() const { return Clock::now() >= end_; }

Clock::duration Deadline::left() const { return std::max(end_ - Clock::now(), Clock::duration::zero()); }

int Deadline::poll_ms() const {
  const auto left_ms = std::chrono::ceil<std::chrono::milliseconds>(left()).count();
  return static_cast<int>(std::min<int64_t>(left_ms, 60'000));
}

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close_now();
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

// Linux releases the descriptor even when close() is interrupted, so it is never retried.
void Socket::close_now() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Socket new_tcp_socket(int family) { return Socket(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)); }

int resolve(const std::string& host, int port, AddressList& list) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int status = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  list.reset(status == 0 ? found : nullptr);
  return status;
}

std::string resolve_text(int status) { return status == EAI_SYSTEM ? system_text(errno) : ::gai_strerror(status); }

std::string system_text(int error) { return std::generic_category().message(error); }

bool wait_for(const Socket& socket, short events, const Deadline& deadline) {
  for (;;) {
    pollfd watched{socket.fd(), events, 0};
    const int ready = ::poll(&watched, 1, deadline.poll_ms());
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return true;  // the send or receive that follows names the error
    if (deadline.passed()) return false;
  }
}

// MSG_NOSIGNAL: a peer that went away is an EPIPE to report, not a SIGPIPE that kills the process.
Transfer send_all(const Socket& socket, const char* data, size_t size, const Deadline& deadline, std::string& problem) {
  size_t sent = 0;
  while (sent < size) {
    const ssize_t count = ::send(socket.fd(), data + sent, size - sent, MSG_NOSIGNAL);
    if (count > 0) {
      sent += static_cast<size_t>(count);
    } else if (count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_for(socket, POLLOUT, deadline)) return Transfer::timed_out;
    } else if (count < 0 && errno != EINTR) {
      problem = "send: " + system_text(errno);
      return Transfer::failed;
    }
  }
  return Transfer::complete;
}

Transfer receive_all(const Socket& socket, char* data, size_t size, const Deadline& deadline, std::string& problem) {
  size_t received = 0;
  while (received < size) {
    const ssize_t count = ::recv(socket.fd(), data + received, size - received, 0);
    if (count > 0) {
      received += static_cast<size_t>(count);
    } else if (count == 0) {
      problem = "the connection was closed after " + std::to_string(received) + " of " + std::to_string(size) + " bytes";
      return Transfer::failed;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_for(socket, POLLIN, deadline)) return Transfer::timed_out;
    } else if (errno != EINTR) {
      problem = "recv: " + system_text(errno);
      return Transfer::failed;
    }
  }
  return Transfer::complete;
}

}  // namespace zero3
