// Reading the launcher's variables (launch_environment.h).
#include "backend_cuda/launch/launch_environment.h"

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <optional>

#include "core/base/errors.h"

namespace zero3 {

namespace {

constexpr LauncherVariableNames kLaunchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};

int parse_int(const char* name, const char* text, int low, int high, const std::string& expected) {
  int value = 0;
  const char* end = text + std::char_traits<char>::length(text);
  const auto [last, error] = std::from_chars(text, end, value);
  if (error != std::errc() || last != end || value < low || value > high) {
    throw InputError(std::string("launch environment: ") + name + "=" + text + ": expected " + expected);
  }
  return value;
}

std::string describe(const LauncherVariableNames& names, const LaunchEnvironment& found) {
  return std::string(names.rank) + "=" + std::to_string(found.rank) + " " + names.world + "=" +
         std::to_string(found.world) + " (" + names.launcher + ")";
}

// One launcher's view, or nothing when none of its variables is set.
std::optional<LaunchEnvironment> read_launcher(const LauncherVariableNames& names, const EnvironmentLookup& lookup) {
  const char* rank = lookup(names.rank);
  const char* world = lookup(names.world);
  const char* local_rank = lookup(names.local_rank);
  if (!rank && !world) return std::nullopt;
  if (!rank || !world) {
    throw InputError(std::string("launch environment: ") + (rank ? names.rank : names.world) + " is set but " +
                     (rank ? names.world : names.rank) + " is not: expected both, as " + names.launcher + " sets them");
  }
  LaunchEnvironment found;
  found.launcher = names.launcher;
  found.world = parse_int(names.world, world, 1, 1 << 20, "a world size of at least 1");
  found.rank = parse_int(names.rank, rank, 0, found.world - 1,
                         "a rank from 0 to " + std::to_string(found.world - 1) + " (" + names.world + "=" + world + ")");
  if (local_rank) found.local_rank = parse_int(names.local_rank, local_rank, 0, found.world - 1, "a local rank below the world size");
  return found;
}

int checked_port(int64_t port, const std::string& source) {
  if (port < 1 || port > 65535) {
    throw InputError("nccl id exchange: " + source + " gives port " + std::to_string(port) +
                     ": expected a TCP port from 1 to 65535");
  }
  return static_cast<int>(port);
}

}  // namespace

LaunchEnvironment read_launch_environment(const EnvironmentLookup& lookup_or_default) {
  const EnvironmentLookup lookup =
      lookup_or_default ? lookup_or_default : EnvironmentLookup([](const char* name) { return std::getenv(name); });
  std::optional<LaunchEnvironment> chosen;
  const LauncherVariableNames* chosen_names = nullptr;
  for (const LauncherVariableNames& names : kLaunchers) {
    const std::optional<LaunchEnvironment> found = read_launcher(names, lookup);
    if (!found) continue;
    if (!chosen) {
      chosen = found;
      chosen_names = &names;
    } else if (found->rank != chosen->rank || found->world != chosen->world) {
      chosen->warnings.push_back("launchers disagree: " + describe(*chosen_names, *chosen) + " but " +
                                 describe(names, *found) + "; using " + chosen->launcher + "'s");
    }
  }
  if (!chosen) return LaunchEnvironment{};
  if (const char* addr = lookup("MASTER_ADDR")) chosen->master_addr = addr;
  if (const char* port = lookup("MASTER_PORT")) chosen->master_port = parse_int("MASTER_PORT", port, 1, 65535, "a TCP port");
  if (const char* port = lookup("ZERO3_NCCL_ID_PORT")) {
    chosen->nccl_id_port = parse_int("ZERO3_NCCL_ID_PORT", port, 1, 65535, "a TCP port");
  }
  return *chosen;
}

const LauncherVariableNames* launcher_variable_names(const std::string& launcher) {
  for (const LauncherVariableNames& names : kLaunchers) {
    if (launcher == names.launcher) return &names;
  }
  return nullptr;
}

IdExchangeAddress id_exchange_address(const LaunchEnvironment& launch, std::optional<int> port_argument) {
  IdExchangeAddress address;
  std::string host_origin;
  if (!launch.master_addr.empty()) {
    address.host = launch.master_addr;
    host_origin = "MASTER_ADDR=" + launch.master_addr;
  } else {
    address.host = "127.0.0.1";
    host_origin = "MASTER_ADDR unset, so 127.0.0.1: right only when the whole job runs on one node";
  }
  std::string port_origin;
  if (port_argument) {
    address.port = checked_port(*port_argument, "the port argument");
    port_origin = "port argument " + std::to_string(address.port);
  } else if (launch.nccl_id_port != 0) {
    address.port = checked_port(launch.nccl_id_port, "ZERO3_NCCL_ID_PORT");
    port_origin = "ZERO3_NCCL_ID_PORT=" + std::to_string(address.port);
  } else {
    const bool master_port_set = launch.master_port != 0;
    const int master_port = master_port_set ? launch.master_port : kMasterPortDefault;
    const std::string source = master_port_set ? "MASTER_PORT=" + std::to_string(master_port) : "the default MASTER_PORT";
    if (master_port >= 65535) {
      throw InputError("nccl id exchange: " + source + " leaves no port above it for the ncclUniqueId exchange "
                       "(MASTER_PORT + 1): choose one with ZERO3_NCCL_ID_PORT");
    }
    address.port = checked_port(int64_t{master_port} + 1, source + " + 1");
    port_origin = master_port_set ? source + " + 1" : "MASTER_PORT unset, so " + std::to_string(kMasterPortDefault) + " + 1";
  }
  address.origin = host_origin + "; " + port_origin;
  return address;
}

}  // namespace zero3
