// The recording hooks, the reference re-run that drives them, and the compaction of the per-rank
// event lists into the trace's SPMD form (trace_recorder.h).
#include "traces/format/trace_recorder.h"

#include <functional>
#include <map>

#include "core/autograd/context.h"
#include "core/base/errors.h"
#include "core/models/model_zoo.h"
#include "core/nn/module.h"
#include "core/training/replicated_trainer.h"
#include "sim/sim_world.h"
#include "traces/format/work_counting_kernels.h"

namespace zero3 {

namespace {

using ModuleIndex = std::map<const Module*, int32_t>;

// Logs every hook and access, then lets the wrapped hooks do their work. The kernel work the rank's
// kernels counted between two hooks goes to the innermost module running (FORMAT.md, "Kernel
// work"): in forward to the open enter event's forward_work, in backward to the backward_work of
// the enter event whose invocation is being differentiated (backward visits invocations in the
// reverse order of their exits). The ops outside every module between the forward's last exit and
// the backward's first module (the loss) go to the backward event: forward_work up to the first
// kernel only backward runs, backward_work from there on. What runs before the first module (the
// batch's upload) and after the last backward (the trainer's reduction and optimizer) is not a
// module's: the replay prices the engine's own optimizer step.
class RecordingHooks : public ModuleHooks {
 public:
  RecordingHooks(ModuleHooks& inner, const ModuleIndex& modules, std::vector<TraceEvent>& events,
                 WorkCountingKernels& kernels)
      : inner_(inner), modules_(modules), events_(events), kernels_(kernels), mark_(kernels.total()) {
    kernels_.set_before_backward_kernel([this] {
      if (in_backward_ || loss_backward_started_ || !forward_seen_ || !open_enters_.empty()) return;
      loss_forward_ += take_work();  // the loss's forward ends where autograd's backward begins
      loss_backward_started_ = true;
    });
  }
  ~RecordingHooks() override { kernels_.set_before_backward_kernel({}); }

  void pre_forward(Context& ctx, Module& module) override {
    if (in_backward_) start_micro_step();
    if (!open_enters_.empty()) events_[open_enters_.back()].forward_work += take_work();
    else if (forward_seen_) loss_forward_ += take_work();  // between top-level modules: outside every module
    else take_work();                                      // the batch, before the first module
    forward_seen_ = true;
    in_backward_ = false;  // a forward after a backward is the next micro-step
    open_enters_.push_back(events_.size());
    push(EventKind::enter, &module);
    inner_.pre_forward(ctx, module);
  }
  void post_forward(Context& ctx, Module& module) override {
    inner_.post_forward(ctx, module);
    // What the module's own ops keep for backward, known only now; the replay counts it from here.
    events_[open_enters_.back()].activation_bytes = ctx.tape().exited_module_activation_bytes();
    // And what its output costs: a replay that checkpoints the module keeps that much until backward.
    events_[open_enters_.back()].output_bytes = ctx.tape().exited_module_output_bytes();
    events_[open_enters_.back()].forward_work += take_work();
    exited_.push_back(open_enters_.back());
    open_enters_.pop_back();
    push(EventKind::exit, &module);
  }
  void pre_backward(Context& ctx, Module& module) override {
    // The loss's ops ran outside every module; their bytes are held until backward ends.
    if (!in_backward_) {
      loss_event_ = events_.size();
      events_.push_back({.kind = EventKind::backward, .activation_bytes = ctx.tape().outside_module_activation_bytes()});
      events_[loss_event_].forward_work = loss_forward_;
    }
    attribute_backward_work();
    in_backward_ = true;
    ZERO3_CHECK(!exited_.empty() && events_[exited_.back()].module == modules_.at(&module),
                "backward of '" + module.name() + "' is not the last forward invocation still to differentiate");
    open_backward_.push_back(exited_.back());
    exited_.pop_back();
    push(EventKind::bwd_enter, &module);
    inner_.pre_backward(ctx, module);
  }
  void post_backward(Context& ctx, Module& module) override {
    inner_.post_backward(ctx, module);
    attribute_backward_work();
    open_backward_.pop_back();
    push(EventKind::bwd_exit, &module);
  }
  Tensor checked_access(Context& ctx, Module& user, Parameter& param) override {
    push(EventKind::param, &user, static_cast<int32_t>(param.id()));
    return inner_.checked_access(ctx, user, param);
  }
  Tensor raw_access(Context& ctx, Parameter& param) override {
    push(EventKind::raw, ctx.module_stack().empty() ? nullptr : ctx.module_stack().back(), static_cast<int32_t>(param.id()));
    return inner_.raw_access(ctx, param);
  }
  void end_step() {
    events_.push_back({.kind = EventKind::optimizer_step});
    start_micro_step();
  }

