// Thread counts and the OpenMP wait policy (thread_budget.h).
#include "tools/runs/thread_budget.h"

#include <sched.h>
#include <unistd.h>

#include <cblas.h>
#include <omp.h>

#include <cstdlib>
#include <string>

namespace zero3 {

namespace {

int positive(const char* text) {
  if (text == nullptr) return 0;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  return end != text && value > 0 && value < (1 << 20) ? static_cast<int>(value) : 0;
}

int affinity_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

ThreadChoice& chosen() {
  static ThreadChoice choice;
  return choice;
}

}  // namespace

ThreadChoice choose_threads(const EnvironmentLookup& lookup, int cores) {
  for (const char* variable : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"}) {
    if (const int threads = positive(lookup(variable))) return {threads, std::to_string(threads) + " (" + variable + ")"};
  }
  // OpenMPI, torchrun, MPICH's Hydra and Slurm say how many of the job's ranks run on this node.
  for (const char* variable : {"OMPI_COMM_WORLD_LOCAL_SIZE", "LOCAL_WORLD_SIZE", "MPI_LOCALNRANKS",
                               "SLURM_NTASKS_PER_NODE"}) {
    if (const int local_ranks = positive(lookup(variable))) {
      const int threads = std::max(1, cores / local_ranks);
      return {threads, std::to_string(threads) + " per rank: " + std::to_string(cores) + " cores shared by " +
                           std::to_string(local_ranks) + " local ranks (" + variable +
                           "; OMP_NUM_THREADS overrides)"};
    }
  }
  return {cores, std::to_string(cores) + " (every core; OMP_NUM_THREADS overrides)"};
}

ThreadChoice fit_threads_to_the_node() {
  chosen() = choose_threads([](const char* name) { return std::getenv(name); }, affinity_cores());
  omp_set_num_threads(chosen().threads);
  openblas_set_num_threads(chosen().threads);
  return chosen();
}

const ThreadChoice& thread_choice() { return chosen(); }

void wait_passively(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
  execv("/proc/self/exe", argv);
  // Still here: the exec failed. The variable stays set for child processes; this one spins.
}

}  // namespace zero3
