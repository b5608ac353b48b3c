// The ZeRO-3 engine's construction: each parameter cut into this rank's shard (with its optimizer
// state and memory accounted), the largest module measured, and the leaf modules found and given
// their parameters. The hooks are in zero3_engine.cc; the interface in zero3_engine.h.
#include <algorithm>

#include "core/base/errors.h"
#include "core/nn/module.h"
#include "core/sharding/partition.h"
#include "core/zero3/zero3_engine.h"
#include "core/zero3/zero3_engine_state.h"

namespace zero3 {

namespace {

// f32 tensors of one trained parameter's optimizer shard: the master and AdamW's two moments (a
// frozen one keeps its master only).
constexpr int64_t kAdamWShardTensors = 3;

}  // namespace

Zero3Engine::Zero3Engine(Model& model, Communicator& comm, Allocator& allocator, Kernels& kernels,
                         const TrainConfig& config, BugInjections bugs)
    : model_(model), comm_(comm), allocator_(allocator), kernels_(kernels), config_(config), bugs_(bugs),
      compute_dtype_(config.bf16 ? DType::bf16 : DType::f32),
      device_(model.device().kind == DeviceKind::meta ? Device::meta : kernels.device()) {
  split_into_groups();  // first: the shards are cut over the group it picks
  shard_parameters();
  // The first placement is setup, not a step's traffic.
  counters_.device_to_host_bytes = counters_.host_to_device_bytes = 0;
  const std::vector<const Module*> modules = all_modules();
  measure_largest_module(modules);
  find_outermost_leaves(modules);
  assign_parameters_to_leaves(modules);
}

void Zero3Engine::shard_parameters() {
  const int world = shard_comm().world();
  const int shard_rank = shard_comm().rank();
  for (Parameter* param : model_.parameters()) {
    std::unique_ptr<ParamState> state = shard_parameter(*param, world, shard_rank);
    account_shard_memory(*state, world);
    // The engine owns the value from now on; the full tensor is dropped so nothing can read it.
    param->data = placeholder(*state);
    numel_by_id_.push_back(state->numel);
    states_.push_back(std::move(state));
  }
}

std::unique_ptr<Zero3Engine::ParamState> Zero3Engine::shard_parameter(Parameter& param, int world, int shard_rank) {
  ZERO3_CHECK(param.data.defined(), "initialise '" + param.name() + "' before sharding");
  if (param.data.is_meta()) device_ = Device::meta;
  auto state = std::make_unique<ParamState>();
  state->param = &param;
  state->numel = param.numel();
  // The model was initialised on the host; this rank's part of it moves to the device.
  Tensor host_shard =
      make_shard(cpu_kernels(), param.data.to_dtype(DType::f32).reshape({param.numel()}), world, shard_rank);
  if (bugs_.on(Bug::padding_uninitialized) && !host_shard.is_meta()) {
    const int64_t owned = shard_range(param.numel(), world, shard_rank).owned();
    cpu_kernels().fill_range(host_shard, owned, host_shard.numel() - owned, uninitialized_padding_value(comm_.rank()));
  }
  state->frozen = !param.requires_grad();
  Kernels& optimizer = optimizer_kernels();
  if (state->frozen) {
    state->slot.master = optimizer.to_device(host_shard);
  } else {
    state->slot = make_optimizer_slot(optimizer, optimizer.to_device(host_shard));
    state->grad_shard = Tensor::zeros({shard_numel(state->numel, world)}, DType::f32, device_);
  }
  refresh_shard(*state);
  // Stages 1 and 2 replicate every parameter: each is gathered once and kept, as ZeRO-3 keeps a
  // parameter under the persistence threshold, and refreshed by an all-gather after the step.
  state->persistent = config_.zero.stage < 3 || state->numel <= config_.zero.persistence_threshold;
  return state;
}

void Zero3Engine::account_shard_memory(const ParamState& state, int world) {
  const std::string& name = state.param->name();
  const int64_t shard_elements = shard_numel(state.numel, world);
  const int64_t f32_bytes = dtype_bytes(DType::f32);
  allocator_.acquire(offloads_params() ? MemoryCategory::host_param_shard : MemoryCategory::param_shard,
                     shard_elements * dtype_bytes(compute_dtype_), name);
  // f32 master, and for a trained parameter the two AdamW moments and the f32 gradient: a shard,
  // or under stage 1 the whole all-reduced gradient every rank holds.
  allocator_.acquire(offloads_optimizer() ? MemoryCategory::host_optimizer_state : MemoryCategory::optimizer_state,
                     (state.frozen ? 1 : kAdamWShardTensors) * shard_elements * f32_bytes, name);
  if (!state.frozen) {
    const int64_t grad_elements = config_.zero.stage == 1 ? state.numel : shard_elements;
    allocator_.acquire(MemoryCategory::grad_shard, grad_elements * f32_bytes, name);
  }
}

std::vector<const Module*> Zero3Engine::all_modules() const {
  // Breadth first from the root: parents before their children.
  std::vector<const Module*> modules = {&model_.root()};
  for (size_t i = 0; i < modules.size(); ++i) {
    for (const auto& child : modules[i]->children()) modules.push_back(child.get());
  }
  return modules;
}

void Zero3Engine::measure_largest_module(const std::vector<const Module*>& modules) {
  for (const Module* module : modules) {
    int64_t own = 0;
    for (const auto& param : module->parameters()) own += param->numel();
    largest_module_elements_ = std::max(largest_module_elements_, own);
  }
}

void Zero3Engine::find_outermost_leaves(const std::vector<const Module*>& modules) {
  for (const Module* module : modules) {
    for (const std::string& leaf : config_.zero.leaf_modules) {
      if (leaf == module->type() || leaf == module->name()) leaves_.insert(module);
    }
  }
  // A leaf inside another leaf adds nothing (the outer one gathers and reduces it already) and
  // would make readiness depend on the inner one's rank-divergent execution: only outermost count.
  for (auto it = leaves_.begin(); it != leaves_.end();) {
    bool nested = false;
    for (const Module* up = (*it)->parent(); up && !nested; up = up->parent()) nested = leaves_.count(up) > 0;
    it = nested ? leaves_.erase(it) : std::next(it);
  }
}

void Zero3Engine::assign_parameters_to_leaves(const std::vector<const Module*>& modules) {
  // Each parameter under a leaf remembers its outermost leaf: its gradient is ready only once that
  // leaf's backward is done, whatever other modules use it and whichever experts this rank ran.
  for (const Module* module : modules) {
    if (!is_leaf(*module)) continue;
    for (Parameter* param : module->all_parameters()) {
      ParamState& state = *states_[param->id()];
      if (!state.leaf) state.leaf = module;
    }
  }
}

}  // namespace zero3
