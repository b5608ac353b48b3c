// The thread count each process chooses: the user's variables first, then the node's cores shared
// among the launcher's local ranks, else every core.
#include "tools/runs/thread_budget.h"

#include <map>
#include <string>

#include <gtest/gtest.h>

namespace zero3 {
namespace {

EnvironmentLookup environment(std::map<std::string, std::string> variables) {
  return [variables = std::move(variables)](const char* name) -> const char* {
    auto it = variables.find(name);
    return it == variables.end() ? nullptr : it->second.c_str();
  };
}

TEST(ThreadBudget, LocalRanksShareTheNodesCores) {
  const ThreadChoice four = choose_threads(environment({{"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}), 2);
  EXPECT_EQ(four.threads, 1);  // never 0, even with more ranks than cores
  EXPECT_NE(four.description.find("2 cores shared by 4 local ranks (OMPI_COMM_WORLD_LOCAL_SIZE"), std::string::npos)
      << four.description;
  EXPECT_EQ(choose_threads(environment({{"LOCAL_WORLD_SIZE", "4"}}), 16).threads, 4);     // torchrun
  EXPECT_EQ(choose_threads(environment({{"SLURM_NTASKS_PER_NODE", "2(x3)"}}), 8).threads, 4);
}

TEST(ThreadBudget, TheUsersVariablesWin) {
  const ThreadChoice chosen =
      choose_threads(environment({{"OMP_NUM_THREADS", "3"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}), 2);
  EXPECT_EQ(chosen.threads, 3);
  EXPECT_NE(chosen.description.find("OMP_NUM_THREADS"), std::string::npos);
  EXPECT_EQ(choose_threads(environment({{"OPENBLAS_NUM_THREADS", "5"}}), 2).threads, 5);
}

TEST(ThreadBudget, WithoutALauncherEveryCoreAndNonsenseIsIgnored) {
  EXPECT_EQ(choose_threads(environment({}), 6).threads, 6);
  EXPECT_EQ(choose_threads(environment({{"OMP_NUM_THREADS", "zero"}, {"LOCAL_WORLD_SIZE", "-2"}}), 6).threads, 6);
}

}  // namespace
}  // namespace zero3
