// A zero3 trace (traces/FORMAT.md): a model's parameter table and module tree, and per step the
// ordered events one rank ran (module forward and backward, checked and raw parameter accesses,
// the optimizer step); optionally the collective log of the run it was recorded from, and, for a
// fuzzer counterexample or a recorded training run, the model spec and run that reproduce it.
//
// Events of all ranks are stored once; where ranks diverge (MoE routing) an event list holds a
// per-rank group instead, and rank r follows list r mod n of it. events_for() expands a step for
// one rank.
//
//   Trace trace = load_trace("traces/models/gpt2-124m.json");
//   std::vector<TraceEvent> events = events_for(trace.steps[0], /*rank=*/0);
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tensor/shape.h"
#include "traces/format/kernel_work.h"

namespace zero3 {

inline constexpr int64_t kTraceVersion = 1;

struct TraceModule {
  std::string name{};  // dotted; "" is the root, always modules[0]
  std::string type{};  // "Linear", "MixtralSparseMoeBlock", ...: what zero3_leaf_modules matches
};

struct TraceParam {
  int64_t id = 0;  // its index in Trace::params
  std::string name{};
  Shape shape{};
  std::string dtype{};  // as recorded; the engine shards every parameter in the compute dtype
  int32_t owner = 0;  // module index
  bool requires_grad = true;  // false: frozen, no gradient, reduction or optimizer state
};

enum class EventKind : uint8_t { enter, exit, call, param, raw, backward, bwd_enter, bwd_exit, optimizer_step };
const char* event_kind_name(EventKind kind);

// One event. `module` and `param` are indices into Trace::modules / Trace::params (-1: none).
struct TraceEvent {
  EventKind kind = EventKind::enter;
  int32_t module = -1;
  int32_t param = -1;
  double flops = -1.0;           // enter / call: the module's own forward flops; < 0: derive from shapes
  int64_t activation_bytes = 0;  // enter / call: bytes it saves for backward; backward: bytes of
                                 // the ops outside every module (the loss), held until it ends
  // The parts of the two above that grow with batch x seq_len^2 (attention scores), not with
  // tokens: what a rescaled replay (trace_scaling.h) scales by the sequence length once more.
  double flops_quadratic = 0.0;
  int64_t activation_quadratic_bytes = 0;
  // enter / call: bytes of the module's output, what zero3's activation checkpointing keeps of it
  // (the next module's input); 0 when the trace does not say.
  int64_t output_bytes = 0;
  // enter / call: bytes of the module's tensor inputs, what PyTorch's non-reentrant checkpoint keeps
  // of a checkpointed module (a PyTorch recorder's traces); 0 when the trace does not say, and then
  // output_bytes stands in (zero3's own checkpointing).
  int64_t input_bytes = 0;
  int64_t input_quadratic_bytes = 0;  // the part growing with batch x seq_len^2 (T5's position bias)
  // enter / call / backward: the transient peak of the module's own ops (the ops outside every
  // module for backward) above what is held when they start, in forward and in backward:
  // temporaries such as f32 upcasts, a softmax, a gated product; and the parts of them that grow
  // with batch x seq_len^2 (eager attention's probabilities).
  int64_t forward_transient_bytes = 0;
  int64_t forward_transient_quadratic_bytes = 0;
  int64_t backward_transient_bytes = 0;
  int64_t backward_transient_quadratic_bytes = 0;
  // enter / call / backward: the part of the kept bytes autograd frees as soon as the module's (the
  // loss's) backward begins, not when it ends: the loss's log-probabilities, a parent's own saved
  // tensors that its first backward op consumes.
  int64_t released_at_backward_begin_bytes = 0;
  int64_t released_at_backward_begin_quadratic_bytes = 0;
  // enter / call: the kernel work the module's own ops did (its children's excluded) in forward
  // and in its backward; backward: the ops outside every module (the loss) before and after
  // autograd's backward began. Empty when the trace does not say (FORMAT.md, "Kernel work"): replay
  // then prices `flops` (or flops derived from shapes) and a backward of twice the forward.
  KernelWork forward_work{};
  KernelWork backward_work{};
  bool operator==(const TraceEvent&) const = default;
};

// An entry of a step's event list: one event for every rank, or a per-rank group.
struct TraceItem {
  TraceEvent event;
  std::vector<std::vector<TraceEvent>> per_rank{};  // non-empty: a group; rank r follows list r mod size
  bool operator==(const TraceItem&) const = default;
};

struct TraceStep {
  int64_t repeat = 1;  // the same events, this many optimizer steps in a row
  std::vector<TraceItem> items{};
  bool divergent() const;
};

// One collective of the recorded run, as the simulator logged it.
struct TraceCollective {
  int64_t sequence = 0;
  std::string op{};
  std::string dtype{};
  int64_t count = 0;
  int64_t bytes = 0;  // the whole gathered / scattered / reduced buffer
  std::string module{};
  std::string phase{};
  int64_t step = -1;
  double start_s = 0.0;
  double duration_s = 0.0;
  // The communicator it ran on: "world", or hierarchical sharding's "block" / "across blocks"
  // (communicator.h); and whether its ranks all lie in one node, "intra-node" or "inter-node"
  // (hardware_profile.h), "" where the recording did not say.
  std::string group = "world";
  std::string level{};
  bool operator==(const TraceCollective&) const = default;
};

// A run that reproduces the trace functionally (the fuzzer's counterexamples, recorded runs).
struct TraceRun {
  nlohmann::json model_spec{};  // a built-in model's name (string) or an inline spec (object)
  int world = 1;
  uint64_t seed = 1;
  int64_t steps = 1;
  nlohmann::json config = nlohmann::json::object();  // DeepSpeed-style
  std::vector<std::string> inject{};                     // core/zero3/bug_injection.h names
  std::string faults{};                                  // sim/fault_plan.h text
  // The fuzzer's checkpoint round trip {"save_at_step", "resume_world"}; null when absent. Only
  // the fuzzer's own checkpoint-round-trip property knows how to replay it.
  nlohmann::json checkpoint = nullptr;
};

struct TraceExpectation {
  std::string property{};
  std::string message{};
  std::string event_log_hash{};  // optional: 16 hex digits of the failing run's event log
};

struct Trace {
  int64_t version = kTraceVersion;
  std::string source{};           // "generator", "zero3 train --record", "torch", "fuzz", ...
  std::string name{};
  std::string dtype = "bf16";   // the parameters' dtype unless one says otherwise
  int world = 0;                // ranks it was recorded at (0: not recorded)
  int64_t tokens = 0;           // tokens per rank and micro-step, for flops derived from shapes
  int64_t batch = 0;            // sequences per rank and micro-step the amounts were recorded at (0: unknown)
  int64_t seq_len = 0;          // tokens per sequence (0: unknown); batch * seq_len == tokens
  int64_t hidden_size = 0;      // the model's hidden size as its config says it (0: not said)
  std::vector<TraceModule> modules{};
  std::vector<TraceParam> params{};
  std::vector<TraceStep> steps{};
  std::vector<std::vector<TraceCollective>> collectives{};  // empty, one list (all ranks) or per rank
  std::optional<TraceRun> run{};
  std::optional<TraceExpectation> expected{};
  // Who measured the memory amounts and how: {"tool", "torch", "transformers", "attention", "how"}
  // (FORMAT.md); null when the trace does not say.
  nlohmann::json recorder = nullptr;

