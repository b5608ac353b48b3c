// The process's MPI session (mpi_world.h).
#include "backend_cuda/mpi_world.h"

#include <cstdio>
#include <cstdlib>

#include <mpi.h>

#include "backend_cuda/mpi_communicator.h"
#include "core/base/errors.h"

namespace zero3 {

bool mpi_built() { return true; }

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
