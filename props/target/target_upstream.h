// Whether a finding of `zero3 fuzz --target` is known upstream, as data: traces/findings/upstream.json
// maps a finding (its target, verdict signature and, for the generic signatures of a divergence or
// a hang, what its shrunk case holds) to the issues and PRs that report or fix it, their state,
// the date they were checked, and the mechanism read in the framework's source. The report, the
// CLI summary and each finding's ISSUE.md say "known" with the links, or "no upstream report found
// (checked DATE)", and a finding no row matches says so: it has not been looked up yet.
//
//   const UpstreamTable table = read_upstream_table("traces/findings/upstream.json");
//   const UpstreamRow* row = table.match("deepspeed", verdict.signature, shrunk_case, verdict.message);
//   std::puts(upstream_status_line(row, table).c_str());
#pragma once
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "props/target/target_case.h"

namespace zero3 {

struct UpstreamLink {
  std::string url, kind, state, title, relation;
};

struct UpstreamRow {
  std::string id, target, title;
  std::string signature_pattern;  // a regex searched in the verdict signature
  std::regex signature;
  std::vector<std::string> layers;  // layer types the shrunk case must hold (any depth)
  std::string raw_access;           // "" or the case's torch.raw_access
  // A regex searched in the verdict's message, when set: tells apart findings whose signature and
  // case look alike but whose failure differs (a wrong shape rather than wrong values).
  std::string message_pattern;
  std::optional<std::regex> message;
  std::string status;               // "known" or "unknown"
  std::vector<UpstreamLink> upstream;
  std::string checked;              // YYYY-MM-DD
  std::string mechanism, evidence;  // evidence: "confirmed: ..." or "hypothesis: ..."
};

struct UpstreamTable {
  std::string path;
  std::vector<UpstreamRow> rows;
  // The first row whose target, signature, layers, raw access and message all match; nullptr when
  // none. A row with a message pattern never matches an empty message.
  const UpstreamRow* match(const std::string& target, const std::string& signature, const TargetCase& shrunk,
                           const std::string& message) const;
};

// InputError naming the file, the JSON path and what was expected.
UpstreamTable read_upstream_table(const std::string& path);
// The repository's table (traces/findings/upstream.json under the source tree the binary was built from).
std::string default_upstream_table_path();

// {"status": "known"|"unknown"|"not looked up", "id", "checked", "links": [...], "mechanism", "evidence"}.
nlohmann::json upstream_status_json(const UpstreamRow* row, const UpstreamTable& table);
// "known upstream: URL (state), URL (state)" / "no upstream report found (checked DATE)" /
// "not in traces/findings/upstream.json: not looked up upstream yet".
std::string upstream_status_line(const UpstreamRow* row, const UpstreamTable& table);

}  // namespace zero3
