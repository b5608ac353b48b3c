// The ZeRO-3 engine for one rank: parameters, gradients and optimizer state are partitioned over
// the world; each module's parameters are gathered just before its forward and its backward and
// released right after; gradients are reduce-scattered in id-ordered buckets and accumulated into
// f32 shards; AdamW runs on f32 master shards. It is written against the Communicator and
// Allocator seams only, so it runs unchanged over the simulator and over NCCL.
//
// Hierarchical sharding (ZeroConfig::shard_group_size, hpz_group_size) splits the world into
// blocks of consecutive ranks once, at construction (a collective). HSDP shards everything over
// the block instead of the world: gathers run inside it, gradients are reduce-scattered inside it
// and all-reduced across blocks (communicator.h's tree), and the norm adds the block's partials.
// hpZ shards over the world as flat ZeRO-3 does; a parameter gathered in a step keeps its block
// shard of the gathered value (secondary_param_shard) until the step ends, and a gather issued in
// backward takes it from there, inside the block.
//
// The engine is the Context's ModuleHooks: the model's forward does not know it is sharded.
//
//   Zero3Engine engine(model, comm, allocator, kernels, config);
//   Context ctx(kernels, &engine, comm.rank());
//   StepStats stats = engine.train_step(ctx, data, step);
#pragma once
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "core/base/fault_points.h"
#include "core/tensor/allocator.h"
#include "core/zero3/bug_injection.h"
#include "core/zero3/engine_phase.h"
#include "core/sharding/communicator.h"
#include "core/autograd/context.h"
#include "core/models/data.h"
#include "core/nn/model.h"
#include "core/zero3/fetch_trace.h"
#include "core/training/optimizer.h"
#include "core/zero3/param_status.h"
#include "core/training/step_stats.h"
#include "core/training/trainer.h"
#include "core/training/train_config.h"

namespace zero3 {

class BucketLayout;

struct EngineCounters {
  int64_t gathers = 0;               // all-gather collectives issued (buckets)
  int64_t secondary_gathers = 0;     // hpZ: of those, gathered inside the block from secondary shards
  int64_t gathered_elements = 0;     // full elements made available by gathers
  int64_t reduce_scatters = 0;
  int64_t prefetched_params = 0;
  int64_t trace_invalidations = 0;
  // Gathered elements held at once, in-flight gathers included: their buffers are allocated when
  // the gather is issued, and they are what stage3_max_live_parameters bounds.
  int64_t live_elements_peak = 0;
  int64_t external_registrations = 0;
  // ZeRO-Offload's host<->device copies: gradient shards down and updated shards up
  // (offload_optimizer), parameter shards up for each gather (offload_param).
  int64_t device_to_host_bytes = 0;
  int64_t host_to_device_bytes = 0;
};

class Zero3Engine;

// Watches the engine from outside (the property harness checks lifecycle invariants with it;
// a recorder can log status changes). Every method defaults to doing nothing.
class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  virtual void on_transition(const Parameter&, ParamStatus /*from*/, ParamStatus /*to*/, const std::string& /*module*/) {}
  virtual void after_post_forward(const Module&, const Zero3Engine&) {}
  virtual void after_post_backward(const Module&, const Zero3Engine&) {}
  virtual void after_step(const Zero3Engine&) {}
  // A raw handle read a parameter that is not available: the placeholder policy decides what the
  // reader gets (the error policy throws right after this call).
  virtual void on_placeholder_read(const Parameter&, ParamStatus /*status*/) {}
};

class Zero3Engine : public ModuleHooks, public Trainer {
 public:
  // Tensors live on kernels.device(): shards, buffers, gathered parameters and gradients; the
  // host sees only what checkpoint_shards() and full_state() copy back.
  Zero3Engine(Model& model, Communicator& comm, Allocator& allocator, Kernels& kernels, const TrainConfig& config,
              BugInjections bugs = {});
  ~Zero3Engine() override;

  StepStats train_step(Context& ctx, const DataSource& data, int64_t step) override;

  // train_step in its phases, for drivers that run forward and backward themselves (trace
  // replay): begin_step, then per micro-step begin_micro_step, forward, begin_backward,
  // backward, record_micro_loss, end_micro_step; then end_step (a driver that records no loss
  // reports 0). Each call is checked against engine_phase.h's table: out of order, it is a
  // CorrectnessError naming the call, the phase, the rank and the step. end_micro_step and
  // end_step assert the step-boundary invariants (nothing in flight, every gradient reduced, the
  // live count equal to the gathered parameters) in every run, not only under the harness.
  void begin_step(Context& ctx, int64_t step);
  void begin_micro_step(Context& ctx);
  void begin_backward();
  void end_micro_step(Context& ctx);
  // Keeps one micro-step's loss on the device; end_step averages them (one host read per step).
  void record_micro_loss(Context& ctx, const Tensor& loss);
  StepStats end_step(Context& ctx);

  void pre_forward(Context& ctx, Module& module) override;
  void post_forward(Context& ctx, Module& module) override;
  void pre_backward(Context& ctx, Module& module) override;
  void post_backward(Context& ctx, Module& module) override;
  Tensor checked_access(Context& ctx, Module& user, Parameter& param) override;
  Tensor raw_access(Context& ctx, Parameter& param) override;

