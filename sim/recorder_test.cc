// The event log: per-rank order, a hash over a canonical serialisation, atomic JSON output.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "sim/recorder.h"

namespace zero3 {
namespace {

TEST(Recorder, TheHashDependsOnEveryEventAndOnWhichRankLoggedIt) {
  const auto hash_of = [](int rank_of_second, int value) {
    Recorder recorder(2);
    recorder.record(0, {{"type", "status"}, {"value", 1}});
    recorder.record(rank_of_second, {{"type", "status"}, {"value", value}});
    return recorder.hash();
  };
  EXPECT_EQ(hash_of(1, 2), hash_of(1, 2));
  EXPECT_NE(hash_of(1, 2), hash_of(1, 3));
  EXPECT_NE(hash_of(1, 2), hash_of(0, 2));
}

TEST(Recorder, KeyOrderInAnEventDoesNotChangeTheHash) {
  Recorder first(1);
  Recorder second(1);
  first.record(0, nlohmann::json::parse(R"({"a": 1, "b": 2})"));
  second.record(0, nlohmann::json::parse(R"({"b": 2, "a": 1})"));
  EXPECT_EQ(first.hash(), second.hash());
}

TEST(Recorder, WritesTheLogAsJsonWithItsHash) {
  Recorder recorder(2);
  recorder.record(1, {{"type", "memory"}, {"bytes", 4096}});
  recorder.record_every_rank({{"type", "fault"}});
  const std::string path = (std::filesystem::temp_directory_path() / "zero3_recorder_test.json").string();
  recorder.write_json(path);
  std::ifstream file(path);
  const nlohmann::json log = nlohmann::json::parse(file);
  EXPECT_EQ(log["world"], 2);
  EXPECT_EQ(log["hash"], hex64(recorder.hash()));
  EXPECT_EQ(log["ranks"][0].size(), 1u);
  EXPECT_EQ(log["ranks"][1][0]["bytes"], 4096);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace zero3
