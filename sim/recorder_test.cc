// The event log: per-rank order, a hash over a canonical serialisation, atomic JSON output;
// collective events kept as fields, with the JSON form and the hash of every field.
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

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


CollectiveEvent reduce_scatter_event() {
  return CollectiveEvent{
      .sequence = 7,
      .signature = {.op = CollectiveOp::reduce_scatter, .dtype = DType::bf16, .count = 12, .root = -1,
                    .reduce = ReduceOp::sum},
      .bytes = 96,
      .meta = false,
      .site = std::make_shared<const CallSite>(
          CallSite{.module = "h.0.attn", .params = {"h.0.attn.qkv", "h.0.attn.proj"}, .step = 3, .phase = "backward"}),
      .issue_s = 1e-3,
      .start_s = 2e-3,
      .end_s = 2.5e-3};
}

uint64_t hash_of(const CollectiveEvent& event) {
  Recorder recorder(1);
  recorder.record_collective(0, event);
  return recorder.hash();
}

TEST(Recorder, ACollectiveEventIsLoggedAsTheJsonObjectOfAllItsFields) {
  Recorder recorder(1);
  recorder.record_collective(0, reduce_scatter_event());
  CollectiveEvent broadcast = reduce_scatter_event();
  broadcast.signature = {.op = CollectiveOp::broadcast, .dtype = DType::f32, .count = 5, .root = 2};
  broadcast.meta = true;
  recorder.record_collective(0, broadcast);
  const std::vector<nlohmann::json> events = recorder.events(0);
  ASSERT_EQ(events.size(), 2u);
  const nlohmann::json params = {"h.0.attn.qkv", "h.0.attn.proj"};
  EXPECT_EQ(events[0], (nlohmann::json{{"type", "collective"}, {"seq", 7}, {"op", "reduce_scatter"}, {"dtype", "bf16"},
                                       {"count", 12}, {"bytes", 96}, {"meta", false}, {"module", "h.0.attn"},
                                       {"params", params}, {"step", 3}, {"phase", "backward"}, {"issue_s", 1e-3},
                                       {"start_s", 2e-3}, {"end_s", 2.5e-3}, {"reduce", "sum"}}));
  EXPECT_EQ(events[1], (nlohmann::json{{"type", "collective"}, {"seq", 7}, {"op", "broadcast"}, {"dtype", "f32"},
                                       {"count", 5}, {"bytes", 96}, {"meta", true}, {"module", "h.0.attn"},
                                       {"params", params}, {"step", 3}, {"phase", "backward"}, {"issue_s", 1e-3},
                                       {"start_s", 2e-3}, {"end_s", 2.5e-3}, {"root", 2}}));
}

TEST(Recorder, TheHashOfACollectiveEventChangesWithEachOfItsFieldsAndNotWithWhereItsSiteLives) {
  const uint64_t base = hash_of(reduce_scatter_event());
  EXPECT_EQ(hash_of(reduce_scatter_event()), base);  // another copy of every string, the same hash
  const auto with_site = [](CollectiveEvent& event, const std::function<void(CallSite&)>& change) {
    CallSite site = *event.site;
    change(site);
    event.site = std::make_shared<const CallSite>(site);
  };
  const std::vector<std::pair<std::string, std::function<void(CollectiveEvent&)>>> changes = {
      {"sequence", [](CollectiveEvent& event) { event.sequence = 8; }},
      {"op", [](CollectiveEvent& event) { event.signature.op = CollectiveOp::all_reduce; }},
      {"dtype", [](CollectiveEvent& event) { event.signature.dtype = DType::f32; }},
      {"count", [](CollectiveEvent& event) { event.signature.count = 13; }},
      {"reduce", [](CollectiveEvent& event) { event.signature.reduce = ReduceOp::max; }},
      {"bytes", [](CollectiveEvent& event) { event.bytes = 97; }},
      {"meta", [](CollectiveEvent& event) { event.meta = true; }},
      {"module", [&](CollectiveEvent& event) { with_site(event, [](CallSite& site) { site.module = "h.1.attn"; }); }},
      {"params", [&](CollectiveEvent& event) { with_site(event, [](CallSite& site) { site.params.pop_back(); }); }},
      {"param split", [&](CollectiveEvent& event) {
         with_site(event, [](CallSite& site) { site.params = {"h.0.attn.qkvh.0", ".attn.proj"}; });
       }},
      {"step", [&](CollectiveEvent& event) { with_site(event, [](CallSite& site) { site.step = 4; }); }},
      {"phase", [&](CollectiveEvent& event) { with_site(event, [](CallSite& site) { site.phase = "forward"; }); }},
      {"issue_s", [](CollectiveEvent& event) { event.issue_s = 1.5e-3; }},
      {"start_s", [](CollectiveEvent& event) { event.start_s = 2.25e-3; }},
      {"end_s", [](CollectiveEvent& event) { event.end_s = 3e-3; }},
  };
  for (const auto& [field, change] : changes) {
    CollectiveEvent event = reduce_scatter_event();
    change(event);
    EXPECT_NE(hash_of(event), base) << field;
  }
  CollectiveEvent broadcast = reduce_scatter_event();
  broadcast.signature = {.op = CollectiveOp::broadcast, .dtype = DType::bf16, .count = 12, .root = 0};
  CollectiveEvent other_root = broadcast;
  other_root.signature.root = 1;
  EXPECT_NE(hash_of(broadcast), hash_of(other_root)) << "root";
}

TEST(Recorder, CollectiveAndJsonEventsKeepTheirOrderAndBothCountInTheHash) {
  Recorder recorder(1);
  recorder.record(0, {{"type", "status"}, {"value", 1}});
  recorder.record_collective(0, reduce_scatter_event());
  recorder.record(0, {{"type", "exit"}});
  const std::vector<nlohmann::json> events = recorder.events(0);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0]["type"], "status");
  EXPECT_EQ(events[1]["type"], "collective");
  EXPECT_EQ(events[2]["type"], "exit");
  Recorder swapped(1);
  swapped.record_collective(0, reduce_scatter_event());
  swapped.record(0, {{"type", "status"}, {"value", 1}});
  swapped.record(0, {{"type", "exit"}});
  EXPECT_NE(recorder.hash(), swapped.hash());
}

}  // namespace
}  // namespace zero3
