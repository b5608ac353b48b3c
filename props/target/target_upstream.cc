// The upstream table (target_upstream.h).
#include "props/target/target_upstream.h"

#include <fstream>
#include <set>

#include "core/base/errors.h"

namespace zero3 {

namespace {

std::string text_at(const nlohmann::json& object, const std::string& key, const std::string& where,
                    const std::string& path, bool required = true) {
  if (!object.contains(key)) {
    if (!required) return "";
    throw InputError(path + ": " + where + "/" + key + " is missing (expected a string)");
  }
  if (!object[key].is_string()) throw InputError(path + ": " + where + "/" + key + " must be a string");
  return object[key].get<std::string>();
}

void collect_layer_types(const nlohmann::json& layers, std::set<std::string>& types) {
  if (!layers.is_array()) return;
  for (const auto& layer : layers) {
    if (layer.contains("type") && layer["type"].is_string()) types.insert(layer["type"].get<std::string>());
    if (layer.contains("layers")) collect_layer_types(layer["layers"], types);
  }
}

UpstreamRow read_row(const nlohmann::json& json, const std::string& where, const std::string& path) {
  if (!json.is_object()) throw InputError(path + ": " + where + " must be an object");
  UpstreamRow row;
  row.id = text_at(json, "id", where, path);
  row.target = text_at(json, "target", where, path);
  row.title = text_at(json, "title", where, path);
  row.status = text_at(json, "status", where, path);
  if (row.status != "known" && row.status != "unknown") {
    throw InputError(path + ": " + where + "/status is '" + row.status + "', expected \"known\" or \"unknown\"");
  }
  row.checked = text_at(json, "checked", where, path);
  static const std::regex date(R"(\d{4}-\d{2}-\d{2})");
  if (!std::regex_match(row.checked, date)) {
    throw InputError(path + ": " + where + "/checked is '" + row.checked + "', expected a date YYYY-MM-DD");
  }
  row.mechanism = text_at(json, "mechanism", where, path);
  row.evidence = text_at(json, "evidence", where, path);
  if (row.evidence.rfind("confirmed", 0) != 0 && row.evidence.rfind("hypothesis", 0) != 0) {
    throw InputError(path + ": " + where + "/evidence must start with \"confirmed\" or \"hypothesis\"");
  }
  if (!json.contains("match") || !json["match"].is_object()) {
    throw InputError(path + ": " + where + "/match is missing (expected an object with a signature regex)");
  }
  const nlohmann::json& match = json["match"];
  row.signature_pattern = text_at(match, "signature", where + "/match", path);
  try {
    row.signature = std::regex(row.signature_pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& error) {
    throw InputError(path + ": " + where + "/match/signature is not a regex: " + error.what());
  }
  if (match.contains("layers")) {
    if (!match["layers"].is_array()) throw InputError(path + ": " + where + "/match/layers must be an array");
    for (const auto& type : match["layers"]) {
      if (!type.is_string()) throw InputError(path + ": " + where + "/match/layers must hold strings");
      row.layers.push_back(type.get<std::string>());
    }
  }
  row.raw_access = text_at(match, "raw_access", where + "/match", path, false);
  row.message_pattern = text_at(match, "message", where + "/match", path, false);
  if (!row.message_pattern.empty()) {
    try {
      row.message = std::regex(row.message_pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& error) {
      throw InputError(path + ": " + where + "/match/message is not a regex: " + error.what());
    }
  }
  const nlohmann::json links = json.value("upstream", nlohmann::json::array());
  if (!links.is_array()) throw InputError(path + ": " + where + "/upstream must be an array");
  for (size_t i = 0; i < links.size(); ++i) {
    const std::string at = where + "/upstream/" + std::to_string(i);
    if (!links[i].is_object()) throw InputError(path + ": " + at + " must be an object");
    row.upstream.push_back({.url = text_at(links[i], "url", at, path),
                            .kind = text_at(links[i], "kind", at, path),
                            .state = text_at(links[i], "state", at, path),
                            .title = text_at(links[i], "title", at, path),
                            .relation = text_at(links[i], "relation", at, path)});
  }
  if (row.status == "known" && row.upstream.empty()) {
    throw InputError(path + ": " + where + "/upstream is empty, but status is \"known\"");
  }
  return row;
}

}  // namespace

const UpstreamRow* UpstreamTable::match(const std::string& target, const std::string& signature,
                                        const TargetCase& shrunk, const std::string& message) const {
  std::set<std::string> types;
  collect_layer_types(target_case_json(shrunk).at("model").value("layers", nlohmann::json::array()), types);
  for (const UpstreamRow& row : rows) {
    if (row.target != target || !std::regex_search(signature, row.signature)) continue;
    bool holds = true;
    for (const std::string& type : row.layers) holds = holds && types.count(type) > 0;
    if (!row.raw_access.empty()) holds = holds && shrunk.raw_access == row.raw_access && types.count("raw_scale") > 0;
    if (row.message) holds = holds && std::regex_search(message, *row.message);
    if (holds) return &row;
  }
  return nullptr;
}

UpstreamTable read_upstream_table(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot read the upstream table");
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& error) {
    throw InputError(path + ": not JSON: " + error.what());
  }
  if (!json.is_object() || json.value("schema", 0) != 1) throw InputError(path + ": /schema must be 1");
  if (!json.contains("findings") || !json["findings"].is_array()) {
    throw InputError(path + ": /findings is missing (expected an array of rows)");
  }
  UpstreamTable table{.path = path, .rows = {}};
  std::set<std::string> ids;
  for (size_t i = 0; i < json["findings"].size(); ++i) {
    UpstreamRow row = read_row(json["findings"][i], "/findings/" + std::to_string(i), path);
    if (!ids.insert(row.id).second) throw InputError(path + ": /findings/" + std::to_string(i) + "/id '" + row.id + "' repeats");
    table.rows.push_back(std::move(row));
  }
  return table;
}

std::string default_upstream_table_path() { return std::string(ZERO3_SOURCE_DIR) + "/traces/findings/upstream.json"; }

nlohmann::json upstream_status_json(const UpstreamRow* row, const UpstreamTable& table) {
  if (row == nullptr) {
    return {{"status", "not looked up"}, {"table", table.path},
            {"note", "no row of the upstream table matches: search the framework's tracker and add one"}};
  }
  nlohmann::json links = nlohmann::json::array();
  for (const UpstreamLink& link : row->upstream) {
    links.push_back({{"url", link.url}, {"kind", link.kind}, {"state", link.state}, {"title", link.title},
                     {"relation", link.relation}});
  }
  return {{"status", row->status}, {"id", row->id}, {"title", row->title}, {"checked", row->checked},
          {"links", links}, {"mechanism", row->mechanism}, {"evidence", row->evidence}};
}

std::string upstream_status_line(const UpstreamRow* row, const UpstreamTable& table) {
  if (row == nullptr) return "not in " + table.path + ": not looked up upstream yet";
  if (row->status == "unknown") return "no upstream report found (checked " + row->checked + ")";
  std::string line = "known upstream:";
  for (size_t i = 0; i < row->upstream.size(); ++i) {
    line += (i ? ", " : " ") + row->upstream[i].url + " (" + row->upstream[i].kind + ", " + row->upstream[i].state + ")";
  }
  return line + " (checked " + row->checked + ")";
}

}  // namespace zero3
