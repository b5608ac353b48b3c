// The TCP hand-over of the ncclUniqueId (nccl_id_exchange.h): every socket is non-blocking and
// every wait is a poll() bounded by the call's deadline (tcp_socket.h), so no peer can hold a rank
// forever.
#include "backend_cuda/launch/nccl_id_exchange.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "backend_cuda/launch/tcp_socket.h"
#include "core/base/errors.h"

namespace zero3 {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kMagic[8] = {'Z', 'E', 'R', 'O', '3', 'I', 'D', '1'};
constexpr int kHelloBytes = 16;  // magic, rank, world
constexpr int kReplyBytes = static_cast<int>(sizeof(kMagic)) + kNcclIdBytes;
using Hello = std::array<char, kHelloBytes>;
using Reply = std::array<char, kReplyBytes>;

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g s", seconds);
  return text;
}

std::string describe(const IdExchangeAddress& address) {
  const bool ipv6 = address.host.find(':') != std::string::npos;
  std::string text = (ipv6 ? "[" + address.host + "]" : address.host) + ":" + std::to_string(address.port);
  if (!address.origin.empty()) text += " (" + address.origin + ")";
  return text;
}

void put_u32(char* at, uint32_t value) {
  const uint32_t network = htonl(value);
  std::memcpy(at, &network, sizeof(network));
}

int64_t get_u32(const char* at) {
  uint32_t network = 0;
  std::memcpy(&network, at, sizeof(network));
  return ntohl(network);
}

bool starts_with_magic(const char* bytes) { return std::memcmp(bytes, kMagic, sizeof(kMagic)) == 0; }

bool is_loopback_host(const std::string& host) {
  if (host == "localhost") return true;
  in_addr ipv4{};
  if (::inet_pton(AF_INET, host.c_str(), &ipv4) == 1) return (ntohl(ipv4.s_addr) >> 24) == 127;
  in6_addr ipv6{};
  return ::inet_pton(AF_INET6, host.c_str(), &ipv6) == 1 && IN6_IS_ADDR_LOOPBACK(&ipv6);
}

// The address rank 0 binds for one resolved entry: the entry itself for a loopback host, else the
// wildcard of its family (the header says why).
sockaddr_storage bind_address(const addrinfo& entry, bool loopback, int port) {
  sockaddr_storage address{};
  std::memcpy(&address, entry.ai_addr, entry.ai_addrlen);
  if (loopback) return address;
  if (entry.ai_family == AF_INET6) {
    auto* ipv6 = reinterpret_cast<sockaddr_in6*>(&address);
    ipv6->sin6_addr = in6addr_any;
    ipv6->sin6_port = htons(static_cast<uint16_t>(port));
  } else {
    auto* ipv4 = reinterpret_cast<sockaddr_in*>(&address);
    ipv4->sin_addr.s_addr = htonl(INADDR_ANY);
    ipv4->sin_port = htons(static_cast<uint16_t>(port));
  }
  return address;
}

