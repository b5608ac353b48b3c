// The ring fit recovers the latency and bandwidth it was made from, and calibration over a
// simulated world writes a profile that replay's hardware loader reads back.
#include "tools/bench/calibrate.h"

#include <gtest/gtest.h>

#include <sstream>

#include "sim/hardware_profile.h"
#include "sim/sim_world.h"

namespace zero3 {
namespace {

TEST(RingFit, RecoversTheLatencyAndBandwidthBehindExactTimes) {
  const HardwareProfile truth{.bandwidth_bytes_per_s = 3e9, .latency_s = 4e-6};
  std::vector<CollectiveSample> samples;
  for (CollectiveOp op : {CollectiveOp::all_gather, CollectiveOp::reduce_scatter, CollectiveOp::all_reduce}) {
    for (int64_t bytes = 4096; bytes <= (int64_t{16} << 20); bytes *= 4) {
      samples.push_back({op, bytes, collective_time_s(truth, op, bytes, 4)});
    }
  }
  const RingFit fit = fit_ring_model(samples, 4);
  EXPECT_NEAR(fit.latency_s, 4e-6, 1e-9);
  EXPECT_NEAR(fit.bytes_per_s, 3e9, 3e9 * 1e-6);
  EXPECT_LT(fit.worst_relative_error, 1e-6);
}

TEST(RingFit, SaysHowFarOffTheWorstPointIsWhenTheTimesAreNotARing) {
  std::vector<CollectiveSample> samples = {{CollectiveOp::all_gather, 4096, 1e-5},
                                           {CollectiveOp::all_gather, 65536, 1e-5},
                                           {CollectiveOp::all_gather, 1 << 20, 1e-3}};
  const RingFit fit = fit_ring_model(samples, 2);
  EXPECT_GT(fit.worst_relative_error, 0.1);
  EXPECT_GT(fit.bytes_per_s, 0.0);
  EXPECT_GE(fit.latency_s, 0.0);
}

TEST(Calibrate, AProfileMeasuredOverTwoSimulatedRanksHasEveryFigureWithItsSource) {
  nlohmann::json profile;
  SimWorld world({.world = 2, .fiber_stack_bytes = size_t{8} << 20});
  std::ostringstream progress;
  const SimResult result = world.run([&](SimRank& rank) {
    nlohmann::json mine = calibrate_machine(rank.comm(), cpu_kernels(),
                                            {.model = "mlp-tiny", .seconds_per_figure = 0.002, .backend = "sim"}, progress);
    if (rank.rank() == 0) profile = mine;
  });
  ASSERT_TRUE(result.all_ok()) << result.summary();
  EXPECT_GT(profile.at("peak_flops").get<double>(), 0.0);
  EXPECT_EQ(profile.at("flops_efficiency").get<double>(), 1.0);
  EXPECT_GT(profile.at("host_optimizer").at("elements_per_s").get<double>(), 0.0);
  EXPECT_NE(profile.at("source").get<std::string>().find("zero3 bench calibrate --backend sim --ranks 2"), std::string::npos);
  EXPECT_NE(profile.at("nvlink").at("source").get<std::string>().find("fitted to all_gather"), std::string::npos);
  EXPECT_EQ(profile.at("measured").at("collectives").at("fits").size(), 3u);
  EXPECT_FALSE(profile.at("measured").at("gemm").at("shapes").empty());
  EXPECT_EQ(profile.at("measured").at("collectives").at("rows").size(), 3u * 7u);  // 4 KiB to 16 MiB, x4
  EXPECT_NE(progress.str().find("calibrate: GEMMs at the shapes of mlp-tiny"), std::string::npos);
}

}  // namespace
}  // namespace zero3
