// A build without MPI: `--backend mpi` is a BackendError (exit 4) that says how to get MPI, never a
// crash or a silent single-process run. Compiled from mpi_absent.cc whatever this build has.
#include <string>

#include <gtest/gtest.h>

#include "backend_cuda/mpi/mpi_world.h"
#include "core/base/errors.h"

namespace zero3 {
namespace {

TEST(MpiAbsent, StartingMpiSaysHowToInstallItWithExitFour) {
  EXPECT_FALSE(mpi_built());
  try {
    MpiWorld::start();
    FAIL() << "MpiWorld::start() returned in a build without MPI";
  } catch (const BackendError& error) {
    const std::string message = error.what();
    EXPECT_EQ(error.exit_code(), kExitBackend);
    EXPECT_NE(message.find("this build has no MPI"), std::string::npos) << message;
    EXPECT_NE(message.find("libopenmpi-dev"), std::string::npos) << message;
    EXPECT_NE(message.find("--backend sim"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace zero3
