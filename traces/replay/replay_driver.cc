// One rank's replay: events through the engine's hooks, compute on the clock, and the findings.
#include "traces/replay/replay_driver.h"

#include <algorithm>
#include <cctype>

#include "core/autograd/autograd.h"
#include "core/base/errors.h"
#include "core/nn/module.h"
#include "core/sharding/partition.h"

namespace zero3 {

namespace {

bool is_embedding(const std::string& type) {
  std::string lower = type;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  return lower.find("embedding") != std::string::npos;
}

std::string placeholder_effect(PlaceholderPolicy policy) {
  switch (policy) {
    case PlaceholderPolicy::error: return "raises under placeholder policy 'error'";
    case PlaceholderPolicy::empty: return "reads the shape-[0] placeholder (policy 'empty'): broadcasting can hide it";
    case PlaceholderPolicy::scalar: return "reads the shape-[1] placeholder 1.0 (policy 'scalar'): broadcasting hides it";
  }
  return "";
}

}  // namespace

ReplayDriver::ReplayDriver(const Trace& trace, const TrainConfig& config, const HardwareProfile& hardware,
                           const KernelRates& kernel_rates, TraceModel& model, Zero3Engine& engine, Context& ctx,
                           ReplayClock& clock, TrackingAllocator& memory, RankReplay& out)
    : trace_(trace), config_(config), hardware_(hardware), kernel_rates_(kernel_rates),
      price_work_(kernel_rates.prices_work() && trace.has_kernel_work()), model_(model), engine_(engine), ctx_(ctx),
      clock_(clock), memory_(memory), out_(out) {
  for (size_t i = 0; i < trace.params.size(); ++i) param_by_name_[trace.params[i].name] = static_cast<int32_t>(i);
}

const std::string& ReplayDriver::module_name(int32_t module) const {
  static const std::string none = "<none>";
  return module < 0 ? none : trace_.modules[static_cast<size_t>(module)].name;
}

void ReplayDriver::run_step(const TraceStep& step, int64_t step_index) {
  step_ = step_index;
  const std::vector<TraceEvent> events = events_for(step, out_.rank);
  out_.step_start_s.push_back(clock_.now_s());
  const double busy_before_s = out_.compute_busy_s;
  const size_t step_span = out_.compute.size();
  out_.compute.push_back({"step " + std::to_string(step_index), "step", clock_.now_s(), kOpenSpan});
  engine_.begin_step(ctx_, step_index);
  bool in_forward = false;
  size_t forward_span = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    const TraceEvent& event = events[i];
    const bool is_forward = event.kind == EventKind::enter || event.kind == EventKind::exit ||
                            event.kind == EventKind::call || event.kind == EventKind::param || event.kind == EventKind::raw;
    if (!in_forward && (is_forward || event.kind == EventKind::backward)) {
      engine_.begin_micro_step(ctx_);
      forward_span = out_.compute.size();
      out_.compute.push_back({"forward", "phase", clock_.now_s(), kOpenSpan});
      in_forward = true;
    }
    if (is_forward) {
      forward_event(event);
    } else if (event.kind == EventKind::backward) {
      // The loss's forward ran outside every module, at the forward's end.
      if (price_work_) compute_work(event.forward_work);
      out_.compute[forward_span].end_s = clock_.now_s();
      std::vector<int32_t> recorded_order;  // the trace's own bwd_enter events, if it has them
      for (size_t k = i + 1; k < events.size() && (events[k].kind == EventKind::bwd_enter ||
                                                   events[k].kind == EventKind::bwd_exit); ++k) {
        if (events[k].kind == EventKind::bwd_enter) recorded_order.push_back(events[k].module);
      }
      run_backward(recorded_order, event);
      in_forward = false;
    } else if (event.kind == EventKind::optimizer_step) {
      memory_.set_place(step_, "step", "");
      const size_t span = out_.compute.size();
      out_.compute.push_back({"optimizer step", "optimizer", clock_.now_s(), kOpenSpan});
      engine_.end_step(ctx_);
      optimizer_on_device();
      out_.compute[span].end_s = clock_.now_s();
      offload_at_step_end();
    }
  }
  out_.compute[step_span].end_s = clock_.now_s();
  out_.step_end_s.push_back(clock_.now_s());
  out_.step_compute_s.push_back(out_.compute_busy_s - busy_before_s);
  out_.step_model_flops.push_back(model_flops_);
  out_.step_recompute_flops.push_back(recompute_flops_);
  model_flops_ = recompute_flops_ = 0.0;
  if (out_.step_offload_s.size() < out_.step_compute_s.size()) out_.step_offload_s.push_back(0.0);
}

