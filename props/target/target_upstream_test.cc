// The upstream table (traces/findings/upstream.json): every finding kept in traces/findings/ has a
// row, rows match on target, signature and what the shrunk case holds (the first that matches
// wins), and a malformed table is refused naming the file and the JSON path.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/base/errors.h"
#include "props/target/target_upstream.h"

namespace zero3 {
namespace {

TargetCase case_with(const std::string& layers_json, const std::string& raw_access = "cached_reference") {
  TargetCase target_case;
  target_case.run.model_spec = nlohmann::json::parse(R"({"zero3_model_spec": 1, "kind": "sequential", "input_width": 2,
                                                         "loss": "mse", "layers": )" + layers_json + "}");
  target_case.run.world = 2;
  target_case.raw_access = raw_access;
  return target_case;
}

std::string write_table(const std::string& name, const nlohmann::json& json) {
  const std::string path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path) << json.dump(1);
  return path;
}

nlohmann::json row(const std::string& id, const std::string& signature, nlohmann::json match_extra = nlohmann::json::object()) {
  nlohmann::json match = {{"signature", signature}};
  match.update(match_extra);
  return {{"id", id}, {"target", "fsdp2"}, {"title", id}, {"match", match}, {"status", "unknown"},
          {"upstream", nlohmann::json::array()}, {"checked", "2026-12-06"}, {"mechanism", "m"},
          {"evidence", "hypothesis: h"}};
}

TEST(UpstreamTable, EveryFindingKeptInTheRepositoryHasARow) {
  const UpstreamTable table = read_upstream_table(default_upstream_table_path());
  int findings = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(ZERO3_SOURCE_DIR) / "traces/findings")) {
    if (entry.path().extension() != ".json" || entry.path().filename() == "upstream.json") continue;
    findings++;
    const nlohmann::json saved = nlohmann::json::parse(std::ifstream(entry.path()));
    ASSERT_TRUE(saved.contains("verdict_signature") && saved.contains("target")) << entry.path();
    const TargetCase shrunk = read_target_case(entry.path().string());
    const UpstreamRow* found = table.match(saved["target"], saved["verdict_signature"], shrunk, saved.value("message", ""));
    EXPECT_NE(found, nullptr) << entry.path() << ": no row of " << table.path << " matches "
                              << saved["verdict_signature"];
  }
  EXPECT_GE(findings, 4);
  // And every finding of the campaigns kept beside them (tools/findings_table.py --collect).
  const std::filesystem::path campaigns = std::filesystem::path(ZERO3_SOURCE_DIR) / "traces/findings/campaigns";
  if (!std::filesystem::exists(campaigns)) return;
  for (const auto& campaign : std::filesystem::directory_iterator(campaigns)) {
    const std::filesystem::path report_path = campaign.path() / "report.json";
    if (!std::filesystem::exists(report_path)) continue;
    const nlohmann::json report = nlohmann::json::parse(std::ifstream(report_path));
    for (const auto& finding : report.at("findings")) {
      const std::string case_file = (campaign.path() / finding.at("case_file").get<std::string>()).string();
      const UpstreamRow* found = table.match(report.at("target"), finding.at("signature"), read_target_case(case_file),
                                            finding.value("message", ""));
      EXPECT_NE(found, nullptr) << case_file << ": no row of " << table.path << " matches " << finding.at("signature");
    }
  }
}

TEST(UpstreamTable, TheFirstRowWhoseSignatureAndCaseMatchWins) {
  const nlohmann::json json = {
      {"schema", 1},
      {"findings", {row("moe-divergence", "^silent_divergence in the gradient norm$", {{"layers", {"moe"}}}),
                    row("cached", "^silent_divergence", {{"raw_access", "cached_reference"}}),
                    row("any-divergence", "^silent_divergence")}}};
  const UpstreamTable table = read_upstream_table(write_table("zero3-upstream-order.json", json));
  const TargetCase moe = case_with(R"([{"type": "residual", "layers": [{"type": "moe", "experts": 2, "hidden": 2}]}])");
  const TargetCase cached = case_with(R"([{"type": "scale", "shape": [2]}, {"type": "raw_scale", "param": "layers.0.scale"}])");
  const TargetCase cached_elsewhere = case_with(R"([{"type": "raw_scale", "shape": [2]}])", "own_forward");
  EXPECT_EQ(table.match("fsdp2", "silent_divergence in the gradient norm", moe, "")->id, "moe-divergence")
      << "a layer type nested in a container counts";
  EXPECT_EQ(table.match("fsdp2", "silent_divergence in the loss", moe, "")->id, "any-divergence");
  EXPECT_EQ(table.match("fsdp2", "silent_divergence in the loss", cached, "")->id, "cached");
  EXPECT_EQ(table.match("fsdp2", "silent_divergence in the loss", cached_elsewhere, "")->id, "any-divergence");
  EXPECT_EQ(table.match("deepspeed", "silent_divergence in the loss", cached, ""), nullptr) << "rows are per target";
  EXPECT_EQ(table.match("fsdp2", "hang", cached, ""), nullptr);
  EXPECT_EQ(upstream_status_line(nullptr, table), "not in " + table.path + ": not looked up upstream yet");
  EXPECT_EQ(upstream_status_line(table.match("fsdp2", "silent_divergence in the loss", cached, ""), table),
            "no upstream report found (checked 2026-12-06)");
}

