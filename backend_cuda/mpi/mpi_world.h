// Real multi-process runs on CPUs over OpenMPI: the process's MPI session and the Communicator
// it hands the engine (one process per rank, started by mpirun or srun). Built when CMake finds
// MPI; otherwise every entry point throws BackendError (exit 4) saying how to get it.
//
// The collectives are MPI's nonblocking ones (MPI_Iallgather, MPI_Ialltoall, MPI_Ibcast,
// MPI_Ibarrier), with NCCL's buffer layout. Reductions never use MPI_SUM, which may regroup the
// additions: reduce-scatter is an all-to-all followed by the rank-order sum of
// core/sharding/rank_order_reduction.h, the simulator's own arithmetic, so a run here is bit for
// bit the simulator's. All-reduce is that reduce-scatter over W equal segments (the buffer padded
// to a multiple of W) and an all-gather of the reduced segments. Blocks over max_message_bytes
// travel as a derived datatype of several chunks (MPI counts are int); bf16 moves as its 2 bytes.
//
// Works complete in issue order, as on a stream: waiting for one first completes every collective
// issued before it. That fixes the order in which the all-reduces start their second phase, so it
// is the same on every rank. A wait longer than timeout_seconds is a LivenessError (exit 3) naming
// the rank, the group, the collective's sequence number, its signature and call site, and each peer
// that never arrived or whose process is stopped or gone (read from a shared-memory arrival board,
// README.md "When a collective times out").
//
//   MpiWorld& mpi = MpiWorld::start();            // MPI_Init; world and rank from the launcher
//   std::unique_ptr<Communicator> comm = mpi.communicator({});
//   ... run_rank_program({.comm = comm.get(), ...}) ...
//   mpi.abort_job(3);                              // on a failure: MPI_Abort, every process ends
#pragma once
#include <climits>
#include <cstdint>
#include <memory>
#include <string>

#include "backend_cuda/launch/launch_environment.h"
#include "core/sharding/communicator.h"

namespace zero3 {

// Whether this build links MPI.
bool mpi_built();

struct MpiOptions {
  int64_t max_message_bytes = INT_MAX;  // larger blocks are split (tests use a few bytes)
  double timeout_seconds = 600.0;       // a collective that takes longer fails with exit 3
};

class MpiWorld {
 public:
  // MPI_Init once per process (later calls return the same session); MPI_Finalize at exit. Checks
  // the launcher's variables against MPI's own view, so an srun whose MPI has no PMI support (every
  // process a world of one) is an error, not four independent runs.
  static MpiWorld& start();
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;
  ~MpiWorld();

  int rank() const { return rank_; }
  int world() const { return world_; }
  const LaunchEnvironment& launch() const { return launch_; }

  // A communicator of its own over every process (MPI_Comm_dup of MPI_COMM_WORLD).
  std::unique_ptr<Communicator> communicator(const MpiOptions& options);
  // Blocks until every process gets here (outside any Communicator: checkpoint preparation).
  void barrier();
  // MPI_Abort: every process of the job ends; mpirun exits with exit_code.
  [[noreturn]] void abort_job(int exit_code);

 private:
  MpiWorld();
  int rank_ = 0;
  int world_ = 1;
  LaunchEnvironment launch_;
};

}  // namespace zero3