  void set_observer(EngineObserver* observer) { observer_ = observer; }
  // Offload's copies and host buffers are fault points (core/base/fault_points.h); null: none fire.
  void set_fault_points(FaultPoints* faults) { faults_ = faults; }

  // Introspection for tests, reports and the property harness.
  EnginePhase phase() const { return phase_; }
  ParamStatus status(const Parameter& param) const;
  bool is_persistent(const Parameter& param) const;
  const OptimizerSlot& slot(const Parameter& param) const;   // this rank's f32 master shard
  const EngineCounters& counters() const { return counters_; }
  int64_t live_elements() const { return totals_.live_elements; }
  int64_t largest_module_elements() const { return largest_module_elements_; }
  int world() const { return comm_.world(); }
  // The ranks parameters are sharded over: HSDP's block, else the world.
  int shard_world() const { return shard_comm().world(); }
  // Full f32 master weights and AdamW moments of every parameter by id, gathered from all ranks
  // (collectives: every rank must call it).
  std::vector<OptimizerSlot> gather_full_state(int64_t step);

  // ---- checkpoints (core/training/checkpoint.h) ---- implemented in zero3_checkpoint.cc
  // This rank's f32 master shards and AdamW moments by parameter id, each of shard_numel elements
  // (over the world; under HSDP over the block), padding zero. They share storage with the engine: write them out before the next step.
  std::vector<OptimizerSlot> shard_state() const;
  // Replaces this rank's master shards and moments (copied; laid out as shard_state() returns them)
  // and recasts the compute-dtype shards. Call between steps. Gathered copies (persistent
  // parameters stay gathered between steps) are released, not refreshed in place: each is gathered
  // again with its new value at its next use, so no collective runs here and the ranks need not
  // load in step with each other.
  void load_shard_state(Context& ctx, const std::vector<OptimizerSlot>& shards);
  // The Trainer interface over the three above.
  // Under HSDP a rank holds its block's shard, not its world shard: the block gathers the full
  // state (a collective inside each block) and each rank cuts its world shard from it.
  std::vector<OptimizerSlot> checkpoint_shards(int64_t step) override;
  void load_full_state(Context& ctx, const std::vector<OptimizerSlot>& full) override;
  std::vector<OptimizerSlot> full_state(int64_t step) override { return gather_full_state(step); }
  // ---- end of checkpoints

 private:
  struct ParamState;
  struct PendingGather;
  // sim/engine_tests/zero3_engine_assertions_test.cc: puts the engine in states no public call sequence reaches
  // (a stale gather, a miscounted live total) to show that each invariant check fires.
  friend struct EngineInvariantProbe;

  // Construction, in its order.
  void shard_parameters();
  std::unique_ptr<ParamState> shard_parameter(Parameter& param, int world, int shard_rank);
  void account_shard_memory(const ParamState& state, int world);
  std::vector<const Module*> all_modules() const;
  void measure_largest_module(const std::vector<const Module*>& modules);
  void find_outermost_leaves(const std::vector<const Module*>& modules);
  void assign_parameters_to_leaves(const std::vector<const Module*>& modules);

  // Lifecycle.
  void fetch(Context& ctx, Module& module, const std::vector<ParamState*>& wanted);
  void issue_gather(Module& module, const std::vector<ParamState*>& params);
  // The gather's CallSite::purpose, for fault tables: recompute, secondary-shard, block or world.
  const char* gather_purpose(bool from_secondary) const;
  void complete_gather(Context& ctx, PendingGather& pending);
  void wait_for(Context& ctx, ParamState& state);
  void release(Context& ctx, ParamState& state, Module& module);
  void release_unused_after(Context& ctx, Module& module, const std::vector<ParamState*>& params);
  void prefetch_after(Module& module);
  void invalidate_trace(Context& ctx, Module& module);
  std::vector<ParamState*> params_of(Module& module);
  bool is_leaf(const Module& module) const;
  const Module* enclosing_leaf() const;  // the outermost leaf module running, or null
  void begin_use(Context& ctx, Module& module);
  void end_use(Context& ctx, Module& module);

  // Gradients and the step.
  void note_gradients_ready(Context& ctx, Module& module);
  void account_full_grad(Context& ctx, ParamState& state);
  void release_full_grad(Context& ctx, ParamState& state);
  // flush_reduce_bucket in its order: lay the bucket out, pack and drop its full gradients, reduce
  // the packed buffer across ranks, add each parameter's reduced block into its gradient shard.
  void flush_reduce_bucket(Context& ctx);
  void order_reduce_bucket_by_id();
  BucketLayout reduce_bucket_layout() const;
  Tensor pack_reduce_bucket(Context& ctx, const BucketLayout& layout);
  Tensor reduce_packed_bucket(Context& ctx, const BucketLayout& layout, Tensor& world_buffer);
  void accumulate_reduced_bucket(Context& ctx, const BucketLayout& layout, const Tensor& block);
  float global_grad_norm(int64_t step);
  void optimizer_step(Context& ctx, int64_t step, float clip);