  bool has_events() const { return !steps.empty(); }
  // Whether any event carries recorded kernel work (then replay prices every module by its work).
  bool has_kernel_work() const;
  bool divergent() const;
  // The per-rank group size of a divergent trace (1 for SPMD traces).
  int divergent_ranks() const;
  int64_t parameter_elements() const;
};

// The model's hidden size: the trace's `hidden_size`, else the width of its first embedding (a
// parameter [rows, width] of a module whose type names an Embedding); 0 when neither says. What
// Hugging Face Trainer fills "auto" bucket sizes from (train_config.h).
int64_t trace_hidden_size(const Trace& trace);

// The step's events as rank `rank` runs them.
std::vector<TraceEvent> events_for(const TraceStep& step, int rank);
// The ranks of `world` grouped by their event streams (every step's events_for), each group
// ascending and the groups in order of their lowest rank: ranks of one group run the same events,
// so a full replay simulates each group once. An SPMD trace is one group.
std::vector<std::vector<int>> ranks_by_event_stream(const Trace& trace, int world);

// Validates everything (structure, references, nesting) and throws InputError naming `source`, the
// JSON path and what was expected. A newer version is rejected.
Trace read_trace(const nlohmann::json& json, const std::string& source);
Trace load_trace(const std::string& path);
nlohmann::json trace_to_json(const Trace& trace);
// Compact JSON: one parameter, module or event per line; written atomically.
std::string trace_to_text(const Trace& trace);
void write_trace(const std::string& path, const Trace& trace);

}  // namespace zero3