void ReplayDriver::optimizer_on_device() {
  // AdamW over this rank's shard of every trained parameter, at the profile's rate (0: unpriced).
  // Under offload_optimizer the host does it instead (offload_at_step_end).
  if (config_.zero.offload_optimizer == OffloadDevice::cpu) return;
  int64_t elements = 0, trained = 0;
  for (const Parameter* param : model_.parameters()) {
    if (!param->requires_grad()) continue;
    elements += shard_numel(param->numel(), engine_.world());
    ++trained;
  }
  if (hardware_.optimizer_elements_per_s > 0.0) {
    const double before_s = clock_.now_s();
    clock_.advance_s(static_cast<double>(elements) / hardware_.optimizer_elements_per_s);
    out_.compute_busy_s += clock_.now_s() - before_s;
  }
  if (price_work_) {
    KernelRates passes = kernel_rates_;
    if (passes.optimizer_passes_bytes_per_s > 0.0) passes.memory_bytes_per_s = passes.optimizer_passes_bytes_per_s;
    compute_work(optimizer_step_work(elements, trained), FlopsKind::model, passes);
  }
}

KernelWork ReplayDriver::optimizer_step_work(int64_t shard_elements, int64_t trained_params) const {
  // The engine's memory-bound passes over its f32 gradient and master shards besides AdamW
  // (core/zero3/zero3_step.cc): the gradient norm reads each gradient element; the refresh casts
  // the master to the compute dtype; the gradient shard is zeroed for the next step; under
  // gradient accumulation the summed gradient is divided in place first. A call per pass and
  // parameter. Clipping's scale runs only when the norm exceeds the limit (data the replay has
  // not), so it is not priced.
  const double compute_bytes = config_.bf16 ? 2.0 : 4.0;
  const bool accumulates = config_.gradient_accumulation_steps > 1;
  const double bytes_per_element = 4.0 + (4.0 + compute_bytes) + 4.0 + (accumulates ? 8.0 : 0.0);
  KernelWork work;
  work.bytes = bytes_per_element * static_cast<double>(shard_elements);
  work.calls = trained_params * (accumulates ? 3 : 2) + 1;
  return work;
}

void ReplayDriver::offload_at_step_end() {
  const EngineCounters& counters = engine_.counters();
  const int64_t down = counters.device_to_host_bytes - down_seen_;
  const int64_t up = counters.host_to_device_bytes - up_seen_;
  down_seen_ = counters.device_to_host_bytes;
  up_seen_ = counters.host_to_device_bytes;
  int64_t host_elements = 0;
  if (config_.zero.offload_optimizer == OffloadDevice::cpu) {
    for (const Parameter* param : model_.parameters()) {
      if (param->requires_grad()) host_elements += shard_numel(param->numel(), engine_.world());
    }
  }
  if (down + up == 0 && host_elements == 0) return;
  const double seconds = offload_time_s(hardware_, down + up, host_elements);
  const double start_s = clock_.now_s();
  clock_.advance_s(seconds);
  out_.compute.push_back({"offload: copies and host AdamW", "offload", start_s, clock_.now_s()});
  out_.step_offload_s.push_back(seconds);
  out_.device_to_host_bytes += down;
  out_.host_to_device_bytes += up;
}

void ReplayDriver::close_open_spans() {
  for (TimelineSpan& span : out_.compute) {
    if (span.end_s != kOpenSpan) continue;
    span.end_s = clock_.now_s();
    span.name += " (unfinished)";
  }
}

void ReplayDriver::forward_event(const TraceEvent& event) {
  switch (event.kind) {
    case EventKind::enter: enter(event); break;
    case EventKind::exit: exit(event.module); break;
    case EventKind::param: access(event.module, event.param); break;
    case EventKind::raw: raw_access(event.module, event.param); break;
    case EventKind::call:
      // A leaf call: the module uses each of its own parameters through the checked accessor.
      enter(event);
      for (const auto& param : model_.module(event.module).parameters()) access(event.module, model_.trace_index_of(*param));
      exit(event.module);
      break;
    default: ZERO3_CHECK(false, std::string("not a forward event: ") + event_kind_name(event.kind));
  }
}

