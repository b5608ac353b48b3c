// The launcher variables: each launcher alone, the precedence when several are set, the errors
// for half-set or out-of-range variables, and the address rank 0 serves the ncclUniqueId on.
#include "backend_cuda/launch/launch_environment.h"

#include <cstring>
#include <functional>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "core/base/errors.h"

namespace zero3 {
namespace {

LaunchEnvironment read(const std::map<std::string, std::string>& variables) {
  return read_launch_environment([&](const char* name) -> const char* {
    const auto found = variables.find(name);
    return found == variables.end() ? nullptr : found->second.c_str();
  });
}

std::string input_error(const std::map<std::string, std::string>& variables) {
  try {
    read(variables);
  } catch (const InputError& error) {
    return error.what();
  }
  return "no error";
}

TEST(LaunchEnvironment, NoLauncherIsAWorldOfOne) {
  const LaunchEnvironment launch = read({});
  EXPECT_EQ(launch.launcher, "");
  EXPECT_EQ(launch.rank, 0);
  EXPECT_EQ(launch.world, 1);
  EXPECT_TRUE(launch.warnings.empty());
}

TEST(LaunchEnvironment, EachLauncherIsReadFromItsOwnVariables) {
  const LaunchEnvironment torchrun =
      read({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "node7"}, {"MASTER_PORT", "29500"}});
  EXPECT_EQ(torchrun.launcher, "torchrun");
  EXPECT_EQ(torchrun.rank, 3);
  EXPECT_EQ(torchrun.world, 8);
  EXPECT_EQ(torchrun.local_rank, 1);
  EXPECT_EQ(torchrun.master_addr, "node7");
  EXPECT_EQ(torchrun.master_port, 29500);

  const LaunchEnvironment mpirun =
      read({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}});
  EXPECT_EQ(mpirun.launcher, "mpirun");
  EXPECT_EQ(mpirun.rank, 2);
  EXPECT_EQ(mpirun.world, 4);
  EXPECT_EQ(mpirun.local_rank, 0);

  const LaunchEnvironment srun = read({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"}, {"SLURM_LOCALID", "1"}});
  EXPECT_EQ(srun.launcher, "srun");
  EXPECT_EQ(srun.rank, 5);
  EXPECT_EQ(srun.world, 6);
  EXPECT_EQ(srun.local_rank, 1);
}

// torchrun inside an sbatch allocation: SLURM's variables describe the allocation's single task.
TEST(LaunchEnvironment, TheFirstLauncherWinsAndADisagreementIsNamed) {
  const LaunchEnvironment launch =
      read({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}});
  EXPECT_EQ(launch.launcher, "torchrun");
  EXPECT_EQ(launch.rank, 1);
  EXPECT_EQ(launch.world, 4);
  ASSERT_EQ(launch.warnings.size(), 1u);
  EXPECT_NE(launch.warnings[0].find("RANK=1 WORLD_SIZE=4 (torchrun)"), std::string::npos) << launch.warnings[0];
  EXPECT_NE(launch.warnings[0].find("SLURM_PROCID=0 SLURM_NTASKS=1 (srun)"), std::string::npos) << launch.warnings[0];

  const LaunchEnvironment mpi_in_slurm = read({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                                               {"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "4"}});
  EXPECT_EQ(mpi_in_slurm.launcher, "mpirun");
  EXPECT_TRUE(mpi_in_slurm.warnings.empty()) << "agreeing launchers are not a warning";
}

TEST(LaunchEnvironment, HalfSetOrOutOfRangeVariablesAreInputErrorsNamingTheVariable) {
  EXPECT_NE(input_error({{"RANK", "0"}}).find("RANK is set but WORLD_SIZE is not"), std::string::npos);
  EXPECT_NE(input_error({{"SLURM_NTASKS", "2"}}).find("SLURM_NTASKS is set but SLURM_PROCID is not"),
            std::string::npos);
  EXPECT_NE(input_error({{"RANK", "4"}, {"WORLD_SIZE", "4"}}).find("RANK=4: expected a rank from 0 to 3"),
            std::string::npos);
  EXPECT_NE(input_error({{"RANK", "x"}, {"WORLD_SIZE", "4"}}).find("RANK=x"), std::string::npos);
  EXPECT_NE(input_error({{"RANK", "0"}, {"WORLD_SIZE", "0"}}).find("WORLD_SIZE=0: expected a world size"),
            std::string::npos);
  EXPECT_NE(input_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}).find("MASTER_PORT=70000"),
            std::string::npos);
  EXPECT_NE(input_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"ZERO3_NCCL_ID_PORT", "x"}}).find("ZERO3_NCCL_ID_PORT=x"),
            std::string::npos);
}

