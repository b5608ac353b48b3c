// The ncclUniqueId exchange between real processes over loopback: fork()ed children fetch while the
// parent serves, and every failure (no rank 0, a different world size, a rank twice, a stray
// connection, a missing rank) ends in its typed error, never a hang. CPU only; 127.0.0.1 only.
#include "backend_cuda/launch/nccl_id_exchange.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "backend_cuda/launch/tcp_socket.h"
#include "core/base/errors.h"

namespace zero3 {
namespace {

constexpr double kChildTimeoutSeconds = 20.0;  // bounds a failing test; passing ones take milliseconds

// What a child's fetch_nccl_id did, as its exit code.
enum ChildOutcome : int {
  kGotTheId = 0,
  kWrongBytes = 10,
  kInputError = 11,
  kLivenessError = 12,
  kBackendError = 13,
  kOtherError = 14,
};

// Id bytes from a seed, with a zero byte inside, so that nothing may treat the id as a C string.
NcclIdBytes id_from_seed(uint32_t seed) {
  std::mt19937 generator(seed);
  NcclIdBytes id{};
  for (char& byte : id) byte = static_cast<char>(generator() & 0xff);
  id[5] = '\0';
  return id;
}

// Binding port 0 lets the kernel choose a free port, so parallel ctest runs never collide.
int free_loopback_port() {
  const Socket probe = new_tcp_socket(AF_INET);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t address_bytes = sizeof(address);
  EXPECT_EQ(::bind(probe.fd(), reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0) << system_text(errno);
  EXPECT_EQ(::getsockname(probe.fd(), reinterpret_cast<sockaddr*>(&address), &address_bytes), 0);
  return ntohs(address.sin_port);
}

IdExchangeAddress loopback_address() { return IdExchangeAddress{"127.0.0.1", free_loopback_port(), "test"}; }

// The children a test started; any still running when it ends (a failed assertion) are killed.
class ChildProcesses {
 public:
  ~ChildProcesses() {
    for (const pid_t pid : running_) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }

  // Forks a child that fetches the id as `rank` of `world` and exits with its ChildOutcome.
  void start_fetcher(int rank, int world, const IdExchangeAddress& address, const NcclIdBytes& expected) {
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0) << "fork: " << system_text(errno);
    if (pid > 0) {
      running_.push_back(pid);
      return;
    }
    ::_exit(fetch_and_classify(rank, world, address, expected));
  }

  // Each child's exit code, in start order; 100 + the signal for a child that was killed.
  std::vector<int> wait_all() {
    std::vector<int> outcomes;
    for (const pid_t pid : running_) {
      int status = 0;
      ::waitpid(pid, &status, 0);
      outcomes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status));
    }
    running_.clear();
    return outcomes;
  }

 private:
  static int fetch_and_classify(int rank, int world, const IdExchangeAddress& address, const NcclIdBytes& expected) {
    try {
      return fetch_nccl_id(rank, world, address, kChildTimeoutSeconds) == expected ? kGotTheId : kWrongBytes;
    } catch (const LivenessError& error) {
      std::fprintf(stderr, "child rank %d: %s\n", rank, error.what());
      return kLivenessError;
    } catch (const InputError& error) {
      std::fprintf(stderr, "child rank %d: %s\n", rank, error.what());
      return kInputError;
    } catch (const BackendError& error) {
      std::fprintf(stderr, "child rank %d: %s\n", rank, error.what());
      return kBackendError;
    } catch (const std::exception& error) {
      std::fprintf(stderr, "child rank %d: %s\n", rank, error.what());
      return kOtherError;
    }
  }

  std::vector<pid_t> running_;
};