void ReplayDriver::enter(const TraceEvent& event) {
  const int32_t module = event.module;
  memory_.set_place(step_, "forward", module_name(module));
  auto invocation = std::make_shared<Invocation>();
  invocation->module = module;
  invocation->flops = own_flops(module, event.flops);
  invocation->forward_work = event.forward_work;
  invocation->backward_work = event.backward_work;
  invocation->activation_bytes = event.activation_bytes;
  invocation->output_bytes = event.output_bytes;
  invocation->input_bytes = event.input_bytes;
  invocation->forward_transient = event.forward_transient_bytes;
  invocation->backward_transient = event.backward_transient_bytes;
  invocation->released_at_backward_begin = event.released_at_backward_begin_bytes;
  invocation->invocation = ctx_.enter_module(model_.module(module));  // pre-forward: the engine fetches here
  note_invalidations(module_name(module));
  invocation->start_s = clock_.now_s();
  open_.push_back(invocation);
  // Runs last in this invocation's backward, right before its post-backward hook. In a recompute
  // it runs first: as zero3's tape does (recompute_checkpointed), a checkpointed invocation that
  // kept its output lets it go before the range's activations, the output among them, are held
  // again. One that kept its inputs (torch.utils.checkpoint) holds them until its backward ends.
  record_on_tape([this, invocation] { backward_end(*invocation); },
                 [this, invocation] {
                   if (invocation->input_bytes > 0 || invocation->kept_bytes == 0) return;
                   memory_.release(MemoryCategory::activation, invocation->kept_bytes);
                   invocation->kept_bytes = 0;
                 });
}

void ReplayDriver::access(int32_t module, int32_t param) {
  ctx_.param(model_.module(module), model_.param(param));
  std::vector<int32_t>& used = open_.back()->used_params;
  if (std::find(used.begin(), used.end(), param) == used.end()) used.push_back(param);
}

void ReplayDriver::raw_access(int32_t module, int32_t param) {
  Parameter& handle = model_.param(param);
  const ParamStatus status = engine_.status(handle);
  if (status == ParamStatus::available) {
    ctx_.raw(handle);
    return;
  }
  add_finding("raw_placeholder", module, param,
              std::string("raw handle read while ") + param_status_name(status) + ": " +
                  placeholder_effect(config_.zero.placeholder));
}

void ReplayDriver::exit(int32_t module) {
  ZERO3_CHECK(!open_.empty() && open_.back()->module == module, "exit of " + module_name(module));
  std::shared_ptr<Invocation> invocation = open_.back();
  memory_.set_place(step_, "forward", module_name(module));
  if (price_work_) compute_work(invocation->forward_work);
  else compute(invocation->flops);
  out_.compute.push_back({"fwd " + model_.module(module).display_name(), "forward", invocation->start_s, clock_.now_s()});
  transient(invocation->forward_transient, module_name(module));
  const bool checkpoint = starts_checkpoint(module);
  if (checkpoint) {
    // Only the inputs stay until backward (PyTorch's non-reentrant checkpoint; the output, zero3's
    // own, where the trace does not say the inputs); what the nested invocations kept is let go,
    // and this invocation's own activations are never held (backward computes them again).
    if (invocation->nested_held_bytes > 0) memory_.release(MemoryCategory::activation, invocation->nested_held_bytes);
    invocation->kept_bytes = invocation->input_bytes > 0 ? invocation->input_bytes : invocation->output_bytes;
    if (invocation->kept_bytes > 0) {
      memory_.acquire(MemoryCategory::activation, invocation->kept_bytes, module_name(module) + " (checkpoint)");
    }
  } else if (invocation->activation_bytes > 0) {
    memory_.acquire(MemoryCategory::activation, invocation->activation_bytes, module_name(module));
  }
  open_.pop_back();
  if (!open_.empty() && !checkpoint) {
    open_.back()->nested_held_bytes += invocation->nested_held_bytes + invocation->activation_bytes;
  }
  // Runs first in this invocation's backward, right after its pre-backward hook; in a recompute,
  // its forward runs again first.
  record_on_tape([this, invocation] { backward_begin(*invocation); }, [this, invocation] { recompute_exit(invocation); });
  ctx_.exit_module(model_.module(module), invocation->invocation);
}

bool ReplayDriver::starts_checkpoint(int32_t module) const {
  if (!ctx_.is_checkpointed(model_.module(module))) return false;
  // open_ holds the running invocations, this one last.
  for (size_t i = 0; i + 1 < open_.size(); ++i) {
    if (ctx_.is_checkpointed(model_.module(open_[i]->module))) return false;
  }
  return true;
}

