// Reading and validating a trace (FORMAT.md): every error names the file, the JSON path and what
// was expected; references, nesting and phases are checked for every rank's expansion.
#include <limits>
#include <map>
#include <unordered_map>

#include "core/base/errors.h"
#include "core/base/json_reader.h"
#include "traces/format/trace.h"
#include "traces/format/trace_reader_parts.h"

namespace zero3 {

namespace {

const std::vector<std::string> kTopLevelKeys = {"zero3_trace", "source", "name", "dtype", "world", "tokens", "batch", "seq_len",
                                                "notes", "modules", "params", "steps", "collectives",
                                                "model_spec", "run", "expected", "recorder", "hidden_size"};
const std::vector<std::string> kDtypes = {"f32", "bf16", "f16", "f64", "i8", "u8", "i32", "i64", "bool", "fp8"};
constexpr int64_t kCountMax = int64_t{1} << 50;
// Optimizer steps a trace may replay in all (the sum of its steps' repeat). Replay walks every one
// (about 0.1 ms a step at 3 ranks, 10 kB of timeline each), and past the first few a repeated
// step replays identically: the bound keeps `zero3 replay` within seconds and its timeline within
// about 100 MB, where the input fuzz found a repeat of 2^20 taking minutes and gigabytes.
constexpr int64_t kReplayedStepsMax = 10'000;

// An event's flops or activation bytes: a number (grows with tokens) or {"linear", "quadratic"},
// the quadratic part growing with batch x seq_len^2 (FORMAT.md, "Batch and sequence length").
struct Amount {
  double linear = 0.0;
  double quadratic = 0.0;
};

Amount read_amount(const JsonReader& node, double max) {
  if (!node.json().is_object()) return {.linear = node.as_number(0.0, max)};
  node.expect_only_keys({"linear", "quadratic"});
  Amount amount;
  if (node.has("linear")) amount.linear = node.at("linear").as_number(0.0, max);
  if (node.has("quadratic")) amount.quadratic = node.at("quadratic").as_number(0.0, max);
  if (amount.linear + amount.quadratic > max) node.fail("a total of at most " + std::to_string(max));
  return amount;
}

// {"flops", "bytes", "transcendentals", "calls"}, at least one given (FORMAT.md, "Kernel work"):
// the amounts are numbers or {"linear", "quadratic"}, calls a count.
KernelWork read_work(const JsonReader& node) {
  if (!node.json().is_object() || node.json().empty()) {
    node.fail("an object of kernel work {\"flops\", \"bytes\", \"transcendentals\", \"calls\"} with at least one "
              "of them");
  }
  node.expect_only_keys({"flops", "bytes", "transcendentals", "calls"});
  KernelWork work;
  const auto amount_at = [&](const char* key, double& total, double& quadratic) {
    if (!node.has(key)) return;
    const Amount amount = read_amount(node.at(key), 1e30);
    total = amount.linear + amount.quadratic;
    quadratic = amount.quadratic;
  };
  amount_at("flops", work.flops, work.flops_quadratic);
  amount_at("bytes", work.bytes, work.bytes_quadratic);
  amount_at("transcendentals", work.transcendentals, work.transcendentals_quadratic);
  if (node.has("calls")) work.calls = node.at("calls").as_int(0, kCountMax);
  return work;
}

// The options object that may end an enter or call event ({"output_bytes", "input_bytes",
// "forward_transient", "backward_transient"}) or a backward event (the two transients): what the
// recorder measured besides the kept bytes. It has a place of its own after ACTIVATION_BYTES, so it
// is never taken for an amount object ({"linear", "quadratic"}) in the FLOPS or bytes place.
void read_event_options(const JsonReader& options, TraceEvent& event) {
  const bool module_event = event.kind != EventKind::backward;
  if (!options.json().is_object()) {
    options.fail(module_event ? "an object of options {\"output_bytes\", \"input_bytes\", \"forward_transient\", "
                                "\"backward_transient\", \"released_at_backward_begin\", \"forward_work\", "
                                "\"backward_work\"}"
                              : "an object of options {\"forward_transient\", \"backward_transient\", "
                                "\"released_at_backward_begin\", \"forward_work\", \"backward_work\"}");
  }
  if (module_event) {
    options.expect_only_keys({"output_bytes", "input_bytes", "forward_transient", "backward_transient",
                              "released_at_backward_begin", "forward_work", "backward_work"});
    if (options.has("output_bytes")) event.output_bytes = options.at("output_bytes").as_int(0, kCountMax);
  } else {
    options.expect_only_keys({"forward_transient", "backward_transient", "released_at_backward_begin", "forward_work",
                              "backward_work"});
  }
  if (options.has("forward_work")) event.forward_work = read_work(options.at("forward_work"));
  if (options.has("backward_work")) event.backward_work = read_work(options.at("backward_work"));
  const auto bytes_at = [&](const char* key, int64_t& total, int64_t& quadratic) {
    if (!options.has(key)) return;
    const Amount bytes = read_amount(options.at(key), static_cast<double>(kCountMax));
    total = static_cast<int64_t>(bytes.linear + bytes.quadratic);
    quadratic = static_cast<int64_t>(bytes.quadratic);
  };
  if (module_event) bytes_at("input_bytes", event.input_bytes, event.input_quadratic_bytes);
  bytes_at("forward_transient", event.forward_transient_bytes, event.forward_transient_quadratic_bytes);
  bytes_at("backward_transient", event.backward_transient_bytes, event.backward_transient_quadratic_bytes);
  bytes_at("released_at_backward_begin", event.released_at_backward_begin_bytes,
           event.released_at_backward_begin_quadratic_bytes);
  if (event.released_at_backward_begin_bytes > event.activation_bytes) {
    options.at("released_at_backward_begin").fail("at most the event's kept bytes (ACTIVATION_BYTES, " +
                                                  std::to_string(event.activation_bytes) + ")");
  }
}

// "output_bytes" where it does not belong: on another kind of event, or in an amount's place. Said
// plainly, where the form or amount check would only say the event has the wrong shape.
void reject_misplaced_output_bytes(const JsonReader& node, EventKind kind) {
  const bool carries = kind == EventKind::enter || kind == EventKind::call;
  for (size_t i = 1; i < node.size() && (!carries || i < 4); ++i) {
    if (!node.at(i).has("output_bytes")) continue;
    node.at(i).at("output_bytes").fail(
        carries ? std::string("\"output_bytes\" in the options object after FLOPS and ACTIVATION_BYTES ") +
                      "([KIND, MODULE, FLOPS or null, ACTIVATION_BYTES or 0, {\"output_bytes\": N}])"
                : std::string("no \"output_bytes\" on \"") + event_kind_name(kind) +
                      "\" events: only enter and call events carry their module's output bytes");
  }
}

// batch and seq_len come together, and agree with tokens when it is given.
void read_run_shape(const JsonReader& root, Trace& trace) {
  if (root.has("batch") != root.has("seq_len")) {
    root.at(root.has("batch") ? "batch" : "seq_len").fail("\"batch\" and \"seq_len\" given together");
  }
  if (!root.has("batch")) return;
  trace.batch = root.at("batch").as_int(1, kCountMax);
  trace.seq_len = root.at("seq_len").as_int(1, kCountMax);
  if (trace.batch > kCountMax / trace.seq_len) root.at("seq_len").fail("batch x seq_len at most 2^50");
  if (!root.has("tokens")) trace.tokens = trace.batch * trace.seq_len;
  if (trace.tokens != trace.batch * trace.seq_len) {
    root.at("tokens").fail("batch x seq_len = " + std::to_string(trace.batch * trace.seq_len));
  }
}

struct Names {
  std::unordered_map<std::string, int32_t> modules;
  std::unordered_map<std::string, int32_t> params;
};

// A newer trace may mean something this build would silently get wrong, so it is refused.
void check_version(const JsonReader& root) {
  if (root.has("zero3_model_spec")) {
    root.fail("a zero3 trace, not a model spec: record one with `zero3 train --backend sim --model SPEC.json "
              "--steps 1 --record TRACE.json` (or, for a PyTorch or Hugging Face model, tools/recorders/record_torch_trace.py), "
              "then replay TRACE.json");
  }
  if (!root.has("zero3_trace")) {
    root.fail("a zero3 trace: an object with \"zero3_trace\": 1 (tools/recorders/record_torch_trace.py records one from a "
              "PyTorch model, `zero3 train --record` from a zero3 run)");
  }
  const JsonReader version = root.at("zero3_trace");
  const int64_t value = version.as_int(1, std::numeric_limits<int32_t>::max());
  if (value > kTraceVersion) {
    version.fail("trace version " + std::to_string(kTraceVersion) + " or older; this trace was written by a newer "
                 "zero3 (version " + std::to_string(value) + "): replay it with that version");
  }
}

std::string parent_name(const std::string& name) {
  const size_t dot = name.rfind('.');
  return dot == std::string::npos ? "" : name.substr(0, dot);
}

void read_modules(const JsonReader& list, Trace& trace, Names& names) {
  for (size_t i = 0; i < list.size(); ++i) {
    const JsonReader entry = list.at(i);
    if (!entry.json().is_array() || entry.size() != 2) entry.fail("[name, type]");
    TraceModule module{.name = entry.at(0).as_string(), .type = entry.at(1).as_string()};
    if (i == 0 && !module.name.empty()) entry.at(0).fail("\"\" (modules[0] is the root)");
    if (i > 0 && (module.name.empty() || !names.modules.count(parent_name(module.name)))) {
      entry.at(0).fail("a dotted name whose parent module is listed before it");
    }
    if (!names.modules.emplace(module.name, static_cast<int32_t>(i)).second) entry.at(0).fail("a module name not used before");
    trace.modules.push_back(std::move(module));
  }
  if (trace.modules.empty()) list.fail("at least the root module [\"\", TYPE]");
}

// [id, name, shape], [id, name, shape, dtype] or [id, name, shape, dtype, owner], each optionally
// followed by an object of options ({"requires_grad": false}: frozen). The owner is the module
// named by the name's prefix ("h.0.attn.qkv" owns "h.0.attn.qkv.weight"), so it may be left out;
// when given it must be that module.
void read_params(const JsonReader& list, Trace& trace, Names& names) {
  for (size_t i = 0; i < list.size(); ++i) {
    const JsonReader entry = list.at(i);
    const bool has_options = entry.json().is_array() && !entry.json().empty() && entry.json().back().is_object();
    const size_t positional = entry.json().is_array() ? entry.size() - (has_options ? 1 : 0) : 0;
    if (!entry.json().is_array() || positional < 3 || positional > 5) {
      entry.fail("[id, name, shape, dtype?, owner?, {\"requires_grad\": false}?]");
    }
    TraceParam param;
    if (has_options) {
      const JsonReader options = entry.at(positional);
      options.expect_only_keys({"requires_grad"});
      if (options.has("requires_grad")) param.requires_grad = options.at("requires_grad").as_bool();
    }
    param.id = entry.at(0).as_int(static_cast<int64_t>(i), static_cast<int64_t>(i));
    param.name = entry.at(1).as_string();
    const JsonReader shape = entry.at(2);
    for (size_t d = 0; d < shape.size(); ++d) param.shape.push_back(shape.at(d).as_int(0, kCountMax));
    param.dtype = positional > 3 ? entry.at(3).as_choice(kDtypes) : trace.dtype;
    const size_t dot = param.name.rfind('.');
    const std::string owner_name = dot == std::string::npos ? "" : param.name.substr(0, dot);
    auto it = names.modules.find(owner_name);
    if (param.name.empty() || dot + 1 == param.name.size() || it == names.modules.end()) {
      entry.at(1).fail("OWNER.LOCAL_NAME where OWNER is a listed module (\"" + owner_name + "\" is not)");
    }
    if (positional > 4 && entry.at(4).as_string() != owner_name) entry.at(4).fail("\"" + owner_name + "\", the name's prefix");
    param.owner = it->second;
    if (!names.params.emplace(param.name, static_cast<int32_t>(i)).second) entry.at(1).fail("a parameter name not used before");
    trace.params.push_back(std::move(param));
  }
}

// A module by name; `allow_none`: null stands for "outside every module" ("" is the root).
int32_t module_ref(const JsonReader& node, const Names& names, bool allow_none) {
  if (allow_none && node.json().is_null()) return -1;
  const std::string name = node.as_string();
  auto it = names.modules.find(name);
  if (it == names.modules.end()) node.fail("the name of a listed module");
  return it->second;
}

TraceEvent read_event(const JsonReader& node, const Names& names) {
  if (!node.json().is_array() || node.size() == 0) node.fail("an event [KIND, ...] or a group {\"per_rank\": [...]}");
  static const std::map<std::string, EventKind> kinds = {
      {"enter", EventKind::enter}, {"exit", EventKind::exit}, {"call", EventKind::call},
      {"param", EventKind::param}, {"raw", EventKind::raw}, {"backward", EventKind::backward},
      {"bwd_enter", EventKind::bwd_enter}, {"bwd_exit", EventKind::bwd_exit},
      {"optimizer_step", EventKind::optimizer_step}};
  std::vector<std::string> kind_names;
  for (const auto& [name, kind] : kinds) kind_names.push_back(name);
  TraceEvent event;
  event.kind = kinds.at(node.at(0).as_choice(kind_names));
  reject_misplaced_output_bytes(node, event.kind);
  const size_t size = node.size();
  auto expect_size = [&](size_t min, size_t max, const char* form) {
    if (size < min || size > max) node.fail(form);
  };
  switch (event.kind) {
    case EventKind::enter:
    case EventKind::call:
      expect_size(2, 5, "[\"enter\"|\"call\", MODULE, FLOPS?, ACTIVATION_BYTES?, {OPTIONS}?]");
      event.module = module_ref(node.at(1), names, false);
      if (size > 2 && !node.at(2).json().is_null()) {
        const Amount flops = read_amount(node.at(2), 1e30);
        event.flops = flops.linear + flops.quadratic;
        event.flops_quadratic = flops.quadratic;
      }
      if (size > 3) {
        const Amount bytes = read_amount(node.at(3), static_cast<double>(kCountMax));
        event.activation_bytes = static_cast<int64_t>(bytes.linear + bytes.quadratic);
        event.activation_quadratic_bytes = static_cast<int64_t>(bytes.quadratic);
      }
      if (size > 4) read_event_options(node.at(4), event);
      break;
    case EventKind::exit:
    case EventKind::bwd_enter:
    case EventKind::bwd_exit:
      expect_size(2, 2, "[KIND, MODULE]");
      event.module = module_ref(node.at(1), names, false);
      break;
    case EventKind::param:
    case EventKind::raw: {
      expect_size(3, 3, "[\"param\"|\"raw\", MODULE (null for a raw read outside every module), PARAMETER]");
      event.module = module_ref(node.at(1), names, event.kind == EventKind::raw);
      auto it = names.params.find(node.at(2).as_string());
      if (it == names.params.end()) node.at(2).fail("the name of a listed parameter");
      event.param = it->second;
      break;
    }
    case EventKind::backward:
      expect_size(1, 3, "[\"backward\", ACTIVATION_BYTES?, {\"forward_transient\", \"backward_transient\"}?]");
      if (size > 1) event.activation_bytes = node.at(1).as_int(0, kCountMax);
      if (size > 2) read_event_options(node.at(2), event);
      break;
    case EventKind::optimizer_step: expect_size(1, 1, "[KIND] with nothing else"); break;
  }
  return event;
}

TraceStep read_step(const JsonReader& node, const Names& names, int* group_size) {
  node.expect_only_keys({"ranks", "repeat", "events"});
  TraceStep step;
  if (node.has("repeat")) step.repeat = node.at("repeat").as_int(1, 1 << 20);
  const JsonReader events = node.at("events");
  for (size_t i = 0; i < events.size(); ++i) {
    const JsonReader entry = events.at(i);
    TraceItem item;
    if (entry.json().is_object()) {
      entry.expect_only_keys({"per_rank"});
      const JsonReader lists = entry.at("per_rank");
      if (lists.size() < 1) lists.fail("one event list per rank");
      if (*group_size != 0 && static_cast<int>(lists.size()) != *group_size) {
        lists.fail("as many lists as every other per-rank group (" + std::to_string(*group_size) + ")");
      }
      *group_size = static_cast<int>(lists.size());
      for (size_t r = 0; r < lists.size(); ++r) {
        std::vector<TraceEvent> list;
        for (size_t k = 0; k < lists.at(r).size(); ++k) list.push_back(read_event(lists.at(r).at(k), names));
        item.per_rank.push_back(std::move(list));
      }
    } else {
      item.event = read_event(entry, names);
    }
    step.items.push_back(std::move(item));
  }
  if (node.has("ranks")) {
    const JsonReader ranks = node.at("ranks");
    if (ranks.json().is_string() && ranks.as_string() == "all" && step.divergent()) {
      ranks.fail("a rank count: this step holds per-rank groups");
    }
    if (!ranks.json().is_string() && !step.divergent()) ranks.fail("\"all\": this step holds no per-rank group");
    if (!ranks.json().is_string()) ranks.as_int(*group_size, *group_size);
  }
  return step;
}

}  // namespace

Trace read_trace(const nlohmann::json& json, const std::string& source) {
  const JsonReader root(json, source);
  root.expect_object();
  check_version(root);
  root.expect_only_keys(kTopLevelKeys);
  Trace trace;
  trace.source = root.has("source") ? root.at("source").as_string() : "";
  trace.name = root.has("name") ? root.at("name").as_string() : "";
  if (root.has("dtype")) trace.dtype = root.at("dtype").as_choice({"f32", "bf16"});
  if (root.has("world")) trace.world = static_cast<int>(root.at("world").as_int(1, 1 << 20));
  if (root.has("tokens")) trace.tokens = root.at("tokens").as_int(0, kCountMax);
  if (root.has("hidden_size")) trace.hidden_size = root.at("hidden_size").as_int(1, kCountMax);
  read_run_shape(root, trace);
  if (root.has("recorder")) {
    const JsonReader recorder = root.at("recorder");
    if (!recorder.json().is_object() || !recorder.has("tool")) {
      recorder.fail("an object {\"tool\", ...} naming the recorder and its versions");
    }
    for (const auto& key : recorder.keys()) {
      if (!recorder.at(key).json().is_string() && !recorder.at(key).json().is_null()) recorder.at(key).fail("a string or null");
    }
    trace.recorder = recorder.json();
  }
  Names names;
  const bool shape_mode = root.has("steps");
  if (shape_mode || root.has("modules") || root.has("params")) {
    read_modules(root.at("modules"), trace, names);
    read_params(root.at("params"), trace, names);
  }
  if (shape_mode) {
    const JsonReader steps = root.at("steps");
    int group_size = 0;
    int64_t replayed_steps = 0;
    for (size_t i = 0; i < steps.size(); ++i) {
      trace.steps.push_back(read_step(steps.at(i), names, &group_size));
      replayed_steps += trace.steps.back().repeat;
      if (replayed_steps > kReplayedStepsMax) {
        const JsonReader step = steps.at(i);
        (step.has("repeat") ? step.at("repeat") : step).fail("a repeat that keeps the trace's steps in all (the sum of every repeat) at most " +
                                      std::to_string(kReplayedStepsMax) + "; steps after the first few replay alike");
      }
    }
    if (trace.steps.empty()) steps.fail("at least one step");
    if (group_size > 0 && trace.world > 0 && group_size != trace.world) {
      root.at("world").fail("the per-rank group size " + std::to_string(group_size));
    }
    for (size_t i = 0; i < trace.steps.size(); ++i) {
      for (int rank = 0; rank < std::max(group_size, 1); ++rank) {
        validate_step_events(trace, trace.steps[i], source, "/steps/" + std::to_string(i) + "/events", rank);
      }
    }
  }
  if (root.has("collectives")) {
    const JsonReader collectives = root.at("collectives");
    collectives.expect_only_keys({"ranks", "calls"});
    const bool all = collectives.at("ranks").as_choice({"all", "per_rank"}) == "all";
    const JsonReader calls = collectives.at("calls");
    for (size_t r = 0; r < (all ? 1 : calls.size()); ++r) {
      const JsonReader list = all ? calls : calls.at(r);
      std::vector<TraceCollective> out;
      for (size_t k = 0; k < list.size(); ++k) out.push_back(read_collective(list.at(k)));
      trace.collectives.push_back(std::move(out));
    }
  }
  read_functional_sections(root, source, trace);
  if (!shape_mode && !trace.run) root.fail("a trace with \"steps\" (shape replay) or \"model_spec\" and \"run\" (functional replay)");
  return trace;
}

Trace load_trace(const std::string& path) { return read_trace(read_json_file(path), path); }

}  // namespace zero3
