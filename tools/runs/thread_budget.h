// Threads that fit the node. Every rank process a launcher starts would otherwise run as many
// OpenMP and OpenBLAS threads as the machine has cores: 4 ranks of `mpirun --oversubscribe -np 4`
// on 2 cores trained 6x slower than with one thread each. And an OpenMP thread that waits for
// work spins by default, so one busy process beside a run slowed a step 4x instead of 2x.
//
//   int main(int argc, char** argv) {
//     wait_passively(argv);                          // first: may re-execute the program once
//     const ThreadChoice threads = fit_threads_to_the_node();
//     std::printf("threads: %s\n", threads.description.c_str());
#pragma once
#include <functional>
#include <string>

namespace zero3 {

struct ThreadChoice {
  int threads = 1;           // for OpenMP's loops and OpenBLAS's GEMMs, per process
  std::string description;   // "1 per rank: 2 cores shared by 4 local ranks (OMPI_COMM_WORLD_LOCAL_SIZE)"
};

using EnvironmentLookup = std::function<const char*(const char* name)>;

// The choice, without applying it: OMP_NUM_THREADS (or OPENBLAS_NUM_THREADS) as the user set it;
// else, under a launcher that says how many ranks share this node, the node's cores divided among
// them (at least 1), as torchrun's one thread per process does; else every core.
ThreadChoice choose_threads(const EnvironmentLookup& lookup, int cores);
// Chooses with getenv and this process's CPU affinity, and sets OpenMP's and OpenBLAS's thread
// counts to it. Results are the same bits at every count (the kernels' loops split independent
// items only), so the choice changes speed, never results.
ThreadChoice fit_threads_to_the_node();
// The choice made by fit_threads_to_the_node, for banners ("" before it ran).
const ThreadChoice& thread_choice();

// OpenMP reads its wait policy once, when the runtime loads, before main: when OMP_WAIT_POLICY is
// unset this sets it to passive and re-executes the program (same arguments, same process id, so
// launchers see nothing). Waiting threads then sleep instead of spinning; a failed exec continues
// with the spinning default.
void wait_passively(char** argv);

}  // namespace zero3
