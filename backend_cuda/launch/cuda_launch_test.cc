// The CUDA launch-mode decision on every branch: one process for all GPUs without a launcher, one
// process per GPU under torchrun / mpirun / srun, and the errors in between. CPU only.
#include "backend_cuda/launch/cuda_launch.h"

#include <functional>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "core/base/errors.h"

namespace zero3 {
namespace {

LaunchEnvironment launch_from(const std::map<std::string, std::string>& variables) {
  return read_launch_environment([&](const char* name) -> const char* {
    const auto found = variables.find(name);
    return found == variables.end() ? nullptr : found->second.c_str();
  });
}

const LaunchEnvironment kTorchrunRank5 = launch_from({{"RANK", "5"}, {"WORLD_SIZE", "16"}, {"LOCAL_RANK", "1"}});

// What plan_cuda_launch threw, as "InputError (exit 1): message"; "no error" when it returned.
std::string error_of(const std::function<void()>& plan) {
  try {
    plan();
  } catch (const InputError& error) {
    return "InputError (exit " + std::to_string(error.exit_code()) + "): " + error.what();
  } catch (const BackendError& error) {
    return "BackendError (exit " + std::to_string(error.exit_code()) + "): " + error.what();
  }
  return "no error";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(CudaLaunch, WithoutALauncherOneProcessDrivesEveryVisibleGpu) {
  const LaunchEnvironment no_launcher = launch_from({});
  for (const LaunchEnvironment* launch : {static_cast<const LaunchEnvironment*>(nullptr), &no_launcher}) {
    const CudaLaunchPlan plan = plan_cuda_launch(launch, 4, std::nullopt);
    EXPECT_EQ(plan.mode, CudaLaunchPlan::single_process_all_gpus);
    EXPECT_EQ(plan.world, 4);
    EXPECT_EQ(plan.rank, 0);
    EXPECT_EQ(plan.local_rank, 0);
    EXPECT_EQ(plan.device_index, 0);
    EXPECT_EQ(plan.launcher, "");
  }
}

TEST(CudaLaunch, WithoutALauncherGpusChoosesHowManyOfTheVisibleGpusOneProcessDrives) {
  const CudaLaunchPlan plan = plan_cuda_launch(nullptr, 8, 2);
  EXPECT_EQ(plan.mode, CudaLaunchPlan::single_process_all_gpus);
  EXPECT_EQ(plan.world, 2);
  EXPECT_EQ(plan_cuda_launch(nullptr, 8, 8).world, 8);
}

TEST(CudaLaunch, MoreGpusThanVisibleIsABackendErrorNamingBothNumbers) {
  const std::string error = error_of([] { plan_cuda_launch(nullptr, 2, 3); });
  EXPECT_TRUE(contains(error, "BackendError (exit 4)")) << error;
  EXPECT_TRUE(contains(error, "--gpus 3")) << error;
  EXPECT_TRUE(contains(error, "2 GPUs are visible")) << error;
}

TEST(CudaLaunch, NoVisibleGpuIsABackendError) {
  const std::string error = error_of([] { plan_cuda_launch(nullptr, 0, std::nullopt); });
  EXPECT_TRUE(contains(error, "BackendError (exit 4)")) << error;
  EXPECT_TRUE(contains(error, "no GPU is visible")) << error;
  EXPECT_TRUE(contains(error_of([] { plan_cuda_launch(&kTorchrunRank5, 0, std::nullopt); }), "BackendError (exit 4)"));
}

TEST(CudaLaunch, GpusBelowOneIsAnInputError) {
  const std::string error = error_of([] { plan_cuda_launch(nullptr, 2, 0); });
  EXPECT_TRUE(contains(error, "InputError (exit 1): --gpus 0: expected at least 1")) << error;
}

TEST(CudaLaunch, UnderEachLauncherOneProcessDrivesTheGpuOfItsLocalRank) {
  const CudaLaunchPlan torchrun = plan_cuda_launch(&kTorchrunRank5, 8, std::nullopt);
  EXPECT_EQ(torchrun.mode, CudaLaunchPlan::process_per_gpu);
  EXPECT_EQ(torchrun.world, 16);
  EXPECT_EQ(torchrun.rank, 5);
  EXPECT_EQ(torchrun.local_rank, 1);
  EXPECT_EQ(torchrun.device_index, 1);
  EXPECT_EQ(torchrun.launcher, "torchrun");

  const LaunchEnvironment mpirun =
      launch_from({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "3"}});
  const CudaLaunchPlan mpi_plan = plan_cuda_launch(&mpirun, 4, std::nullopt);
  EXPECT_EQ(mpi_plan.mode, CudaLaunchPlan::process_per_gpu);
  EXPECT_EQ(mpi_plan.device_index, 3);
  EXPECT_EQ(mpi_plan.launcher, "mpirun");

  const LaunchEnvironment srun = launch_from({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_LOCALID", "0"}});
  const CudaLaunchPlan srun_plan = plan_cuda_launch(&srun, 1, std::nullopt);
  EXPECT_EQ(srun_plan.mode, CudaLaunchPlan::process_per_gpu);
  EXPECT_EQ(srun_plan.world, 1);
  EXPECT_EQ(srun_plan.device_index, 0);
  EXPECT_EQ(srun_plan.launcher, "srun");
}

TEST(CudaLaunch, ALocalRankWithoutAGpuOfItsOwnIsAnInputErrorNamingTheVariable) {
  const LaunchEnvironment srun = launch_from({{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "2"}});
  const std::string error = error_of([&] { plan_cuda_launch(&srun, 2, std::nullopt); });
  EXPECT_TRUE(contains(error, "InputError (exit 1): SLURM_LOCALID=2 has no GPU of its own")) << error;
  EXPECT_TRUE(contains(error, "2 GPUs are visible")) << error;

  const std::string one_gpu = error_of([] { plan_cuda_launch(&kTorchrunRank5, 1, std::nullopt); });
  EXPECT_TRUE(contains(one_gpu, "LOCAL_RANK=1 has no GPU of its own: 1 GPU is visible")) << one_gpu;
}

TEST(CudaLaunch, GpusUnderALauncherIsAnInputErrorSayingTheLaunchersWorldCounts) {
  const std::string error = error_of([] { plan_cuda_launch(&kTorchrunRank5, 8, 4); });
  EXPECT_TRUE(contains(error, "InputError (exit 1): --gpus 4")) << error;
  EXPECT_TRUE(contains(error, "the launcher's world counts (WORLD_SIZE=16)")) << error;
  const std::string too_many = error_of([] { plan_cuda_launch(&kTorchrunRank5, 8, 32); });
  EXPECT_TRUE(contains(too_many, "InputError (exit 1)")) << "the launcher's rule comes first: " << too_many;
}

}  // namespace
}  // namespace zero3
