// Trace helpers (per-rank expansion) and the writer: compact JSON, one entry per line.
#include "traces/format/trace.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <sstream>

#include "core/base/atomic_file.h"
#include "core/base/hash.h"

namespace zero3 {

const char* event_kind_name(EventKind kind) {
  switch (kind) {
    case EventKind::enter: return "enter";
    case EventKind::exit: return "exit";
    case EventKind::call: return "call";
    case EventKind::param: return "param";
    case EventKind::raw: return "raw";
    case EventKind::backward: return "backward";
    case EventKind::bwd_enter: return "bwd_enter";
    case EventKind::bwd_exit: return "bwd_exit";
    case EventKind::optimizer_step: return "optimizer_step";
  }
  return "?";
}

bool TraceStep::divergent() const {
  for (const TraceItem& item : items) {
    if (!item.per_rank.empty()) return true;
  }
  return false;
}

bool Trace::divergent() const {
  for (const TraceStep& step : steps) {
    if (step.divergent()) return true;
  }
  return false;
}

int Trace::divergent_ranks() const {
  for (const TraceStep& step : steps) {
    for (const TraceItem& item : step.items) {
      if (!item.per_rank.empty()) return static_cast<int>(item.per_rank.size());
    }
  }
  return 1;
}

bool Trace::has_kernel_work() const {
  const auto has = [](const TraceEvent& event) { return !event.forward_work.empty() || !event.backward_work.empty(); };
  for (const TraceStep& step : steps) {
    for (const TraceItem& item : step.items) {
      if (has(item.event)) return true;
      for (const auto& list : item.per_rank) {
        if (std::any_of(list.begin(), list.end(), has)) return true;
      }
    }
  }
  return false;
}

int64_t Trace::parameter_elements() const {
  int64_t total = 0;
  for (const TraceParam& param : params) total += shape_numel(param.shape);
  return total;
}

std::vector<TraceEvent> events_for(const TraceStep& step, int rank) {
  std::vector<TraceEvent> out;
  for (const TraceItem& item : step.items) {
    if (item.per_rank.empty()) {
      out.push_back(item.event);
      continue;
    }
    const auto& list = item.per_rank[static_cast<size_t>(rank) % item.per_rank.size()];
    out.insert(out.end(), list.begin(), list.end());
  }
  return out;
}

namespace {

using EventStream = std::vector<std::vector<TraceEvent>>;  // by step

uint64_t stream_hash(const EventStream& stream) {
  Fnv1a hash;
  for (const std::vector<TraceEvent>& events : stream) {
    hash.add_u64(events.size());
    for (const TraceEvent& event : events) {
      // Field by field: the struct's padding bytes are not part of the event.
      uint64_t flops_bits = 0;
      std::memcpy(&flops_bits, &event.flops, sizeof flops_bits);
      hash.add_u64(static_cast<uint64_t>(event.kind));
      hash.add_u64(static_cast<uint64_t>(static_cast<uint32_t>(event.module)));
      hash.add_u64(static_cast<uint64_t>(static_cast<uint32_t>(event.param)));
      hash.add_u64(flops_bits);
      hash.add_u64(static_cast<uint64_t>(event.activation_bytes));
      uint64_t quadratic_bits = 0;
      std::memcpy(&quadratic_bits, &event.flops_quadratic, sizeof quadratic_bits);
      hash.add_u64(quadratic_bits);
      hash.add_u64(static_cast<uint64_t>(event.activation_quadratic_bytes));
      hash.add_u64(static_cast<uint64_t>(event.output_bytes));
      hash.add_u64(static_cast<uint64_t>(event.input_bytes));
      hash.add_u64(static_cast<uint64_t>(event.input_quadratic_bytes));
      hash.add_u64(static_cast<uint64_t>(event.released_at_backward_begin_bytes));
      hash.add_u64(static_cast<uint64_t>(event.released_at_backward_begin_quadratic_bytes));
      hash.add_u64(static_cast<uint64_t>(event.forward_transient_bytes));
      hash.add_u64(static_cast<uint64_t>(event.forward_transient_quadratic_bytes));
      hash.add_u64(static_cast<uint64_t>(event.backward_transient_bytes));
      hash.add_u64(static_cast<uint64_t>(event.backward_transient_quadratic_bytes));
      hash.add_u64(static_cast<uint64_t>(event.forward_work.calls));
      hash.add_u64(static_cast<uint64_t>(event.backward_work.calls));
    }
  }
  return hash.value();
}

}  // namespace

std::vector<std::vector<int>> ranks_by_event_stream(const Trace& trace, int world) {
  std::vector<std::vector<int>> groups;
  if (!trace.divergent()) {
    groups.emplace_back(static_cast<size_t>(world));
    for (int rank = 0; rank < world; ++rank) groups[0][static_cast<size_t>(rank)] = rank;
    return groups;
  }
  std::vector<EventStream> streams;                // of each group, as its lowest rank runs it
  std::multimap<uint64_t, size_t> groups_by_hash;  // only narrows the comparisons down
  for (int rank = 0; rank < world; ++rank) {
    EventStream stream;
    for (const TraceStep& step : trace.steps) stream.push_back(events_for(step, rank));
    const uint64_t hash = stream_hash(stream);
    const auto [begin, end] = groups_by_hash.equal_range(hash);
    const auto same = std::find_if(begin, end, [&](const auto& entry) { return streams[entry.second] == stream; });
    if (same != end) {
      groups[same->second].push_back(rank);
      continue;
    }
    groups_by_hash.emplace(hash, groups.size());
    groups.push_back({rank});
    streams.push_back(std::move(stream));
  }
  return groups;
}

namespace {

// Whole numbers are written without a fraction, so flops stay short and exact.
nlohmann::json number(double value) {
  if (std::fabs(value) < 9e15 && value == std::floor(value)) return static_cast<int64_t>(value);
  return value;
}

// A number when all of it grows with tokens, else {"linear", "quadratic"} (FORMAT.md).
nlohmann::json amount(double total, double quadratic) {
  if (quadratic <= 0.0) return number(total);
  nlohmann::json out = {{"quadratic", number(quadratic)}};
  if (total > quadratic) out["linear"] = number(total - quadratic);
  return out;
}

// {"flops", "bytes", "transcendentals", "calls"} (FORMAT.md, "Kernel work"): each amount a number,
// or {"linear", "quadratic"} when part of it grows with seq_len^2.
nlohmann::json work_json(const KernelWork& work) {
  return {{"flops", amount(work.flops, work.flops_quadratic)},
          {"bytes", amount(work.bytes, work.bytes_quadratic)},
          {"transcendentals", amount(work.transcendentals, work.transcendentals_quadratic)},
          {"calls", work.calls}};
}

// The options object of an enter, call or backward event (FORMAT.md): only what is recorded.
nlohmann::json event_options(const TraceEvent& event) {
  nlohmann::json options = nlohmann::json::object();
  if (!event.forward_work.empty()) options["forward_work"] = work_json(event.forward_work);
  if (!event.backward_work.empty()) options["backward_work"] = work_json(event.backward_work);
  if (event.output_bytes > 0) options["output_bytes"] = event.output_bytes;
  if (event.input_bytes > 0) {
    options["input_bytes"] = amount(static_cast<double>(event.input_bytes), static_cast<double>(event.input_quadratic_bytes));
  }
  if (event.forward_transient_bytes > 0) {
    options["forward_transient"] = amount(static_cast<double>(event.forward_transient_bytes),
                                          static_cast<double>(event.forward_transient_quadratic_bytes));
  }
  if (event.backward_transient_bytes > 0) {
    options["backward_transient"] = amount(static_cast<double>(event.backward_transient_bytes),
                                           static_cast<double>(event.backward_transient_quadratic_bytes));
  }
  if (event.released_at_backward_begin_bytes > 0) {
    options["released_at_backward_begin"] = amount(static_cast<double>(event.released_at_backward_begin_bytes),
                                                   static_cast<double>(event.released_at_backward_begin_quadratic_bytes));
  }
  return options;
}

nlohmann::json event_json(const Trace& trace, const TraceEvent& event) {
  auto module = [&] { return event.module < 0 ? std::string() : trace.modules[static_cast<size_t>(event.module)].name; };
  nlohmann::json out = nlohmann::json::array({event_kind_name(event.kind)});
  switch (event.kind) {
    case EventKind::enter:
    case EventKind::call:
      // Places are positional: a later one given fills the earlier ones (null flops: derive; 0 bytes).
    {
      out.push_back(module());
      const nlohmann::json options = event_options(event);
      if (event.flops >= 0.0 || event.activation_bytes > 0 || !options.empty()) {
        out.push_back(event.flops >= 0.0 ? amount(event.flops, event.flops_quadratic) : nullptr);
      }
      if (event.activation_bytes > 0 || !options.empty()) {
        out.push_back(amount(static_cast<double>(event.activation_bytes),
                             static_cast<double>(event.activation_quadratic_bytes)));
      }
      if (!options.empty()) out.push_back(options);
      break;
    }
    case EventKind::exit:
    case EventKind::bwd_enter:
    case EventKind::bwd_exit: out.push_back(module()); break;
    case EventKind::param:
    case EventKind::raw:
      out.push_back(event.module < 0 ? nlohmann::json(nullptr) : nlohmann::json(module()));
      out.push_back(trace.params[static_cast<size_t>(event.param)].name);
      break;
    case EventKind::backward: {
      const nlohmann::json options = event_options(event);
      if (event.activation_bytes > 0 || !options.empty()) out.push_back(event.activation_bytes);
      if (!options.empty()) out.push_back(options);
      break;
    }
    case EventKind::optimizer_step: break;
  }
  return out;
}

nlohmann::json item_json(const Trace& trace, const TraceItem& item) {
  if (item.per_rank.empty()) return event_json(trace, item.event);
  nlohmann::json lists = nlohmann::json::array();
  for (const auto& list : item.per_rank) {
    nlohmann::json events = nlohmann::json::array();
    for (const TraceEvent& event : list) events.push_back(event_json(trace, event));
    lists.push_back(events);
  }
  return {{"per_rank", lists}};
}

nlohmann::json collective_json(const TraceCollective& call) {
  nlohmann::json out = {call.sequence, call.op, call.dtype, call.count, call.bytes, call.module, call.phase, call.step,
                        call.start_s, call.duration_s};
  // Traces recorded before the levels, and flat runs without them, keep their ten elements.
  if (call.group != "world" || !call.level.empty()) {
    out.push_back(call.group);
    out.push_back(call.level);
  }
  return out;
}

nlohmann::json run_json(const TraceRun& run) {
  return {{"world", run.world}, {"seed", run.seed}, {"steps", run.steps}, {"config", run.config},
          {"inject", run.inject}, {"faults", run.faults}};
}

// The header, then each list with one element per line: diffable and still compact.
void write_list(std::ostringstream& out, const char* key, const std::vector<nlohmann::json>& items, bool last) {
  out << " \"" << key << "\": [";
  for (size_t i = 0; i < items.size(); ++i) out << (i ? ",\n  " : "\n  ") << items[i].dump();
  out << (items.empty() ? "]" : "\n ]") << (last ? "\n" : ",\n");
}

}  // namespace

nlohmann::json trace_to_json(const Trace& trace) {
  nlohmann::json out = {{"zero3_trace", trace.version}, {"source", trace.source}, {"name", trace.name},
                        {"dtype", trace.dtype}};
  if (trace.world > 0) out["world"] = trace.world;
  if (trace.tokens > 0) out["tokens"] = trace.tokens;
  if (trace.batch > 0) {
    out["batch"] = trace.batch;
    out["seq_len"] = trace.seq_len;
  }
  if (trace.hidden_size > 0) out["hidden_size"] = trace.hidden_size;
  if (trace.has_events() || !trace.params.empty()) {
    out["modules"] = nlohmann::json::array();
    for (const TraceModule& module : trace.modules) out["modules"].push_back({module.name, module.type});
    out["params"] = nlohmann::json::array();
    for (const TraceParam& param : trace.params) {
      nlohmann::json entry = {param.id, param.name, param.shape};
      if (param.dtype != trace.dtype) entry.push_back(param.dtype);  // the owner is the name's prefix
      if (!param.requires_grad) entry.push_back({{"requires_grad", false}});
      out["params"].push_back(entry);
    }
  }
  if (trace.has_events()) {
    out["steps"] = nlohmann::json::array();
    for (const TraceStep& step : trace.steps) {
      nlohmann::json events = nlohmann::json::array();
      for (const TraceItem& item : step.items) events.push_back(item_json(trace, item));
      nlohmann::json ranks = step.divergent() ? nlohmann::json(trace.divergent_ranks()) : nlohmann::json("all");
      out["steps"].push_back({{"ranks", ranks}, {"repeat", step.repeat}, {"events", events}});
    }
  }
  if (!trace.collectives.empty()) {
    const bool all = trace.collectives.size() == 1;
    nlohmann::json calls = nlohmann::json::array();
    for (const auto& list : trace.collectives) {
      nlohmann::json rank_calls = nlohmann::json::array();
      for (const TraceCollective& call : list) rank_calls.push_back(collective_json(call));
      if (all) calls = rank_calls;
      else calls.push_back(rank_calls);
    }
    out["collectives"] = {{"ranks", all ? "all" : "per_rank"}, {"calls", calls}};
  }
  if (trace.run) {
    out["model_spec"] = trace.run->model_spec;
    out["run"] = run_json(*trace.run);
  }
  if (!trace.recorder.is_null()) out["recorder"] = trace.recorder;
  if (trace.expected) {
    out["expected"] = {{"property", trace.expected->property}, {"message", trace.expected->message}};
    if (!trace.expected->event_log_hash.empty()) out["expected"]["event_log_hash"] = trace.expected->event_log_hash;
  }
  return out;
}

int64_t trace_hidden_size(const Trace& trace) {
  if (trace.hidden_size > 0) return trace.hidden_size;
  for (const TraceParam& param : trace.params) {
    const std::string& type = trace.modules[static_cast<size_t>(param.owner)].type;
    if (type.find("Embedding") != std::string::npos && param.shape.size() == 2) return param.shape[1];
  }
  return 0;
}

std::string trace_to_text(const Trace& trace) {
  const nlohmann::json json = trace_to_json(trace);
  std::ostringstream out;
  out << "{\n";
  const std::vector<std::string> listed = {"modules", "params"};
  std::vector<std::string> keys;
  for (const auto& item : json.items()) keys.push_back(item.key());
  // Scalars and small sections first, then the long lists, each element on its own line.
  for (const std::string& key : keys) {
    if (key == "modules" || key == "params" || key == "steps") continue;
    out << " \"" << key << "\": " << json.at(key).dump() << ",\n";
  }
  const bool has_steps = json.contains("steps");
  for (const std::string& key : listed) {
    if (!json.contains(key)) continue;
    std::vector<nlohmann::json> items(json.at(key).begin(), json.at(key).end());
    write_list(out, key.c_str(), items, key == "params" && !has_steps);
  }
  if (has_steps) {
    out << " \"steps\": [";
    const nlohmann::json& steps = json.at("steps");
    for (size_t i = 0; i < steps.size(); ++i) {
      out << (i ? ",\n" : "\n") << "  {\"ranks\": " << steps[i].at("ranks").dump()
          << ", \"repeat\": " << steps[i].at("repeat").dump() << ", \"events\": [";
      const nlohmann::json& events = steps[i].at("events");
      for (size_t k = 0; k < events.size(); ++k) out << (k ? ",\n   " : "\n   ") << events[k].dump();
      out << "\n  ]}";
    }
    out << "\n ]\n";
  }
  std::string text = out.str();
  // A trace without lists ends with the comma of its last scalar: close the object cleanly.
  if (text.size() >= 2 && text.compare(text.size() - 2, 2, ",\n") == 0) text.erase(text.size() - 2, 1);
  return text + "}\n";
}

void write_trace(const std::string& path, const Trace& trace) { write_file_atomically(path, trace_to_text(trace)); }

}  // namespace zero3
