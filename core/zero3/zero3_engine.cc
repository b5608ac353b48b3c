// The ZeRO-3 engine's module hooks: fetch (bucketed gathers, prefetch along the trace), release,
// external registration and placeholders. Construction (sharding, leaves) is in zero3_setup.cc,
// the training step in zero3_step.cc, checkpoints in zero3_checkpoint.cc; the interface in
// zero3_engine.h.
#include "core/zero3/zero3_engine.h"

#include <algorithm>
#include <cmath>

#include "core/autograd/autograd.h"
#include "core/sharding/bucket_layout.h"
#include "core/base/errors.h"
#include "core/base/stopwatch.h"
#include "core/nn/module.h"
#include "core/sharding/partition.h"
#include "core/zero3/zero3_engine_state.h"

namespace zero3 {

namespace {

// How many fetch events past the current one each fetch looks at to prefetch, besides the element
// budgets (prefetch_bucket_size, max_live_parameters): it bounds how far ahead gathers run and the
// trace walked at every fetch. It decides which gathers are issued early, never a gathered value.
// Eight since the engine's first version, with no recorded reason or measurement behind it.
constexpr size_t kPrefetchLookaheadEvents = 8;

}  // namespace

Zero3Engine::~Zero3Engine() = default;

// ---- status, placeholders, sites ------------------------------------------------------------

ParamStatus Zero3Engine::status(const Parameter& param) const { return states_[param.id()]->status; }
bool Zero3Engine::is_persistent(const Parameter& param) const { return states_[param.id()]->persistent; }
const OptimizerSlot& Zero3Engine::slot(const Parameter& param) const { return states_[param.id()]->slot; }

Tensor Zero3Engine::placeholder(const ParamState&) const {
  // DeepSpeed's representation of a released parameter: an empty tensor. Raw handles see the
  // configured policy instead (raw_access).
  return Tensor::zeros({0}, compute_dtype_, data_device());
}

TransitionSite Zero3Engine::site(const ParamState& state, const std::string& module) const {
  return {.param = state.param->name(), .rank = comm_.rank(), .step = step_, .module = module};
}

CallSite Zero3Engine::call_site(const std::string& module, const std::vector<ParamState*>& params,
                                const char* phase) const {
  CallSite call{.module = module, .params = {}, .step = step_, .phase = phase};
  for (const ParamState* state : params) call.params.push_back(state->param->name());
  return call;
}

void Zero3Engine::move_status(ParamState& state, ParamStatus to, const std::string& module, Tensor full,
                              PendingGather* gather) {
  const ParamStatus from = state.status;
  check_param_side(state, from, to, module, Side::before);
  transition(state.status, to, site(state, module));  // `from` is what `to` requires: the legal table
  // Status, tensor, gather and totals change together here, so no path (a throw midway, a bug
  // injection) can leave them apart.
  state.full = std::move(full);
  state.pending = gather;
  count_transition(from, to, state.numel);
  check_param_side(state, from, to, module, Side::after);
  if (observer_) observer_->on_transition(*state.param, from, to, module);
}

void Zero3Engine::count_transition(ParamStatus from, ParamStatus to, int64_t numel) {
  totals_.move(from, to, numel);
  // The peak counts in-flight buffers too: they are allocated when the gather is issued.
  counters_.live_elements_peak =
      std::max(counters_.live_elements_peak, totals_.live_elements + totals_.inflight_elements);
}

bool Zero3Engine::is_leaf(const Module& module) const { return leaves_.count(&module) > 0; }

const Module* Zero3Engine::enclosing_leaf() const {
  for (const auto& [module, invocation] : invocation_stack_) {
    if (is_leaf(*module)) return module;
  }
  return nullptr;
}

std::vector<Zero3Engine::ParamState*> Zero3Engine::params_of(Module& module) {
  std::vector<ParamState*> out;
  // A leaf module stands for its whole subtree.
  if (is_leaf(module)) {
    for (Parameter* param : module.all_parameters()) out.push_back(states_[param->id()].get());
  } else {
    for (const auto& param : module.parameters()) out.push_back(states_[param->id()].get());
  }
  auto it = externals_.find(&module);
  if (it != externals_.end()) out.insert(out.end(), it->second.begin(), it->second.end());
  return out;
}

// ---- offload: counted host<->device copies -----------------------------------------------------

Tensor Zero3Engine::down(const Tensor& device_tensor) {
  if (faults_ && faults_->armed()) {
    faults_->host_allocation(kSiteOffloadHostBuffer, device_tensor.bytes(), "a host copy for offload");
    faults_->reach(kSiteOffloadDown, std::to_string(device_tensor.bytes()) + " bytes device to host");
  }
  counters_.device_to_host_bytes += device_tensor.bytes();
  if (device_tensor.is_meta()) return device_tensor;
  const Stopwatch watch;
  Tensor host = kernels_.to_host(device_tensor);
  offload_seconds_ += watch.seconds();
  return host;
}

Tensor Zero3Engine::up(const Tensor& host_tensor) {
  if (faults_ && faults_->armed()) faults_->reach(kSiteOffloadUp, std::to_string(host_tensor.bytes()) + " bytes host to device");
  counters_.host_to_device_bytes += host_tensor.bytes();
  if (host_tensor.is_meta()) return host_tensor;
  const Stopwatch watch;
  Tensor device = kernels_.copy_to_device(host_tensor);
  offload_seconds_ += watch.seconds();
  return device;
}

void Zero3Engine::refresh_shard(ParamState& state) {
  // Cast where the master lives (the host under offload_optimizer: DeepSpeed's CPU Adam writes the
  // compute-dtype copy there), then moved to where the shard is kept.
  const Tensor cast_master = cast(optimizer_kernels(), state.slot.master, compute_dtype_);
  if (offloads_optimizer() == offloads_params()) {
    state.shard = cast_master;
  } else {
    state.shard = offloads_params() ? down(cast_master) : up(cast_master);
  }
}

// ---- gathering and releasing ------------------------------------------------------------------

void Zero3Engine::issue_gather(Module& module, const std::vector<ParamState*>& params) {
  check_gather_bucket_order(module, params);
  std::vector<BucketEntry> entries;
  for (const ParamState* state : params) entries.push_back({.param_id = state->param->id(), .numel = state->numel});
  const bool from_secondary = gathers_from_secondary(params);
  Communicator& comm = from_secondary ? *hpz_block_ : shard_comm();
  auto pending =
      std::make_unique<PendingGather>(PendingGather{BucketLayout(entries, comm.world()), params, {}, {}, {}, from_secondary});
  const int64_t block = pending->layout.block_numel();
  pending->send = Tensor::zeros({block}, compute_dtype_, device_);
  pending->world_buffer = Tensor::zeros({block * comm.world()}, compute_dtype_, device_);
  std::vector<const Tensor*> shards;
  std::vector<Tensor> uploaded;  // offload_param: each host shard copied up for the gather
  uploaded.reserve(params.size());
  for (ParamState* state : params) {
    if (offloads_params() && !from_secondary) uploaded.push_back(up(state->shard));
    shards.push_back(from_secondary ? &state->secondary : offloads_params() ? &uploaded.back() : &state->shard);
    move_status(*state, ParamStatus::inflight, module.display_name(), Tensor(), pending.get());
  }
  pending->layout.pack_shards(kernels_, shards, pending->send);
  CallSite gather_site = call_site(module.display_name(), params, engine_phase_label(phase_));
  gather_site.purpose = gather_purpose(from_secondary);
  pending->work = comm.all_gather_async(pending->send, pending->world_buffer, gather_site);
  counters_.gathers++;
  if (from_secondary) counters_.secondary_gathers++;
  pending_.push_back(std::move(pending));
}

const char* Zero3Engine::gather_purpose(bool from_secondary) const {
  if (recomputing_) return "recompute gather";
  if (from_secondary) return "secondary-shard gather";
  return shard_block_ ? "block gather" : "gather";
}

void Zero3Engine::complete_gather(Context& ctx, PendingGather& pending) {
  // Found before it is waited: a gather completed twice, or never issued, has no work to wait for.
  auto it = std::find_if(pending_.begin(), pending_.end(), [&](const auto& p) { return p.get() == &pending; });
  if (it == pending_.end()) {
    fail_invariant("a gather of " + std::to_string(pending.params.size()) + " parameters" +
                   (pending.params.empty() ? "" : " from '" + pending.params.front()->param->name() + "'") +
                   " completed that is not in flight (completed twice, or never issued)");
  }
  if (!bugs_.on(Bug::missing_gather_wait)) pending.work->wait();
  for (size_t i = 0; i < pending.params.size(); ++i) {
    ParamState& state = *pending.params[i];
    Tensor full = Tensor::zeros({state.numel}, compute_dtype_, device_);
    pending.layout.unpack_full(kernels_, pending.world_buffer, i, full);
    move_status(state, ParamStatus::available, "<gather>", full.reshape(state.param->shape()), nullptr);
    if (!pending.from_secondary) keep_secondary(state);
    ctx.set_param_value(*state.param, state.full);
    allocator_.acquire(MemoryCategory::gathered_param, state.numel * dtype_bytes(compute_dtype_), state.param->name());
    counters_.gathered_elements += state.numel;
  }
  pending_.erase(it);
}

void Zero3Engine::wait_for(Context& ctx, ParamState& state) {
  if (state.status == ParamStatus::inflight) complete_gather(ctx, *state.pending);
}

void Zero3Engine::fetch(Context& ctx, Module& module, const std::vector<ParamState*>& wanted) {
  // Inside a leaf everything is gathered already; what runs there may differ by rank, so it must
  // neither shape the trace nor trigger prefetches (both would diverge across ranks).
  const Module* leaf = enclosing_leaf();
  if (leaf && leaf != &module) {
    for (ParamState* state : wanted) wait_for(ctx, *state);
    return;
  }
  FetchEvent event{.module = &module, .param_ids = {}};
  for (const ParamState* state : wanted) event.param_ids.push_back(state->param->id());
  std::sort(event.param_ids.begin(), event.param_ids.end());
  event.param_ids.erase(std::unique(event.param_ids.begin(), event.param_ids.end()), event.param_ids.end());
  if (!trace_.observe(event)) invalidate_trace(ctx, module);

  // The decision to gather is "is any parameter NOT_AVAILABLE", never an element count: a
  // zero-sized parameter goes through the same transitions as any other.
  std::vector<int64_t> arrival;  // the injected bug's order: as the module lists its parameters
  if (bugs_.on(Bug::gather_order_by_arrival)) {
    for (const ParamState* state : wanted) {
      if (std::find(arrival.begin(), arrival.end(), state->param->id()) == arrival.end()) arrival.push_back(state->param->id());
    }
  }
  std::vector<ParamState*> needed;
  int64_t needed_elements = 0;
  for (int64_t id : arrival.empty() ? event.param_ids : arrival) {
    ParamState* state = states_[id].get();
    if (state->status != ParamStatus::not_available) continue;
    needed.push_back(state);
    needed_elements += state->numel;
  }
  if (bugs_.on(Bug::gather_gated_on_numel) && needed_elements == 0) needed.clear();
  // Coalesce into buckets of at most prefetch_bucket_size elements (at least one parameter each).
  std::vector<ParamState*> bucket;
  int64_t bucket_elements = 0;
  for (ParamState* state : needed) {
    if (!bucket.empty() && bucket_elements + state->numel > config_.zero.prefetch_bucket_elements) {
      issue_gather(module, bucket);
      bucket.clear();
      bucket_elements = 0;
    }
    bucket.push_back(state);
    bucket_elements += state->numel;
  }
  if (!bucket.empty()) issue_gather(module, bucket);
  for (int64_t id : event.param_ids) wait_for(ctx, *states_[id]);
  prefetch_after(module);
}

void Zero3Engine::prefetch_after(Module& module) {
  if (!config_.zero.overlap_comm || bugs_.on(Bug::prefetch_silently_off)) return;
  int64_t budget = config_.zero.prefetch_bucket_elements;
  // Counted as the live elements are, without the buckets' padding.
  int64_t inflight = totals_.inflight_elements;
  for (const FetchEvent* event : trace_.upcoming(kPrefetchLookaheadEvents)) {
    std::vector<ParamState*> to_prefetch;
    int64_t elements = 0;
    for (int64_t id : event->param_ids) {
      ParamState* state = states_[id].get();
      if (state->status != ParamStatus::not_available) continue;
      to_prefetch.push_back(state);
      elements += state->numel;
    }
    if (to_prefetch.empty()) continue;
    if (elements > budget || totals_.live_elements + inflight + elements > config_.zero.max_live_elements) break;
    issue_gather(module, to_prefetch);
    budget -= elements;
    inflight += elements;
    counters_.prefetched_params += static_cast<int64_t>(to_prefetch.size());
  }
}

void Zero3Engine::invalidate_trace(Context& ctx, Module& module) {
  counters_.trace_invalidations++;
  trace_.invalidate();
  // Prefetched gathers for an order that is no longer happening: wait for them (a gather
  // cannot be abandoned half-joined), then release whatever no running module uses.
  while (!pending_.empty()) {
    PendingGather& pending = *pending_.front();
    std::vector<ParamState*> params = pending.params;
    if (bugs_.on(Bug::invalidate_without_wait)) {
      for (ParamState* state : params) release(ctx, *state, module);
      pending_.erase(pending_.begin());
      continue;
    }
    complete_gather(ctx, pending);
    for (ParamState* state : params) {
      if (state->active_uses == 0 && !state->persistent) release(ctx, *state, module);
    }
  }
}

void Zero3Engine::release(Context& ctx, ParamState& state, Module& module) {
  // Only AVAILABLE -> NOT_AVAILABLE is legal (move_status throws otherwise), so what is released
  // here was always gathered and counted.
  move_status(state, ParamStatus::not_available, module.display_name(), Tensor(), nullptr);
  ctx.set_param_value(*state.param, placeholder(state));
  allocator_.release(MemoryCategory::gathered_param, state.numel * dtype_bytes(compute_dtype_));
}

void Zero3Engine::release_unused_after(Context& ctx, Module& module, const std::vector<ParamState*>& params) {
  if (bugs_.on(Bug::never_release)) return;
  for (ParamState* state : params) {
    if (state->status != ParamStatus::available || state->persistent) continue;
    if (state->active_uses > 0 && !bugs_.on(Bug::release_while_in_use)) continue;
    // Keep a parameter the trace says comes back soon, while the live budget allows.
    const int64_t distance = trace_.reuse_distance(state->param->id(), numel_by_id_);
    if (distance >= 0 && distance <= config_.zero.max_reuse_distance &&
        totals_.live_elements <= config_.zero.max_live_elements) {
      continue;
    }
    release(ctx, *state, module);
  }
}

// ---- hooks ------------------------------------------------------------------------------------

void Zero3Engine::begin_use(Context& ctx, Module& module) {
  invocation_stack_.push_back({&module, ctx.current_invocation()});
  for (ParamState* state : params_of(module)) state->active_uses++;
}

void Zero3Engine::end_use(Context& ctx, Module& module) {
  if (invocation_stack_.empty() || invocation_stack_.back().first != &module) {
    fail_invariant("module '" + module.display_name() + "' ended but " +
                   (invocation_stack_.empty() ? std::string("no module") : "'" + invocation_stack_.back().first->display_name() + "'") +
                   " is the innermost running");
  }
  invocation_stack_.pop_back();
  const std::vector<ParamState*> params = params_of(module);
  for (ParamState* state : params) {
    if (state->active_uses <= 0) {
      fail_invariant("'" + state->param->name() + "' has no active use left for module '" + module.display_name() +
                     "' to end");
    }
    state->active_uses--;
  }
  release_unused_after(ctx, module, params);
}

void Zero3Engine::pre_forward(Context& ctx, Module& module) {
  enter_call(EngineCall::pre_forward);
  begin_use(ctx, module);
  // A forward hook in BACKWARD is a checkpointed module's recompute: it must gather again, since
  // post-forward released what forward gathered.
  if (bugs_.on(Bug::recompute_without_gather) && phase_ == EnginePhase::backward) return;
  recomputing_ = phase_ == EnginePhase::backward;
  fetch(ctx, module, params_of(module));
  recomputing_ = false;
}

void Zero3Engine::post_forward(Context& ctx, Module& module) {
  enter_call(EngineCall::post_forward);
  end_use(ctx, module);
  if (observer_) observer_->after_post_forward(module, *this);
}

void Zero3Engine::pre_backward(Context& ctx, Module& module) {
  enter_call(EngineCall::pre_backward);
  begin_use(ctx, module);
  fetch(ctx, module, params_of(module));
}

void Zero3Engine::post_backward(Context& ctx, Module& module) {
  enter_call(EngineCall::post_backward);
  note_gradients_ready(ctx, module);
  end_use(ctx, module);
  if (observer_) observer_->after_post_backward(module, *this);
}

Tensor Zero3Engine::checked_access(Context& ctx, Module& user, Parameter& param) {
  enter_call(EngineCall::checked_access);
  ParamState& state = *states_[param.id()];
  // Inside a leaf, the leaf is the unit that gathers: an external use there belongs to the leaf
  // (its own subtree's parameters are not external to it).
  const Module* leaf = enclosing_leaf();
  Module& gatherer = leaf ? const_cast<Module&>(*leaf) : user;
  auto& externals = externals_[&gatherer];
  const bool is_external = leaf ? state.leaf != leaf : &param.owner() != &user;
  if (is_external && std::find(externals.begin(), externals.end(), &state) == externals.end() &&
      !bugs_.on(Bug::external_not_registered)) {
    // First use by a module that does not own it: from now on it is gathered with `gatherer`.
    externals.push_back(&state);
    counters_.external_registrations++;
    state.active_uses++;  // `gatherer` is running; its end_use now counts this parameter too
    trace_.amend_last(&gatherer, param.id());
    if (state.status == ParamStatus::not_available) issue_gather(gatherer, {&state});
    wait_for(ctx, state);
  }
  if (!invocation_stack_.empty() && invocation_stack_.back().first == &user && !state.frozen) {
    // Its full gradient appears when this invocation's backward runs (counted then), ...
    auto& accessed = accessed_[invocation_stack_.back()];
    if (std::find(accessed.begin(), accessed.end(), &state) == accessed.end()) accessed.push_back(&state);
    // ... but inside a leaf, every use counts as the leaf's: its gradients become ready together.
    auto key = invocation_stack_.back();
    for (const auto& entry : invocation_stack_) {
      if (is_leaf(*entry.first)) {
        key = entry;
        break;
      }
    }
    auto& used = uses_[key];
    if (std::find(used.begin(), used.end(), &state) == used.end()) {
      used.push_back(&state);
      state.remaining_grad_uses++;
    }
  }
  if (state.status == ParamStatus::available) return state.full;
  return raw_access(ctx, param);  // used while partitioned: the placeholder policy decides
}

Tensor Zero3Engine::raw_access(Context& ctx, Parameter& param) {
  const ParamState& state = *states_[param.id()];
  if (state.status == ParamStatus::available) return state.full;
  if (observer_) observer_->on_placeholder_read(param, state.status);
  switch (config_.zero.placeholder) {
    case PlaceholderPolicy::empty: return Tensor::zeros({0}, compute_dtype_, data_device());
    case PlaceholderPolicy::scalar: return device_full(ctx.kernels(), {1}, 1.0f, compute_dtype_);
    case PlaceholderPolicy::error: break;
  }
  const std::string module = ctx.module_stack().empty() ? "<none>" : ctx.module_stack().back()->display_name();
  throw CorrectnessError("parameter '" + param.name() + "' " + shape_str(param.shape()) + " used while " +
                         param_status_name(state.status) + " on rank " + std::to_string(comm_.rank()) + " at step " +
                         std::to_string(step_) + " in module '" + module +
                         "' (placeholder policy 'error'; a cached raw handle or an unregistered parameter)");
}

}  // namespace zero3
