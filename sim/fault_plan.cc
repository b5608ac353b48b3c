// Parsing fault plans and drawing faults from the run's "faults" PRNG stream.
#include "sim/fault_plan.h"

#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "sim/recorder.h"

namespace zero3 {

namespace {

constexpr std::array<FaultKind, kFaultKindCount> kAllKinds{FaultKind::late, FaultKind::reorder, FaultKind::stall,
                                                           FaultKind::crash, FaultKind::alloc};
constexpr double kBuggifyEnableProbability = 0.5;

std::string expected_items() {
  return "expected a comma-separated list of late, reorder, stall, crash, alloc (each optionally with '?' for "
         "'on in half of the runs', '@SITE' to fire only at sites whose class starts with SITE, e.g. "
         "crash@checkpoint, and '=P' for the probability per site, 0 <= P <= 1), 'all', or 'none'";
}

double parse_probability(const std::string& item, const std::string& text, const std::string& whole) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !(value >= 0.0 && value <= 1.0)) {
    throw InputError("fault plan '" + whole + "': bad probability in '" + item + "'; " + expected_items());
  }
  return value;
}

std::vector<std::string> split_items(const std::string& text) {
  std::vector<std::string> items;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t comma = text.find(',', begin);
    const size_t end = comma == std::string::npos ? text.size() : comma;
    items.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return items;
}

// Applies one item ("crash?=0.1") to the plan.
void apply_item(FaultPlan& plan, const std::string& item, const std::string& whole) {
  std::string name = item;
  std::string probability;
  if (const size_t equals = item.find('='); equals != std::string::npos) {
    name = item.substr(0, equals);
    probability = item.substr(equals + 1);
  }
  std::string site;
  if (const size_t at = name.find('@'); at != std::string::npos) {
    site = name.substr(at + 1);
    name = name.substr(0, at);
    if (site.empty()) throw InputError("fault plan '" + whole + "': empty site after '@' in '" + item + "'; " + expected_items());
  }
  double enable = 1.0;
  if (!name.empty() && name.back() == '?') {
    enable = kBuggifyEnableProbability;
    name.pop_back();
  }
  bool matched = false;
  for (FaultKind kind : kAllKinds) {
    if (name != "all" && name != fault_kind_name(kind)) continue;
    const size_t index = static_cast<size_t>(kind);
    plan.enable_probability[index] = enable;
    if (!probability.empty()) plan.fire_probability[index] = parse_probability(item, probability, whole);
    plan.site_filter[index] = site;
    matched = true;
  }
  if (!matched) throw InputError("fault plan '" + whole + "': unknown fault '" + name + "'; " + expected_items());
}

std::string format_probability(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", value);
  return buffer;
}

}  // namespace

const char* fault_kind_name(FaultKind kind) {
  switch (kind) {
    case FaultKind::late: return "late";
    case FaultKind::reorder: return "reorder";
    case FaultKind::stall: return "stall";
    case FaultKind::crash: return "crash";
    case FaultKind::alloc: return "alloc";
  }
  return "unknown";
}

FaultPlan FaultPlan::parse(const std::string& text) {
  FaultPlan plan;
  if (text.empty() || text == "none") return plan;
  for (const std::string& item : split_items(text)) {
    if (item.empty()) throw InputError("fault plan '" + text + "': empty item; " + expected_items());
    apply_item(plan, item, text);
  }
  return plan;
}

std::string FaultPlan::to_string() const {
  std::string text;
  for (FaultKind kind : kAllKinds) {
    const size_t index = static_cast<size_t>(kind);
    if (enable_probability[index] <= 0.0) continue;
    if (!text.empty()) text += ",";
    text += fault_kind_name(kind);
    if (enable_probability[index] < 1.0) text += "?";
    if (!site_filter[index].empty()) text += "@" + site_filter[index];
    text += "=" + format_probability(fire_probability[index]);
  }
  return text.empty() ? "none" : text;
}

bool FaultPlan::any() const {
  for (double probability : enable_probability) {
    if (probability > 0.0) return true;
  }
  return false;
}

std::string describe(const FiredFault& fault) {
  const std::string where = fault.rank < 0 ? "every rank" : "rank " + std::to_string(fault.rank);
  return std::string(fault_kind_name(fault.kind)) + " on " + where + " at " + fault.site;
}

FaultInjector::FaultInjector(const FaultPlan& plan, uint64_t seed, Recorder* recorder)
    : plan_(plan), rng_(seed, stream_id("faults")), recorder_(recorder) {
  // The per-run switch is drawn for every kind, on or off, so that whether a kind is on depends
  // only on the seed and its own probability, not on which other kinds the plan names.
  for (FaultKind kind : kAllKinds) {
    const size_t index = static_cast<size_t>(kind);
    enabled_[index] = rng_.next_uniform() < plan_.enable_probability[index];
  }
}

bool FaultInjector::site_admitted(FaultKind kind, std::string_view site_class) const {
  const std::string& filter = plan_.site_filter[static_cast<size_t>(kind)];
  return filter.empty() || site_class.substr(0, filter.size()) == filter;
}

double FaultInjector::draw_delay_s() { return (1.0 - rng_.next_uniform()) * plan_.delay_s_max; }

void FaultInjector::note_fired(FiredFault fault) {
  if (recorder_) {
    const nlohmann::json event = {{"type", "fault"}, {"kind", fault_kind_name(fault.kind)}, {"site", fault.site}};
    if (fault.rank < 0) {
      recorder_->record_every_rank(event);
    } else {
      recorder_->record(fault.rank, event);
    }
  }
  fired_.push_back(std::move(fault));
}

}  // namespace zero3