// A job script under mpirun or srun exports MASTER_ADDR to say where rank 0 runs.
TEST(LaunchEnvironment, RankZerosAddressAndTheIdPortAreReadUnderEveryLauncher) {
  const LaunchEnvironment srun = read({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"MASTER_ADDR", "node3"},
                                       {"MASTER_PORT", "29600"}, {"ZERO3_NCCL_ID_PORT", "31000"}});
  EXPECT_EQ(srun.master_addr, "node3");
  EXPECT_EQ(srun.master_port, 29600);
  EXPECT_EQ(srun.nccl_id_port, 31000);

  const LaunchEnvironment bare = read({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  EXPECT_EQ(bare.master_addr, "");
  EXPECT_EQ(bare.master_port, 0);
  EXPECT_EQ(bare.nccl_id_port, 0);
}

TEST(LaunchEnvironment, EachLaunchersVariableNamesCanBeLookedUp) {
  ASSERT_NE(launcher_variable_names("srun"), nullptr);
  EXPECT_STREQ(launcher_variable_names("srun")->local_rank, "SLURM_LOCALID");
  EXPECT_STREQ(launcher_variable_names("torchrun")->world, "WORLD_SIZE");
  EXPECT_EQ(launcher_variable_names(""), nullptr);
}

// ---- where rank 0 serves the ncclUniqueId

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

LaunchEnvironment torchrun_environment(const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> variables = {
      {"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "node7"}, {"MASTER_PORT", "29500"}};
  for (const auto& [name, value] : extra) variables[name] = value;
  return read(variables);
}

TEST(IdExchangeAddress, IsMasterAddrAtMasterPortPlusOneUnderTorchrun) {
  const IdExchangeAddress address = id_exchange_address(torchrun_environment({}));
  EXPECT_EQ(address.host, "node7");
  EXPECT_EQ(address.port, 29501);
  EXPECT_EQ(address.origin, "MASTER_ADDR=node7; MASTER_PORT=29500 + 1");
}

TEST(IdExchangeAddress, ZERO3_NCCL_ID_PORTOverridesMasterPortAndAPortArgumentOverridesBoth) {
  const LaunchEnvironment launch = torchrun_environment({{"ZERO3_NCCL_ID_PORT", "31000"}});
  EXPECT_EQ(id_exchange_address(launch).port, 31000);
  EXPECT_TRUE(contains(id_exchange_address(launch).origin, "ZERO3_NCCL_ID_PORT=31000"));
  EXPECT_EQ(id_exchange_address(launch, 32000).port, 32000);
  EXPECT_TRUE(contains(id_exchange_address(launch, 32000).origin, "port argument 32000"));
}

TEST(IdExchangeAddress, ABadPortIsAnInputErrorNamingItsSource) {
  const auto port_error = [](const std::function<void()>& choose) -> std::string {
    try {
      choose();
    } catch (const InputError& error) {
      return error.what();
    }
    return "no error";
  };
  EXPECT_TRUE(contains(port_error([] { torchrun_environment({{"ZERO3_NCCL_ID_PORT", "29x"}}); }), "ZERO3_NCCL_ID_PORT=29x"));
  EXPECT_TRUE(contains(port_error([] { torchrun_environment({{"ZERO3_NCCL_ID_PORT", "0"}}); }), "ZERO3_NCCL_ID_PORT=0"));
  const std::string highest = port_error([] { id_exchange_address(torchrun_environment({{"MASTER_PORT", "65535"}})); });
  EXPECT_TRUE(contains(highest, "MASTER_PORT=65535 leaves no port above it")) << highest;
  EXPECT_TRUE(contains(highest, "ZERO3_NCCL_ID_PORT")) << highest;
  const std::string argument = port_error([] { id_exchange_address(torchrun_environment({}), 70000); });
  EXPECT_TRUE(contains(argument, "the port argument gives port 70000")) << argument;
}

// mpirun and srun set no MASTER_ADDR: loopback, right for a job on one node, and said so.
TEST(IdExchangeAddress, WithoutMasterAddrIsLoopbackAtTheDefaultPortAndSaysWhy) {
  const LaunchEnvironment launch = read_launch_environment([](const char* name) -> const char* {
    if (std::strcmp(name, "SLURM_PROCID") == 0) return "1";
    if (std::strcmp(name, "SLURM_NTASKS") == 0) return "2";
    return nullptr;
  });
  const IdExchangeAddress address = id_exchange_address(launch);
  EXPECT_EQ(address.host, "127.0.0.1");
  EXPECT_EQ(address.port, kMasterPortDefault + 1);
  EXPECT_TRUE(contains(address.origin, "MASTER_ADDR unset")) << address.origin;
  EXPECT_TRUE(contains(address.origin, "one node")) << address.origin;
}

}  // namespace
}  // namespace zero3
