// Who started this process, and as which rank of how many: the variables a launcher sets, read
// once and shared by the MPI backend and the CUDA backend's one-process-per-GPU mode.
//
//   torchrun  RANK, WORLD_SIZE, LOCAL_RANK (and MASTER_ADDR, MASTER_PORT)
//   mpirun    OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK
//   srun      SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID
//
// MASTER_ADDR and MASTER_PORT are read under every launcher: torchrun sets them, and a job script
// under mpirun or srun may export them to say where rank 0 is. ZERO3_NCCL_ID_PORT, read alongside,
// moves the ncclUniqueId exchange off its default port (nccl_id_exchange.h).
//
// Precedence is that order. SLURM variables leak into every job step inside an sbatch
// allocation, so a torchrun or mpirun started there sees them too: when two launchers' variables
// disagree the first one wins and a warning names both sets, never silently.
//
//   LaunchEnvironment launch = read_launch_environment();
//   for (const std::string& warning : launch.warnings) std::fprintf(stderr, "warning: %s\n", ...);
#pragma once
#include <functional>
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

}  // namespace zero3
