// The ring fit recovers the latency and bandwidth it was made from, and calibration over a
// simulated world writes a profile that replay's hardware loader reads back.
#include "tools/bench/calibrate.h"

#include <gtest/gtest.h>

#include <sstream>

#include "sim/hardware_profile.h"
#include "sim/sim_world.h"
#include "traces/replay/hardware_catalog.h"

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

TEST(Calibrate, MeasuresTheKernelWorkRatesAtTheModelsShapesAndReplaysLoaderReadsThemBack) {
  nlohmann::json profile;
  SimWorld world({.world = 1, .fiber_stack_bytes = size_t{8} << 20});
  std::ostringstream progress;
  const SimResult result = world.run([&](SimRank& rank) {
    profile = calibrate_machine(rank.comm(), cpu_kernels(),
                                {.model = "gpt-tiny", .seconds_per_figure = 0.002, .backend = "sim",
                                 .measure_collectives = false},
                                progress);
  });
  ASSERT_TRUE(result.all_ok()) << result.summary();
  for (const auto& [key, figure] : {std::pair{"memory_bandwidth", "bytes_per_s"}, std::pair{"transcendentals", "per_s"},
                                    std::pair{"kernel_call", "seconds"}}) {
    SCOPED_TRACE(key);
    EXPECT_GT(profile.at(key).at(figure).get<double>(), 0.0);
    EXPECT_FALSE(profile.at(key).at("source").get<std::string>().empty());
  }
  EXPECT_NE(profile.at("memory_bandwidth").at("source").get<std::string>().find("gpt-tiny's activation shapes"),
            std::string::npos);
  const nlohmann::json& measured = profile.at("measured").at("kernel_work");
  EXPECT_EQ(measured.at("call").size(), 1u);
  // gpt-tiny's widths each get an add, a copy and a bias sum; GELU at every width but the vocabulary's.
  EXPECT_EQ(measured.at("memory_bound").size() % 3, 0u);
  EXPECT_GE(measured.at("memory_bound").size(), 6u);
  bool cross_entropy = false, softmax = false;
  for (const auto& row : measured.at("transcendental")) {
    EXPECT_GT(row.at("transcendentals").get<double>(), 0.0) << row.dump();
    cross_entropy = cross_entropy || row.at("kernel").get<std::string>().starts_with("cross_entropy");
    softmax = softmax || row.at("kernel").get<std::string>().starts_with("causal_softmax");
  }
  EXPECT_TRUE(cross_entropy);
  EXPECT_TRUE(softmax);
  const HardwareChoice loaded = hardware_from_json(profile, "calibrated.json", 1);
  EXPECT_TRUE(loaded.kernel_rates.prices_work());
  EXPECT_EQ(loaded.kernel_rates.memory_bytes_per_s, profile.at("memory_bandwidth").at("bytes_per_s").get<double>());
}

}  // namespace
}  // namespace zero3
