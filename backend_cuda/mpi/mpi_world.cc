// The process's MPI session (mpi_world.h).
#include "backend_cuda/mpi/mpi_world.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <mpi.h>
#include <unistd.h>

#include "backend_cuda/mpi/mpi_communicator.h"
#include "core/base/errors.h"

namespace zero3 {

bool mpi_built() { return true; }

namespace {

// When one process of the job dies, mpirun terminates the others with SIGTERM: each says so and
// ends with the liveness exit code (the launcher's own message names the process that died).
char termination_message[160];

void on_terminated_by_launcher(int) {
  const ssize_t ignored = ::write(STDERR_FILENO, termination_message, std::strlen(termination_message));
  (void)ignored;
  ::_exit(kExitLiveness);
}

void say_so_when_terminated(int rank) {
  std::snprintf(termination_message, sizeof(termination_message),
                "zero3: rank %d: terminated by the launcher: another process of the job failed (the launcher's "
                "message names it)\n",
                rank);
  std::signal(SIGTERM, on_terminated_by_launcher);
}

}  // namespace

MpiWorld& MpiWorld::start() {
  static MpiWorld world;  // MPI may be initialised once per process
  return world;
}

MpiWorld::MpiWorld() : launch_(read_launch_environment()) {
  check_mpi(MPI_Init(nullptr, nullptr), "MPI_Init");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &world_), "MPI_Comm_size");
  if (!launch_.launcher.empty() && (launch_.world != world_ || launch_.rank != rank_)) {
    const std::string problem = launch_.launcher + " says rank " + std::to_string(launch_.rank) + " of " +
                                std::to_string(launch_.world) + " but MPI says rank " + std::to_string(rank_) + " of " +
                                std::to_string(world_) +
                                (launch_.launcher == "srun"
                                     ? ": this MPI cannot talk to srun's PMI (try srun --mpi=pmix, or mpirun)"
                                     : ": the processes were not started by one MPI launch");
    MPI_Finalize();
    throw BackendError("--backend mpi: " + problem);
  }
  if (launch_.launcher.empty() && world_ == 1) {
    // A singleton MPI job trains correctly, on one rank: say so, since one is rarely what was meant.
    std::fprintf(stderr,
                 "warning: --backend mpi started without a launcher: this process is the job's only rank (world 1); "
                 "start W ranks with mpirun -np W (or srun -n W, torchrun --nproc-per-node W)\n");
  }
  say_so_when_terminated(rank_);
}

MpiWorld::~MpiWorld() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::unique_ptr<Communicator> MpiWorld::communicator(const MpiOptions& options) {
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, options);
}

void MpiWorld::barrier() { check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

void MpiWorld::abort_job(int exit_code) {
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::abort();  // MPI_Abort does not return
}

}  // namespace zero3
