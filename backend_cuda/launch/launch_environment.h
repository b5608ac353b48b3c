// Who started this process, and as which rank of how many: the variables a launcher sets, read
// once and shared by the MPI backend and the CUDA backend's one-process-per-GPU mode.
//
//   torchrun  RANK, WORLD_SIZE, LOCAL_RANK (and MASTER_ADDR, MASTER_PORT)
//   mpirun    OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK
//   srun      SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID
//
// MASTER_ADDR and MASTER_PORT are read under every launcher: torchrun sets them, and a job script
// under mpirun or srun may export them to say where rank 0 is. ZERO3_NCCL_ID_PORT, read alongside,
// moves the ncclUniqueId exchange off its default port (nccl_id_exchange.h); id_exchange_address
// below turns these variables into the address rank 0 serves the id on.
//
// Precedence is that order. SLURM variables leak into every job step inside an sbatch
// allocation, so a torchrun or mpirun started there sees them too: when two launchers' variables
// disagree the first one wins and a warning names both sets, never silently.
//
//   LaunchEnvironment launch = read_launch_environment();
//   for (const std::string& warning : launch.warnings) std::fprintf(stderr, "warning: %s\n", ...);
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace zero3 {

struct LaunchEnvironment {
  std::string launcher;  // "torchrun", "mpirun", "srun"; "" when no launcher's variables are set
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  std::string master_addr;  // "" when unset
  int master_port = 0;      // 0 when unset
  int nccl_id_port = 0;     // ZERO3_NCCL_ID_PORT; 0 when unset
  std::vector<std::string> warnings;
};

// getenv by default; tests pass their own. A launcher's variables present only in part, or
// holding something other than a rank inside its world, are an InputError naming the variable.
using EnvironmentLookup = std::function<const char*(const char* name)>;
LaunchEnvironment read_launch_environment(const EnvironmentLookup& lookup = {});

// The variables one launcher sets, for messages that tell the user which one to change.
struct LauncherVariableNames {
  const char* launcher;
  const char* rank;
  const char* world;
  const char* local_rank;
};
// nullptr for "" (no launcher) or a name read_launch_environment never returns.
const LauncherVariableNames* launcher_variable_names(const std::string& launcher);

// torchrun's default MASTER_PORT, used when no MASTER_PORT is set (mpirun and srun set none).
inline constexpr int kMasterPortDefault = 29500;

struct IdExchangeAddress {
  std::string host;    // where rank 0 listens: a name or a numeric IPv4 / IPv6 address
  int port = 0;
  std::string origin;  // how host and port were chosen, quoted by every error, e.g. "MASTER_ADDR=node7"
};

// Where rank 0 serves the ncclUniqueId (nccl_id_exchange.h). The host is MASTER_ADDR. Without it (mpirun and srun set none) it is 127.0.0.1, which is right
// only when the whole job runs on one node: a job that spans nodes must export MASTER_ADDR as rank
// 0's host, and without it the other nodes' ranks time out with a message saying so (they never
// receive a wrong id). The port is port_argument when given, else ZERO3_NCCL_ID_PORT, else
// MASTER_PORT + 1 (29501 without MASTER_PORT). InputError naming the source of a port outside
// 1..65535 (MASTER_PORT=65535 has no port above it).
IdExchangeAddress id_exchange_address(const LaunchEnvironment& launch, std::optional<int> port_argument = std::nullopt);

}  // namespace zero3