// A row's message pattern tells apart findings whose signature and case look alike: a final weight
// of the wrong shape is another failure than one of the wrong value.
TEST(UpstreamTable, ARowWithAMessagePatternMatchesOnlyTheFindingsWhoseMessageHoldsIt) {
  const nlohmann::json json = {
      {"schema", 1},
      {"findings", {row("wrong-shape", "^silent_divergence in the final weights$",
                        {{"message", R"(has shape \[0,0\], the reference \[[1-9])"}}),
                    row("any-divergence", "^silent_divergence")}}};
  const UpstreamTable table = read_upstream_table(write_table("zero3-upstream-message.json", json));
  const TargetCase any = case_with("[]");
  const std::string shape = "final weights: layers.0.weight has shape [0,0], the reference [5,0]";
  EXPECT_EQ(table.match("fsdp2", "silent_divergence in the final weights", any, shape)->id, "wrong-shape");
  EXPECT_EQ(table.match("fsdp2", "silent_divergence in the final weights", any, "final weights: off by 0.5")->id,
            "any-divergence");
  EXPECT_EQ(table.match("fsdp2", "silent_divergence in the final weights", any, "")->id, "any-divergence")
      << "no message, no message match";
  nlohmann::json bad = json;
  bad["findings"][0]["match"]["message"] = "[unclosed";
  EXPECT_THROW(read_upstream_table(write_table("zero3-upstream-bad-message.json", bad)), InputError);
}

TEST(UpstreamTable, AKnownRowNamesItsLinksAndTheirState) {
  nlohmann::json known = row("chunk-cat", "_chunk_cat");
  known["status"] = "known";
  known["upstream"] = {{{"url", "https://github.com/pytorch/pytorch/issues/1"}, {"kind", "issue"}, {"state", "open"},
                        {"title", "t"}, {"relation", "same failure"}}};
  const UpstreamTable table = read_upstream_table(write_table("zero3-upstream-known.json", {{"schema", 1}, {"findings", {known}}}));
  const UpstreamRow* found = table.match("fsdp2", "crash builtins.RuntimeError: _chunk_cat expects", case_with("[]"), "");
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(upstream_status_line(found, table),
            "known upstream: https://github.com/pytorch/pytorch/issues/1 (issue, open) (checked 2026-12-06)");
  EXPECT_EQ(upstream_status_json(found, table)["links"][0]["state"], "open");
}

TEST(UpstreamTable, AMalformedTableIsRefusedNamingTheFileAndTheJsonPath) {
  const auto refused = [](const nlohmann::json& json) {
    const std::string path = write_table("zero3-upstream-bad.json", json);
    try {
      read_upstream_table(path);
    } catch (const InputError& error) {
      EXPECT_NE(std::string(error.what()).find(path), std::string::npos) << error.what();
      return std::string(error.what());
    }
    return std::string("accepted");
  };
  nlohmann::json bad_regex = row("r", "(unclosed");
  nlohmann::json bad_date = row("d", "x");
  bad_date["checked"] = "last week";
  nlohmann::json known_without_links = row("k", "x");
  known_without_links["status"] = "known";
  nlohmann::json bad_evidence = row("e", "x");
  bad_evidence["evidence"] = "we think so";
  EXPECT_NE(refused({{"schema", 1}, {"findings", {bad_regex}}}).find("/findings/0/match/signature"), std::string::npos);
  EXPECT_NE(refused({{"schema", 1}, {"findings", {bad_date}}}).find("/findings/0/checked"), std::string::npos);
  EXPECT_NE(refused({{"schema", 1}, {"findings", {known_without_links}}}).find("/findings/0/upstream"), std::string::npos);
  EXPECT_NE(refused({{"schema", 1}, {"findings", {bad_evidence}}}).find("/findings/0/evidence"), std::string::npos);
  EXPECT_NE(refused({{"schema", 1}, {"findings", {row("same", "x"), row("same", "y")}}}).find("/findings/1/id"),
            std::string::npos);
  EXPECT_NE(refused({{"schema", 2}}).find("/schema"), std::string::npos);
}

}  // namespace
}  // namespace zero3
