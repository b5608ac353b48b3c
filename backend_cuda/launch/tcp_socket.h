// The POSIX socket plumbing under the ncclUniqueId exchange (nccl_id_exchange.h): a descriptor that
// closes itself, a deadline that bounds every wait, and whole-buffer sends and receives on
// non-blocking sockets that survive partial transfers and EINTR. No CUDA, no NCCL.
//
//   const Deadline deadline(5.0);
//   Socket socket = new_tcp_socket(AF_INET);   // non-blocking, close-on-exec
//   ... connect ...
//   std::string problem;
//   if (send_all(socket, bytes, size, deadline, problem) != Transfer::complete) ... problem says why
#pragma once
#include <netdb.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>

namespace zero3 {

// A point in steady time, counted from construction; every poll() waits at most until it.
class Deadline {
 public:
  explicit Deadline(double timeout_s);
  bool passed() const;
  std::chrono::steady_clock::duration left() const;
  // For poll(): rounded up, so that a wait never ends just short of the deadline and spins; capped,
  // since callers check passed() after every wait anyway.
  int poll_ms() const;

 private:
  std::chrono::steady_clock::time_point end_;
};

// Owns one file descriptor and closes it on every path out, exceptions included.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { close_now(); }
  int fd() const { return fd_; }
  bool is_open() const { return fd_ >= 0; }

 private:
  void close_now();
  int fd_ = -1;
};

// A non-blocking, close-on-exec stream socket; not open when socket() failed (errno says why).
Socket new_tcp_socket(int family);

struct AddressListDeleter {
  void operator()(addrinfo* list) const { ::freeaddrinfo(list); }
};
using AddressList = std::unique_ptr<addrinfo, AddressListDeleter>;

// getaddrinfo for a TCP host and numeric port, IPv4 or IPv6; returns its status and fills `list`
// when that is 0. resolve_text turns a status into words (errno's for EAI_SYSTEM).
int resolve(const std::string& host, int port, AddressList& list);
std::string resolve_text(int status);

// The words for an errno value.
std::string system_text(int error);

// Waits until the socket is ready for `events` (POLLIN, POLLOUT) or has an error for the next call
// to report; false when the deadline passed first.
bool wait_for(const Socket& socket, short events, const Deadline& deadline);

enum class Transfer { complete, failed, timed_out };

// The whole buffer or a reason: `problem` names the failed call, or says the peer closed the
// connection after how many bytes. A peer that went away is a failure to report, never a SIGPIPE.
Transfer send_all(const Socket& socket, const char* data, size_t size, const Deadline& deadline, std::string& problem);
Transfer receive_all(const Socket& socket, char* data, size_t size, const Deadline& deadline, std::string& problem);

}  // namespace zero3
