// Handing the ncclUniqueId from rank 0 to every other process over TCP, in the one-process-per-GPU
// mode (torchrun, srun, mpirun). Plain POSIX sockets and no CUDA or NCCL header, so it builds and
// is tested on every machine; the id travels as its 128 opaque bytes (NCCL_UNIQUE_ID_BYTES).
//
// torchrun's agent already listens on MASTER_PORT, so the exchange has a port of its own:
// MASTER_PORT + 1 by default, ZERO3_NCCL_ID_PORT when set, an explicit port argument above both.
// Rank 0 listens there; every other rank connects (retrying until rank 0 listens), sends a hello
// of 16 bytes: the magic "ZERO3ID1", then its rank and the world size it believes in, each a
// 32-bit big-endian integer. Rank 0 checks the hello (world size equal to its own, rank inside
// 1..world-1, no rank twice) and answers with the magic and the 128 id bytes; the peer checks the
// magic, so a stray service on that port can never hand it 128 bytes of something else as the id.
// A connection whose first bytes are not the magic is not a zero3 peer (a port scanner, a health
// check): it is closed and counted in the timeout message, and the exchange goes on.
//
// Each peer is answered as soon as its hello checks out, and its connection closed: holding every
// connection until the last rank arrives would need world-1 descriptors at once, past the usual
// limit of 1024 on a large job. So a hello rejected later ends rank 0 with its error while earlier
// peers already hold the id; they fail in ncclCommInitRank once rank 0 is gone (and torchrun ends
// them as soon as one process fails).
//
//   const IdExchangeAddress address = id_exchange_address(launch);   // launch_environment.h
//   NcclIdBytes id{};
//   if (launch.rank == 0) {
//     id = bytes of ncclGetUniqueId's result;  // the static_assert on its size is in the CUDA code
//     serve_nccl_id(id, launch.world, address, 300.0);
//   } else {
//     id = fetch_nccl_id(launch.rank, launch.world, address, 300.0);
//   }
//
// Every wait is bounded by timeout_s, counted from the call: a missing peer or a silent rank 0 is a
// LivenessError (exit 3) naming the address, the port and which ranks arrived, never a hang.
#pragma once
#include <array>
#include <string>

#include "backend_cuda/launch/launch_environment.h"

namespace zero3 {

inline constexpr int kNcclIdBytes = 128;
using NcclIdBytes = std::array<char, kNcclIdBytes>;

// Rank 0: listens on the address's port (SO_REUSEADDR, so a restarted job can take it back at once),
// serves every rank 1..world-1 exactly once, and returns the id when all have it; world 1 returns at
// once without a socket. It listens on loopback only when the host is a loopback address
// ("localhost", 127.x.x.x, ::1), since then every peer is on this machine; otherwise on every
// interface, as torchrun's store does, because a host name may resolve on rank 0's own machine to
// an address its peers cannot reach (Debian maps the host name to 127.0.1.1).
// BackendError: the port cannot be bound or the network fails. InputError: a hello with another
// world size, a rank outside 1..world-1 or a rank twice. LivenessError: timeout_s passed first.
NcclIdBytes serve_nccl_id(const NcclIdBytes& id, int world, const IdExchangeAddress& address, double timeout_s);

// Ranks 1..world-1: connects (retrying while rank 0 is not yet listening), sends the hello and reads
// the id. LivenessError when rank 0 never answered within timeout_s; BackendError when it closed the
// connection without the id (it rejected the hello, and its own error says why) or the host does
// not resolve.
NcclIdBytes fetch_nccl_id(int rank, int world, const IdExchangeAddress& address, double timeout_s);

}  // namespace zero3