 private:
  void push(EventKind kind, const Module* module, int32_t param = -1) {
    events_.push_back({.kind = kind, .module = module ? modules_.at(module) : -1, .param = param});
  }
  KernelWork take_work() {
    const KernelWork now = kernels_.total();
    const KernelWork work = now.since(mark_);
    mark_ = now;
    return work;
  }
  // The work since the last hook in backward: the innermost module's being differentiated, else
  // the loss's (autograd ran it before the first module's backward).
  void attribute_backward_work() {
    const KernelWork work = take_work();
    if (!open_backward_.empty()) events_[open_backward_.back()].backward_work += work;
    else if (loss_backward_started_) events_[loss_event_].backward_work += work;
    else events_[loss_event_].forward_work += work;
  }
  // Between micro-steps and steps: the trainer's work is no module's.
  void start_micro_step() {
    take_work();
    in_backward_ = false;
    forward_seen_ = loss_backward_started_ = false;
    loss_forward_ = {};
    exited_.clear();
  }

  ModuleHooks& inner_;
  const ModuleIndex& modules_;
  std::vector<TraceEvent>& events_;
  WorkCountingKernels& kernels_;
  KernelWork mark_;                   // the kernels' total at the last hook
  std::vector<size_t> open_enters_;   // event index of each enter whose exit is still to come
  std::vector<size_t> exited_;        // enter events in the order their invocations exited
  std::vector<size_t> open_backward_; // enter events whose invocation's backward is running
  size_t loss_event_ = 0;             // this micro-step's backward event, once backward began
  KernelWork loss_forward_;           // outside every module, after the first module entered
  bool forward_seen_ = false;
  bool loss_backward_started_ = false;
  bool in_backward_ = false;
};

// The module and parameter tables (modules in pre-order, so parents come first; parameters by id).
Trace skeleton_of(const Model& model, const std::string& dtype, ModuleIndex& index) {
  Trace trace;
  trace.dtype = dtype;
  std::function<void(const Module&)> visit = [&](const Module& module) {
    index[&module] = static_cast<int32_t>(trace.modules.size());
    trace.modules.push_back({module.name(), module.type()});
    for (const auto& child : module.children()) visit(*child);
  };
  visit(model.root());
  for (const Parameter* param : model.parameters()) {
    trace.params.push_back({.id = param->id(), .name = param->name(), .shape = param->shape(), .dtype = dtype,
                            .owner = index.at(&param->owner()), .requires_grad = param->requires_grad()});
  }
  return trace;
}

// enter(m), param(m, p) for each of m's own parameters in order, exit(m) is the event call(m).
std::vector<TraceEvent> compact_calls(const std::vector<TraceEvent>& events, const std::vector<std::vector<int32_t>>& own) {
  std::vector<TraceEvent> out;
  for (size_t i = 0; i < events.size(); ++i) {
    const TraceEvent& event = events[i];
    if (event.kind == EventKind::enter) {
      const std::vector<int32_t>& params = own[static_cast<size_t>(event.module)];
      size_t k = 0;
      while (k < params.size() && i + 1 + k < events.size() && events[i + 1 + k].kind == EventKind::param &&
             events[i + 1 + k].module == event.module && events[i + 1 + k].param == params[k]) {
        ++k;
      }
      const size_t exit_at = i + 1 + k;
      if (k == params.size() && exit_at < events.size() && events[exit_at].kind == EventKind::exit &&
          events[exit_at].module == event.module) {
        TraceEvent call = event;  // everything the enter recorded, its work included
        call.kind = EventKind::call;
        out.push_back(call);
        i = exit_at;
        continue;
      }
    }
    out.push_back(event);
  }
  return out;
}

// Events shared by every rank stay single; the part where ranks differ becomes one per-rank group.
TraceStep step_of(const std::vector<std::vector<TraceEvent>>& by_rank) {
  TraceStep step;
  const std::vector<TraceEvent>& first = by_rank[0];
  size_t prefix = first.size(), suffix = first.size();
  for (const auto& list : by_rank) {
    size_t same = 0;
    while (same < prefix && same < list.size() && list[same] == first[same]) ++same;
    prefix = same;
  }
  for (const auto& list : by_rank) {
    size_t same = 0;
    while (same < suffix && same < list.size() - prefix && same < first.size() - prefix &&
           list[list.size() - 1 - same] == first[first.size() - 1 - same]) {
      ++same;
    }
    suffix = same;
  }
  for (size_t i = 0; i < prefix; ++i) step.items.push_back({.event = first[i], .per_rank = {}});
  bool divergent = false;
  for (const auto& list : by_rank) divergent = divergent || list.size() != first.size() || list != first;
  if (divergent) {
    TraceItem group;
    for (const auto& list : by_rank) group.per_rank.emplace_back(list.begin() + prefix, list.end() - suffix);
    step.items.push_back(std::move(group));
  }
  for (size_t i = first.size() - suffix; i < first.size() && divergent; ++i) step.items.push_back({.event = first[i], .per_rank = {}});
  return step;
}

}  // namespace

std::vector<TraceCollective> collectives_from_event_log(const nlohmann::json& rank_events) {
  std::vector<TraceCollective> out;
  for (const auto& event : rank_events) {
    if (event.value("type", "") != "collective") continue;
    const double start_s = event.at("start_s").get<double>();
    out.push_back({.sequence = event.at("seq").get<int64_t>(), .op = event.at("op").get<std::string>(),
                   .dtype = event.at("dtype").get<std::string>(), .count = event.at("count").get<int64_t>(),
                   .bytes = event.at("bytes").get<int64_t>(), .module = event.at("module").get<std::string>(),
                   .phase = event.at("phase").get<std::string>(), .step = event.at("step").get<int64_t>(),
                   .start_s = start_s, .duration_s = event.at("end_s").get<double>() - start_s,
                   .group = event.value("group", "world"), .level = event.value("level", "")});
  }
  return out;
}

Trace record_training_trace(const DistributedRunOptions& options, const nlohmann::json& zero3_event_log) {
  BuiltModel shape = build_run_model(options);
  ModuleIndex index;
  Trace trace = skeleton_of(*shape.model, options.config.bf16 ? "bf16" : "f32", index);
  std::vector<std::vector<int32_t>> own(trace.modules.size());
  for (const TraceParam& param : trace.params) own[static_cast<size_t>(param.owner)].push_back(static_cast<int32_t>(param.id));
  // events[rank][step]
  std::vector<std::vector<std::vector<TraceEvent>>> events(static_cast<size_t>(options.world));
  SimOptions sim_options{.world = options.world, .seed = options.seed, .faults = {}, .hardware = {},
                         .jitter_fraction = 0.1, .fiber_stack_bytes = 1 << 20, .kernels = nullptr};
  const SimResult recorded = SimWorld(sim_options).run([&](SimRank& sim) {
    BuiltModel built = build_run_model(options);
    initialize_model(built, options.seed);
    ModuleIndex rank_index;
    skeleton_of(*built.model, trace.dtype, rank_index);
    ModuleHooks unsharded;
    std::vector<TraceEvent> step_events;
    WorkCountingKernels counting(sim.kernels());
    RecordingHooks hooks(unsharded, rank_index, step_events, counting);
    TrainConfig config = options.config;
    config.zero.stage = 0;
    ReplicatedTrainer trainer(*built.model, config, {.global_ranks = sim.world(), .comm = &sim.comm()});
    Context ctx(counting, &hooks, sim.rank());
    for (int64_t step = 0; step < options.steps; ++step) {
      trainer.train_step(ctx, *built.data, step);
      hooks.end_step();
      events[static_cast<size_t>(sim.rank())].push_back(compact_calls(step_events, own));
      step_events.clear();
    }
  });
  if (!recorded.all_ok()) throw CorrectnessError("recording the trace's events failed: " + recorded.summary());
  for (int64_t step = 0; step < options.steps; ++step) {
    std::vector<std::vector<TraceEvent>> by_rank;
    for (const auto& rank_steps : events) by_rank.push_back(rank_steps[static_cast<size_t>(step)]);
    TraceStep next = step_of(by_rank);
    if (!trace.steps.empty() && trace.steps.back().items == next.items) trace.steps.back().repeat++;
    else trace.steps.push_back(std::move(next));
  }
  // The training steps' collectives: what run_distributed adds after them (gathering the final
  // state for comparisons, checkpoints) is not part of the trace's events.
  for (const auto& rank_events : zero3_event_log.at("ranks")) {
    std::vector<TraceCollective> calls = collectives_from_event_log(rank_events);
    std::erase_if(calls, [](const TraceCollective& call) { return call.phase == "gather_state" || call.phase == "checkpoint"; });
    trace.collectives.push_back(std::move(calls));
  }
  bool same = true;
  for (const auto& list : trace.collectives) same = same && list == trace.collectives.front();
  if (same && !trace.collectives.empty()) trace.collectives.resize(1);
  trace.source = "zero3 train --record";
  trace.name = shape.spec.value("name", options.model);
  trace.world = options.world;
  // Sequence models say their context (gpt, and the sequential token models with "vocab" and
  // "context"); every other spec's rows are one token each.
  const int64_t context = shape.spec.is_object() ? shape.spec.value("context", int64_t{1}) : 1;
  trace.batch = options.config.micro_batch_size;
  trace.seq_len = context;
  trace.tokens = trace.batch * trace.seq_len;
  // A run section replays functionally on synthetic data only; a data file is not part of the trace.
  if (!options.data_file.empty()) return trace;
  trace.run = TraceRun{.model_spec = shape.spec, .world = options.world, .seed = options.seed, .steps = options.steps,
                       .config = train_config_to_json(options.config), .inject = {}, .faults = options.faults.to_string()};
  return trace;
}

}  // namespace zero3
