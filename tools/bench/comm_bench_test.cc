// The comm benchmark moves correct data (#wrong 0), reports ratios to memcpy, and skips sizes over
// its buffer budget saying why.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "tools/bench/comm_bench.h"

namespace zero3 {
namespace {

TEST(CommBench, SmallSizesHaveNoWrongElementsAndReportRatiosToMemcpy) {
  std::ostringstream out;
  const CommBenchResult result =
      run_comm_bench({.world = 3, .seed = 4, .bytes_min = 1 << 10, .bytes_max = 16 << 10}, out);
  ASSERT_EQ(result.rows.size(), 6u) << out.str();
  for (const CommBenchRow& row : result.rows) {
    EXPECT_EQ(row.wrong, 0) << row.op << " " << row.bytes;
    EXPECT_EQ(row.bytes, row.count * 3 * 4);
    EXPECT_GT(row.ratio_to_memcpy, 0.0);
    EXPECT_DOUBLE_EQ(row.busbw_gbps, row.algbw_gbps * 2.0 / 3.0);
    // The ratio counts what the ranks receive: all of it on every rank for a gather, one block
    // each for a reduce-scatter.
    EXPECT_EQ(row.delivered_bytes, row.op == "all_gather" ? 3 * row.bytes : row.bytes) << row.op;
    EXPECT_NEAR(row.ratio_to_memcpy,
                static_cast<double>(row.delivered_bytes) / (row.time_us * 1e-6) / 1e9 / row.memcpy_gbps,
                1e-9 * row.ratio_to_memcpy)
        << row.op << " " << row.bytes;
  }
  EXPECT_NE(out.str().find("all_gather"), std::string::npos);
  const std::string path = (std::filesystem::temp_directory_path() / "zero3_comm_bench_test.json").string();
  write_comm_bench_report(result, path);
  std::ifstream file(path);
  const nlohmann::json report = nlohmann::json::parse(file);
  EXPECT_TRUE(report["ratio_to_memcpy"]["all_gather"].contains("1020"));  // 1 KiB rounded down to 85 * 3 * 4
  EXPECT_TRUE(report["ratio_to_memcpy"]["reduce_scatter"].contains("16380"));
  std::filesystem::remove(path);
}

TEST(CommBench, SizesOverTheBufferBudgetAreSkippedAndSaidSo) {
  std::ostringstream out;
  const CommBenchResult result =
      run_comm_bench({.world = 2, .bytes_min = 1 << 10, .bytes_max = 4 << 10, .memory_bytes_max = 10 << 10}, out);
  EXPECT_EQ(result.rows.size(), 2u);     // 1 KiB for both ops
  EXPECT_EQ(result.skipped.size(), 2u);  // 4 KiB needs 5 * 4 KiB
  EXPECT_NE(out.str().find("# skipped all_gather 4 KiB: needs"), std::string::npos) << out.str();
  EXPECT_THROW(run_comm_bench({.world = 0}, out), InputError);
}

}  // namespace
}  // namespace zero3