  // Offload: where the optimizer state and the parameter shards live, and the counted copies.
  bool offloads_optimizer() const { return config_.zero.offload_optimizer == OffloadDevice::cpu; }
  bool offloads_params() const { return config_.zero.offload_param == OffloadDevice::cpu; }
  Kernels& optimizer_kernels() const { return offloads_optimizer() ? cpu_kernels() : kernels_; }
  Tensor down(const Tensor& device_tensor);  // device -> host, counted
  Tensor up(const Tensor& host_tensor);      // host -> device, counted
  // The compute-dtype shard from the f32 master, where offload_param wants it.
  void refresh_shard(ParamState& state);

  // Hierarchical sharding's communicators (see the top of this file), split at construction
  // (zero3_groups.cc).
  void split_into_groups();
  Communicator& shard_comm() const { return shard_block_ ? *shard_block_ : comm_; }
  // hpZ: the block shard a completed gather keeps, and a bucket's gather from those shards.
  void keep_secondary(ParamState& state);
  bool gathers_from_secondary(const std::vector<ParamState*>& params) const;
  void drop_secondary(ParamState& state);

  Tensor placeholder(const ParamState& state) const;
  // Where placeholders live: the device, or the host in a shape-only (meta) replay, as before.
  Device data_device() const { return device_ == Device::meta ? Device::cpu : device_; }
  TransitionSite site(const ParamState& state, const std::string& module) const;
  CallSite call_site(const std::string& module, const std::vector<ParamState*>& params, const char* phase) const;
  // The one place a parameter's status changes, and with it its full tensor (held exactly while
  // AVAILABLE), its gather (pointed at exactly while INFLIGHT) and the totals; both sides are
  // checked (check_param_side).
  void move_status(ParamState& state, ParamStatus to, const std::string& module, Tensor full, PendingGather* gather);
  void count_transition(ParamStatus from, ParamStatus to, int64_t numel);

  // Invariants, checked in every run (zero3_engine_checks.cc).
  void enter_call(EngineCall call) { phase_ = phase_after(phase_, call, comm_.rank(), step_); }
  [[noreturn]] void fail_invariant(const std::string& what) const;
  enum class Side : uint8_t { before, after };
  void check_param_side(const ParamState& state, ParamStatus from, ParamStatus to, const std::string& module,
                        Side side) const;
  void check_gather_bucket_order(const Module& module, const std::vector<ParamState*>& params) const;
  void check_reduce_bucket_unreduced() const;
  void check_micro_step_boundary(Context& ctx) const;
  void check_step_boundary() const;

  Model& model_;
  Communicator& comm_;
  std::unique_ptr<Communicator> shard_block_;    // HSDP: the block parameters are sharded over
  std::unique_ptr<Communicator> across_blocks_;  // HSDP: one rank of each block, for the all-reduce
  std::unique_ptr<Communicator> hpz_block_;      // hpZ: the block of the secondary shards
  Allocator& allocator_;
  Kernels& kernels_;
  TrainConfig config_;
  BugInjections bugs_;
  DType compute_dtype_;
  Device device_ = Device::cpu;  // meta: shape-only replay, no data anywhere
  int64_t step_ = 0;
  EnginePhase phase_ = EnginePhase::between_steps;
  Tensor micro_losses_;  // f32 [gradient_accumulation_steps] on the device, this step's losses
  int64_t micro_losses_recorded_ = 0;

  std::vector<std::unique_ptr<ParamState>> states_;                 // by parameter id
  std::vector<int64_t> numel_by_id_;  // every parameter's elements, for the trace's reuse distances
  std::map<const Module*, std::vector<ParamState*>> externals_;      // registered external uses
  std::vector<std::unique_ptr<PendingGather>> pending_;              // in-flight gathers
  // (module, invocation) → parameters it used in forward; drives gradient readiness.
  std::map<std::pair<const Module*, int64_t>, std::vector<ParamState*>> uses_;
  // (module, invocation) → parameters it accessed itself, leaf or not; their full gradients are
  // counted when its backward ends.
  std::map<std::pair<const Module*, int64_t>, std::vector<ParamState*>> accessed_;
  std::vector<std::pair<const Module*, int64_t>> invocation_stack_;
  std::vector<ParamState*> reduce_bucket_;                           // ready, not yet reduced
  FetchTrace trace_;
  EngineCounters counters_;
  StatusTotals totals_;  // parameters and elements by status, moved by move_status only
  int64_t largest_module_elements_ = 0;
  EngineObserver* observer_ = nullptr;
  FaultPoints* faults_ = nullptr;
  bool recomputing_ = false;  // inside a checkpointed module's recompute: its gathers say so
  // Wall-clock seconds in down/up and the host AdamW, summed over the engine's life (train_step
  // reports a step's share as PhaseTimes::offload_s). For reports only: nothing decides on it.
  double offload_seconds_ = 0.0;
  std::set<const Module*> leaves_;
  std::set<const Module*> leaves_done_;  // leaves whose backward finished this micro-step
};

}  // namespace zero3
