// The MPI backend in a build without MPI: every entry point says how to get it (exit 4).
#include "backend_cuda/mpi/mpi_world.h"

#include <cstdlib>

#include "core/base/errors.h"

namespace zero3 {

bool mpi_built() { return false; }

MpiWorld& MpiWorld::start() {
  throw BackendError(
      "--backend mpi: this build has no MPI; install OpenMPI (Debian: apt-get install libopenmpi-dev openmpi-bin, "
      "which tools/lib/build.sh does) and rebuild, or use --backend sim");
}

MpiWorld::MpiWorld() = default;
MpiWorld::~MpiWorld() = default;
std::unique_ptr<Communicator> MpiWorld::communicator(const MpiOptions&) { return nullptr; }
void MpiWorld::barrier() {}
void MpiWorld::abort_job(int exit_code) { std::exit(exit_code); }

}  // namespace zero3