Socket listen_on(const IdExchangeAddress& address) {
  AddressList resolved;
  const int status = resolve(address.host, address.port, resolved);
  if (status != 0) {
    throw BackendError("nccl id exchange: rank 0 cannot resolve its own host " + describe(address) + ": " +
                       resolve_text(status));
  }
  const bool loopback = is_loopback_host(address.host);
  std::string problem = "no address to listen on";
  for (const addrinfo* entry = resolved.get(); entry; entry = entry->ai_next) {
    Socket listener = new_tcp_socket(entry->ai_family);
    if (!listener.is_open()) {
      problem = "socket: " + system_text(errno);
      continue;
    }
    const int yes = 1;
    const int no = 0;
    ::setsockopt(listener.fd(), SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    // The IPv6 wildcard also takes IPv4 peers, whose own resolver may prefer IPv4.
    if (!loopback && entry->ai_family == AF_INET6) ::setsockopt(listener.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof(no));
    const sockaddr_storage local = bind_address(*entry, loopback, address.port);
    if (::bind(listener.fd(), reinterpret_cast<const sockaddr*>(&local), entry->ai_addrlen) != 0) {
      problem = "bind: " + system_text(errno);
      if (errno == EADDRINUSE) problem += " (another process holds the port: choose a free one with ZERO3_NCCL_ID_PORT)";
      continue;
    }
    if (::listen(listener.fd(), SOMAXCONN) != 0) {
      problem = "listen: " + system_text(errno);
      continue;
    }
    return listener;
  }
  throw BackendError("nccl id exchange: rank 0 cannot listen on " + describe(address) + ": " + problem);
}

// "1-3, 5, 9-12" for the ranks 1..world-1 whose entry equals `wanted`; long lists are cut short.
std::string rank_ranges(const std::vector<bool>& arrived, bool wanted) {
  constexpr int kRangesShown = 32;
  std::string text;
  int ranges = 0;
  const int world = static_cast<int>(arrived.size());
  for (int first = 1; first < world; ++first) {
    if (arrived[first] != wanted) continue;
    int last = first;
    while (last + 1 < world && arrived[last + 1] == wanted) ++last;
    if (ranges++ == kRangesShown) {
      text += ", ...";
      break;
    }
    text += (text.empty() ? "" : ", ") + std::to_string(first) + (last > first ? "-" + std::to_string(last) : "");
    first = last;
  }
  return text.empty() ? "none" : text;
}

// A connection rank 0 accepted whose hello has not fully arrived yet.
struct PendingPeer {
  Socket socket;
  Hello hello{};
  size_t received = 0;
};

// Rank 0's side: one poll() over the listener and every connection whose hello is still on its
// way, so that a slow or silent connection never delays the others.
class IdServer {
 public:
  IdServer(const NcclIdBytes& id, int world, const IdExchangeAddress& address, double timeout_s)
      : world_(world), address_(address), timeout_s_(timeout_s), arrived_(static_cast<size_t>(world), false) {
    std::memcpy(reply_.data(), kMagic, sizeof(kMagic));
    std::memcpy(reply_.data() + sizeof(kMagic), id.data(), id.size());
  }

  void serve_all(const Socket& listener, const Deadline& deadline) {
    while (served_ < world_ - 1) {
      if (deadline.passed()) throw_timeout();
      std::vector<pollfd> watched{{listener.fd(), POLLIN, 0}};
      for (const PendingPeer& peer : pending_) watched.push_back({peer.socket.fd(), POLLIN, 0});
      const int ready = ::poll(watched.data(), watched.size(), deadline.poll_ms());
      if (ready < 0 && errno != EINTR) throw BackendError(where() + ": poll: " + system_text(errno));
      if (ready <= 0) continue;
      // Peers first: accepting appends to pending_, which would shift the indices into watched.
      std::vector<PendingPeer> still_pending;
      for (size_t index = 0; index < pending_.size(); ++index) {
        const bool finished = watched[index + 1].revents != 0 && read_hello(pending_[index], deadline);
        if (!finished) still_pending.push_back(std::move(pending_[index]));
      }
      pending_ = std::move(still_pending);
      if (watched[0].revents != 0) accept_waiting(listener);
    }
  }

 private:
  std::string where() const { return "nccl id exchange: rank 0 at " + describe(address_); }

  void accept_waiting(const Socket& listener) {
    for (;;) {
      Socket peer(::accept4(listener.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (peer.is_open()) {
        pending_.push_back(PendingPeer{std::move(peer)});
        continue;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      // A connection reset while it waited in the queue, or a signal: the next one may be fine.
      if (errno == EINTR || errno == ECONNABORTED) continue;
      throw BackendError(where() + ": accept: " + system_text(errno) + " (served " + std::to_string(served_) + " of " +
                         std::to_string(world_ - 1) + " ranks)");
    }
  }

  // Takes what the peer has sent; true when the connection is done with (served or dropped).
  bool read_hello(PendingPeer& peer, const Deadline& deadline) {
    while (peer.received < peer.hello.size()) {
      const ssize_t count = ::recv(peer.socket.fd(), peer.hello.data() + peer.received, peer.hello.size() - peer.received, 0);
      if (count > 0) {
        peer.received += static_cast<size_t>(count);
      } else if (count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return false;
      } else if (count == 0 || errno != EINTR) {
        ++ignored_connections_;  // closed or reset before a whole hello: a probe, not a rank
        return true;
      }
    }
    if (!starts_with_magic(peer.hello.data())) {
      ++ignored_connections_;
      return true;
    }
    const int64_t rank = get_u32(peer.hello.data() + 8);
    check_hello(rank, get_u32(peer.hello.data() + 12));
    std::string problem;
    const Transfer sent = send_all(peer.socket, reply_.data(), reply_.size(), deadline, problem);
    if (sent == Transfer::timed_out) throw_timeout();
    if (sent == Transfer::failed) {
      throw BackendError(where() + ": rank " + std::to_string(rank) + " sent its hello but left before receiving the id: " +
                         problem);
    }
    arrived_[static_cast<size_t>(rank)] = true;
    ++served_;
    return true;
  }

  void check_hello(int64_t rank, int64_t world) const {
    if (world != world_) {
      throw InputError(where() + ": rank " + std::to_string(rank) + " announced a world size of " + std::to_string(world) +
                       " but rank 0's world size is " + std::to_string(world_) +
                       ": the processes disagree on the launcher's world, or another job's process reached this port");
    }
    if (rank < 1 || rank >= world_) {
      throw InputError(where() + ": a peer announced rank " + std::to_string(rank) + ", outside 1.." +
                       std::to_string(world_ - 1) + " (rank 0 serves the id and never asks for it)");
    }
    if (arrived_[static_cast<size_t>(rank)]) {
      throw InputError(where() + ": rank " + std::to_string(rank) +
                       " arrived twice: two processes believe they are that rank, or another job shares this port");
    }
  }

  [[noreturn]] void throw_timeout() const {
    std::string message = where() + ": waited " + seconds_text(timeout_s_) + " for ranks 1.." + std::to_string(world_ - 1) +
                          ": served " + rank_ranges(arrived_, true) + "; never arrived: " + rank_ranges(arrived_, false);
    if (ignored_connections_ > 0) {
      message += "; closed " + std::to_string(ignored_connections_) + " connection(s) that sent no zero3 hello";
    }
    throw LivenessError(message + ". Check that every process started, with the same MASTER_ADDR and port");
  }

  int world_;
  const IdExchangeAddress& address_;
  double timeout_s_;
  Reply reply_{};
  std::vector<bool> arrived_;  // by rank; rank 0 stays false and is never listed
  int served_ = 0;
  int ignored_connections_ = 0;
  std::vector<PendingPeer> pending_;
};

// A connect to a port in the ephemeral range on this machine, with nobody listening, can pick that
// very port as its own and connect to itself (TCP simultaneous open); that is not rank 0.
bool connected_to_itself(const Socket& socket) {
  sockaddr_storage local{};
  sockaddr_storage remote{};
  socklen_t local_bytes = sizeof(local);
  socklen_t remote_bytes = sizeof(remote);
  if (::getsockname(socket.fd(), reinterpret_cast<sockaddr*>(&local), &local_bytes) != 0) return false;
  if (::getpeername(socket.fd(), reinterpret_cast<sockaddr*>(&remote), &remote_bytes) != 0) return false;
  return local_bytes == remote_bytes && std::memcmp(&local, &remote, local_bytes) == 0;
}

bool connect_entry(const Socket& socket, const addrinfo& entry, const Deadline& deadline, std::string& problem) {
  if (::connect(socket.fd(), entry.ai_addr, entry.ai_addrlen) == 0) return true;
  // An interrupted non-blocking connect goes on in the background, like one in progress.
  if (errno != EINPROGRESS && errno != EINTR) {
    problem = "connect: " + system_text(errno);
    return false;
  }
  if (!wait_for(socket, POLLOUT, deadline)) {
    problem = "connect: no answer before the deadline";
    return false;
  }
  int error = 0;
  socklen_t error_bytes = sizeof(error);
  ::getsockopt(socket.fd(), SOL_SOCKET, SO_ERROR, &error, &error_bytes);
  if (error != 0) {
    problem = "connect: " + system_text(error);
    return false;
  }
  if (connected_to_itself(socket)) {
    problem = "connect: the socket connected to itself, so nobody listens on the port";
    return false;
  }
  return true;
}

// One pass over the host's addresses; an empty socket when none answered (problem says why).
Socket connect_once(const IdExchangeAddress& address, const Deadline& deadline, std::string& problem) {
  AddressList resolved;
  const int status = resolve(address.host, address.port, resolved);
  if (status == EAI_AGAIN) {
    problem = "resolving the host: " + resolve_text(status);
    return Socket();
  }
  if (status != 0) {
    throw BackendError("nccl id exchange: cannot resolve rank 0's host " + describe(address) + ": " + resolve_text(status));
  }
  for (const addrinfo* entry = resolved.get(); entry; entry = entry->ai_next) {
    Socket socket = new_tcp_socket(entry->ai_family);
    if (!socket.is_open()) {
      problem = "socket: " + system_text(errno);
      continue;
    }
    if (connect_entry(socket, *entry, deadline, problem)) return socket;
  }
  return Socket();
}

// Rank 0 may start after its peers (another node, a slower import), so a refused connection is
// retried, with pauses growing from 20 ms to 0.5 s, until the deadline.
Socket connect_with_retries(int rank, const IdExchangeAddress& address, const Deadline& deadline, double timeout_s) {
  std::string problem = "no connection attempt finished";
  std::chrono::milliseconds pause(20);
  for (int attempts = 1;; ++attempts) {
    Socket socket = connect_once(address, deadline, problem);
    if (socket.is_open()) return socket;
    if (deadline.passed()) {
      throw LivenessError("nccl id exchange: rank " + std::to_string(rank) + ": rank 0 never answered at " +
                          describe(address) + " within " + seconds_text(timeout_s) + " (" + std::to_string(attempts) +
                          " attempts, the last: " + problem +
                          "). Check that rank 0 started, that MASTER_ADDR names its host, and that the port "
                          "(ZERO3_NCCL_ID_PORT, by default MASTER_PORT + 1) is open between the nodes");
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline.left()));
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
}

void check_timeout(double timeout_s) {
  ZERO3_CHECK(std::isfinite(timeout_s) && timeout_s > 0 && timeout_s < 1e7, "timeout_s=" + std::to_string(timeout_s));
}

}  // namespace

NcclIdBytes serve_nccl_id(const NcclIdBytes& id, int world, const IdExchangeAddress& address, double timeout_s) {
  ZERO3_CHECK(world >= 1, "world=" + std::to_string(world));
  check_timeout(timeout_s);
  if (world == 1) return id;
  const Deadline deadline(timeout_s);
  const Socket listener = listen_on(address);
  IdServer server(id, world, address, timeout_s);
  server.serve_all(listener, deadline);
  return id;
}

NcclIdBytes fetch_nccl_id(int rank, int world, const IdExchangeAddress& address, double timeout_s) {
  ZERO3_CHECK(rank >= 1 && rank < world, "rank=" + std::to_string(rank) + " world=" + std::to_string(world));
  check_timeout(timeout_s);
  const Deadline deadline(timeout_s);
  const Socket socket = connect_with_retries(rank, address, deadline, timeout_s);
  const std::string where = "nccl id exchange: rank " + std::to_string(rank) + ": rank 0 at " + describe(address);
  Hello hello{};
  std::memcpy(hello.data(), kMagic, sizeof(kMagic));
  put_u32(hello.data() + 8, static_cast<uint32_t>(rank));
  put_u32(hello.data() + 12, static_cast<uint32_t>(world));
  std::string problem;
  Reply reply{};
  Transfer transfer = send_all(socket, hello.data(), hello.size(), deadline, problem);
  if (transfer == Transfer::complete) transfer = receive_all(socket, reply.data(), reply.size(), deadline, problem);
  if (transfer == Transfer::timed_out) {
    throw LivenessError(where + " accepted the connection but sent no id within " + seconds_text(timeout_s));
  }
  if (transfer == Transfer::failed) {
    throw BackendError(where + " sent no id: " + problem +
                       ". Rank 0 closes the connection when it rejects a hello (a different world size, a rank "
                       "twice), and its own error says why");
  }
  if (!starts_with_magic(reply.data())) {
    throw BackendError(where + " answered with something other than a zero3 id: another service listens on this port; "
                               "choose a free one with ZERO3_NCCL_ID_PORT");
  }
  NcclIdBytes id{};
  std::memcpy(id.data(), reply.data() + sizeof(kMagic), id.size());
  return id;
}

}  // namespace zero3