void ReplayDriver::recompute_exit(const std::shared_ptr<Invocation>& invocation) {
  // The invocation's forward once more, between the gathers its pre-forward hook issued again.
  memory_.set_place(step_, "recompute", module_name(invocation->module));
  const double start_s = clock_.now_s();
  if (price_work_) compute_work(invocation->forward_work, FlopsKind::recompute);
  else compute(invocation->flops, FlopsKind::recompute);
  out_.compute.push_back({"recompute " + model_.module(invocation->module).display_name(), "recompute", start_s,
                          clock_.now_s()});
  transient(invocation->forward_transient, module_name(invocation->module));
  if (invocation->activation_bytes > 0) {
    memory_.acquire(MemoryCategory::activation, invocation->activation_bytes, module_name(invocation->module));
  }
}

void ReplayDriver::backward_begin(const Invocation& invocation) {
  memory_.set_place(step_, "backward", module_name(invocation.module));
  note_invalidations(module_name(invocation.module));
  backward_order_.push_back(invocation.module);
  open_backward_spans_.push_back(out_.compute.size());
  out_.compute.push_back({"bwd " + model_.module(invocation.module).display_name(), "backward", clock_.now_s(), kOpenSpan});
  // Recorded: the backward's own work. Else: backward of a matmul costs two forward matmuls (input
  // and weight gradients).
  if (price_work_) compute_work(invocation.backward_work);
  else compute(2.0 * invocation.flops);
  transient(invocation.backward_transient, module_name(invocation.module));
  if (invocation.released_at_backward_begin > 0) {
    memory_.release(MemoryCategory::activation, invocation.released_at_backward_begin);
  }
}

void ReplayDriver::transient(int64_t bytes, const std::string& what) {
  if (bytes <= 0) return;
  memory_.acquire(MemoryCategory::activation, bytes, what + " (transient)");
  memory_.release(MemoryCategory::activation, bytes);
}

void ReplayDriver::backward_end(Invocation& invocation) {
  out_.compute[open_backward_spans_.back()].end_s = clock_.now_s();
  open_backward_spans_.pop_back();
  const int64_t still_held = invocation.activation_bytes - invocation.released_at_backward_begin;
  if (still_held > 0) memory_.release(MemoryCategory::activation, still_held);
  if (invocation.input_bytes > 0 && invocation.kept_bytes > 0) {  // a checkpoint's inputs, held until now
    memory_.release(MemoryCategory::activation, invocation.kept_bytes);
    invocation.kept_bytes = 0;
  }
  ZERO3_CHECK(invocation.kept_bytes == 0, "the recompute of '" + module_name(invocation.module) +
                                              "' lets its kept output go before its backward ends");
  const int64_t element_bytes = config_.bf16 ? 2 : 4;
  for (int32_t param : invocation.used_params) {
    if (!model_.param(param).requires_grad()) continue;  // frozen: no gradient
    if (grad_bytes_held_.count(param)) continue;  // a second use adds into the same gradient
    const int64_t bytes = model_.param(param).numel() * element_bytes;
    memory_.acquire(MemoryCategory::grad, bytes, trace_.params[static_cast<size_t>(param)].name);
    grad_bytes_held_[param] = bytes;
  }
}

void ReplayDriver::run_backward(const std::vector<int32_t>& recorded_order, const TraceEvent& loss) {
  const int64_t loss_activation_bytes = loss.activation_bytes;
  memory_.set_place(step_, "forward", "");
  transient(loss.forward_transient_bytes, "loss");
  engine_.begin_backward();
  memory_.set_place(step_, "backward", "");
  if (loss_activation_bytes > 0) memory_.acquire(MemoryCategory::activation, loss_activation_bytes, "loss");
  transient(loss.backward_transient_bytes, "loss");
  if (loss.released_at_backward_begin_bytes > 0) {
    memory_.release(MemoryCategory::activation, loss.released_at_backward_begin_bytes);
  }
  backward_order_.clear();
  const size_t span = out_.compute.size();
  out_.compute.push_back({"backward", "phase", clock_.now_s(), kOpenSpan});
  if (price_work_) compute_work(loss.backward_work);  // autograd differentiates the loss first
  backward(ctx_, Var(Tensor::scalar(0.0f)));
  const int64_t loss_still_held = loss_activation_bytes - loss.released_at_backward_begin_bytes;
  if (loss_still_held > 0) memory_.release(MemoryCategory::activation, loss_still_held);
  engine_.end_micro_step(ctx_);
  // The engine reduces every parameter by the end of a micro-step, so no full gradient is left.
  ZERO3_CHECK(grad_bytes_held_.empty(), std::to_string(grad_bytes_held_.size()) + " gradients never reduce-scattered");
  out_.compute[span].end_s = clock_.now_s();
  if (recorded_order.empty() || recorded_order == backward_order_) return;
  size_t first = 0;
  while (first < recorded_order.size() && first < backward_order_.size() && recorded_order[first] == backward_order_[first]) {
    ++first;
  }
  const std::string recorded = first < recorded_order.size() ? module_name(recorded_order[first]) : "<end>";
  const std::string replayed = first < backward_order_.size() ? module_name(backward_order_[first]) : "<end>";
  add_finding("backward_order", first < recorded_order.size() ? recorded_order[first] : -1, -1,
              "backward #" + std::to_string(first) + " was '" + recorded + "' in the recording but '" + replayed +
                  "' in reverse forward order, which the replay follows");
}