// What serve_nccl_id threw, as "InputError: message"; "" when it returned the id unchanged.
std::string serve_outcome(const NcclIdBytes& id, int world, const IdExchangeAddress& address, double timeout_s) {
  try {
    return serve_nccl_id(id, world, address, timeout_s) == id ? "" : "returned other bytes";
  } catch (const InputError& error) {
    return std::string("InputError: ") + error.what();
  } catch (const LivenessError& error) {
    return std::string("LivenessError: ") + error.what();
  } catch (const BackendError& error) {
    return std::string("BackendError: ") + error.what();
  }
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(NcclIdExchange, ThreeChildProcessesEachReceiveExactlyTheServedIdBytes) {
  const NcclIdBytes id = id_from_seed(1);
  const IdExchangeAddress address = loopback_address();
  ChildProcesses children;
  for (int rank = 1; rank < 4; ++rank) children.start_fetcher(rank, 4, address, id);
  EXPECT_EQ(serve_outcome(id, 4, address, kChildTimeoutSeconds), "");
  EXPECT_EQ(children.wait_all(), (std::vector<int>{kGotTheId, kGotTheId, kGotTheId}));
}

// Rank 0 may start after its peers: they retry until it listens.
TEST(NcclIdExchange, FetchersRetryUntilRankZeroStartsListening300MillisecondsLate) {
  const NcclIdBytes id = id_from_seed(2);
  const IdExchangeAddress address = loopback_address();
  ChildProcesses children;
  for (int rank = 1; rank < 4; ++rank) children.start_fetcher(rank, 4, address, id);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(serve_outcome(id, 4, address, kChildTimeoutSeconds), "");
  EXPECT_EQ(children.wait_all(), (std::vector<int>{kGotTheId, kGotTheId, kGotTheId}));
}

TEST(NcclIdExchange, AWorldOfOneServesWithoutASocket) {
  const NcclIdBytes id = id_from_seed(3);
  EXPECT_EQ(serve_nccl_id(id, 1, IdExchangeAddress{"127.0.0.1", 1, "test"}, 0.1), id);
}

TEST(NcclIdExchange, FetchingWithNoRankZeroListeningIsALivenessErrorNamingThePort) {
  const IdExchangeAddress address = loopback_address();
  const auto start = std::chrono::steady_clock::now();
  try {
    fetch_nccl_id(2, 4, address, 0.3);
    FAIL() << "fetch_nccl_id returned with nobody listening";
  } catch (const LivenessError& error) {
    const std::string message = error.what();
    EXPECT_EQ(error.exit_code(), kExitLiveness);
    EXPECT_TRUE(contains(message, "127.0.0.1:" + std::to_string(address.port))) << message;
    EXPECT_TRUE(contains(message, "rank 0 never answered")) << message;
    EXPECT_TRUE(contains(message, "MASTER_ADDR")) << message;
  }
  const double waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(waited_s, 0.3);
  EXPECT_LT(waited_s, 2.0) << "the timeout bounds the retries";
}

TEST(NcclIdExchange, ServingTimesOutNamingTheRanksThatArrivedAndThoseThatDidNot) {
  const NcclIdBytes id = id_from_seed(4);
  const IdExchangeAddress address = loopback_address();
  ChildProcesses children;
  children.start_fetcher(2, 4, address, id);
  const std::string outcome = serve_outcome(id, 4, address, 1.0);
  EXPECT_TRUE(contains(outcome, "LivenessError: ")) << outcome;
  EXPECT_TRUE(contains(outcome, "127.0.0.1:" + std::to_string(address.port))) << outcome;
  EXPECT_TRUE(contains(outcome, "waited 1 s")) << outcome;
  EXPECT_TRUE(contains(outcome, "served 2; never arrived: 1, 3")) << outcome;
  EXPECT_EQ(children.wait_all(), std::vector<int>{kGotTheId}) << "the rank that arrived was served";
}

TEST(NcclIdExchange, APeerWithAnotherWorldSizeIsAnInputErrorOnRankZeroNamingBothSizes) {
  const NcclIdBytes id = id_from_seed(5);
  const IdExchangeAddress address = loopback_address();
  ChildProcesses children;
  children.start_fetcher(1, 5, address, id);
  const std::string outcome = serve_outcome(id, 3, address, kChildTimeoutSeconds);
  EXPECT_TRUE(contains(outcome, "InputError: ")) << outcome;
  EXPECT_TRUE(contains(outcome, "rank 1 announced a world size of 5 but rank 0's world size is 3")) << outcome;
  EXPECT_EQ(children.wait_all(), std::vector<int>{kBackendError}) << "the rejected peer learns it from a closed connection";
}

TEST(NcclIdExchange, ARankArrivingTwiceIsAnInputErrorOnRankZero) {
  const NcclIdBytes id = id_from_seed(6);
  const IdExchangeAddress address = loopback_address();
  ChildProcesses children;
  children.start_fetcher(1, 3, address, id);
  children.start_fetcher(1, 3, address, id);
  const std::string outcome = serve_outcome(id, 3, address, kChildTimeoutSeconds);
  EXPECT_TRUE(contains(outcome, "InputError: ")) << outcome;
  EXPECT_TRUE(contains(outcome, "rank 1 arrived twice")) << outcome;
  std::vector<int> outcomes = children.wait_all();
  std::sort(outcomes.begin(), outcomes.end());
  EXPECT_EQ(outcomes, (std::vector<int>{kGotTheId, kBackendError})) << "the first was served, the second refused";
}

// A client speaking the protocol by hand, for hellos fetch_nccl_id never sends.
class RawClient {
 public:
  explicit RawClient(int port) : socket_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port));
    // Blocking connect, retried while the server thread has not bound the port yet.
    for (int attempt = 0; attempt < 200; ++attempt) {
      if (::connect(socket_.fd(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) return;
      socket_ = Socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "could not connect to 127.0.0.1:" << port;
  }
  void send_bytes(const std::string& bytes) {
    EXPECT_EQ(::send(socket_.fd(), bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  }

 private:
  Socket socket_;
};

std::string hello_bytes(uint32_t rank, uint32_t world) {
  std::string hello = "ZERO3ID1";
  for (const uint32_t value : {rank, world}) {
    const uint32_t network = htonl(value);
    hello.append(reinterpret_cast<const char*>(&network), sizeof(network));
  }
  return hello;
}

TEST(NcclIdExchange, ARankOutsideOneToWorldMinusOneIsAnInputErrorOnRankZero) {
  for (const uint32_t rank : {0u, 3u, 4000000000u}) {
    const IdExchangeAddress address = loopback_address();
    std::string outcome;
    std::thread server([&] { outcome = serve_outcome(id_from_seed(7), 3, address, kChildTimeoutSeconds); });
    {
      RawClient client(address.port);
      client.send_bytes(hello_bytes(rank, 3));
      server.join();
    }
    EXPECT_TRUE(contains(outcome, "InputError: ")) << outcome;
    EXPECT_TRUE(contains(outcome, "a peer announced rank " + std::to_string(rank) + ", outside 1..2")) << outcome;
  }
}

// A port scanner or health check on the port must not end the exchange.
TEST(NcclIdExchange, AConnectionWithoutTheMagicIsClosedAndTheExchangeGoesOn) {
  const NcclIdBytes id = id_from_seed(8);
  const IdExchangeAddress address = loopback_address();
  std::string outcome;
  std::thread server([&] { outcome = serve_outcome(id, 3, address, 2.0); });
  RawClient stray(address.port);
  stray.send_bytes("GET / HTTP/1.1\r\n\r\n");
  RawClient silent(address.port);
  EXPECT_EQ(fetch_nccl_id(1, 3, address, kChildTimeoutSeconds), id);
  server.join();
  EXPECT_TRUE(contains(outcome, "LivenessError: ")) << outcome;
  EXPECT_TRUE(contains(outcome, "served 1; never arrived: 2")) << outcome;
  EXPECT_TRUE(contains(outcome, "closed 1 connection(s) that sent no zero3 hello")) << outcome;
}

// Whatever else listens on the port, its bytes are never taken for the id.
TEST(NcclIdExchange, AnAnswerWithoutTheMagicIsABackendErrorOnThePeer) {
  const IdExchangeAddress address = loopback_address();
  const Socket listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in bound{};
  bound.sin_family = AF_INET;
  bound.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bound.sin_port = htons(static_cast<uint16_t>(address.port));
  ASSERT_EQ(::bind(listener.fd(), reinterpret_cast<sockaddr*>(&bound), sizeof(bound)), 0) << system_text(errno);
  ASSERT_EQ(::listen(listener.fd(), 4), 0);
  std::thread other_service([&] {
    const Socket peer(::accept(listener.fd(), nullptr, nullptr));
    const std::string answer(200, 'x');
    ::send(peer.fd(), answer.data(), answer.size(), MSG_NOSIGNAL);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  });
  try {
    fetch_nccl_id(1, 2, address, kChildTimeoutSeconds);
    ADD_FAILURE() << "another service's bytes were taken for the id";
  } catch (const BackendError& error) {
    EXPECT_TRUE(contains(error.what(), "another service listens on this port")) << error.what();
  }
  other_service.join();
}

}  // namespace
}  // namespace zero3