void ReplayDriver::on_collective(CollectiveOp op, const CallSite& site) {
  // The gradient reduction that carries a parameter's gradient: a reduce-scatter, or under ZeRO
  // stage 1 an all-reduce of the backward's buckets.
  const bool gradient_reduction =
      op == CollectiveOp::reduce_scatter || (op == CollectiveOp::all_reduce && site.phase == "backward");
  if (!gradient_reduction) return;
  for (const std::string& name : site.params) {
    auto it = param_by_name_.find(name);
    if (it == param_by_name_.end()) continue;
    auto held = grad_bytes_held_.find(it->second);
    if (held == grad_bytes_held_.end()) continue;  // unused: the engine reduces zeros, nothing was held
    memory_.release(MemoryCategory::grad, held->second);
    grad_bytes_held_.erase(held);
  }
}

void ReplayDriver::record_on_tape(std::function<void()> action, std::function<void()> recompute) {
  // A tape op is run by backward() only once its output has a gradient, so give it one now.
  Var output(Tensor::scalar(0.0f), /*requires_grad=*/true);
  output.accumulate_grad(ctx_, Tensor::scalar(1.0f));
  auto backward = [action](Context&, const Tensor&) { action(); };
  // Run again (a checkpointed module's recompute), the op does its forward part and records the
  // same backward into the tape's capture slot.
  auto rerun = [recompute, backward](Context& c) {
    if (recompute) recompute();
    c.tape().record(TapeOp{.name = "replay", .inputs = {}, .output = Var(Tensor::scalar(0.0f), true),
                           .backward = backward, .saved_bytes = 0, .recompute = {}});
  };
  ctx_.tape().record(TapeOp{.name = "replay", .inputs = {}, .output = output, .backward = backward, .saved_bytes = 0,
                            .recompute = rerun});
}

double ReplayDriver::own_flops(int32_t module, double recorded) const {
  if (recorded >= 0.0) return recorded;
  if (trace_.tokens == 0 || is_embedding(trace_.modules[static_cast<size_t>(module)].type)) return 0.0;
  // Derived from shapes (FORMAT.md): a matrix parameter costs 2 flops per element and token.
  double flops = 0.0;
  for (const auto& param : model_.module(module).parameters()) {
    if (param->shape().size() >= 2) flops += 2.0 * static_cast<double>(trace_.tokens) * static_cast<double>(param->numel());
  }
  return flops;
}

void ReplayDriver::compute(double flops, FlopsKind kind) {
  if (flops <= 0.0) return;
  (kind == FlopsKind::model ? model_flops_ : recompute_flops_) += flops;
  const double before_s = clock_.now_s();
  clock_.advance_compute(flops);
  out_.compute_busy_s += clock_.now_s() - before_s;
}

void ReplayDriver::compute_work(const KernelWork& work, FlopsKind kind, const std::optional<KernelRates>& rates) {
  compute(work.flops, kind);
  const double seconds = non_gemm_seconds(work, rates.value_or(kernel_rates_));
  if (seconds <= 0.0) return;
  const double before_s = clock_.now_s();
  clock_.advance_s(seconds);
  out_.compute_busy_s += clock_.now_s() - before_s;
}

void ReplayDriver::note_invalidations(const std::string& module) {
  const int64_t seen = engine_.counters().trace_invalidations;
  if (seen == invalidations_seen_) return;
  invalidations_seen_ = seen;
  out_.findings.push_back({.kind = "trace_invalidation", .rank = out_.rank, .step = step_, .module = module, .param = "",
                           .detail = "the fetch order left the previous step's at this module: in-flight prefetches "
                                     "were waited for and released"});
}

void ReplayDriver::add_finding(std::string kind, int32_t module, int32_t param, std::string detail) {
  out_.findings.push_back({.kind = std::move(kind), .rank = out_.rank, .step = step_,
                           .module = module < 0 ? "" : module_name(module),
                           .param = param < 0 ? "" : trace_.params[static_cast<size_t>(param)].name,
                           .detail = std::move(detail)});
}

}  // namespace zero3
