// Runtime switches that put known sharded-training bugs back into the engine, so the property
// harness can prove it catches each one (its mutation score). Off by default; each names the
// real-world bug it mirrors. `zero3 fuzz --inject NAME` switches one on.
#pragma once
#include <bitset>
#include <string>
#include <vector>

namespace zero3 {

enum class Bug : uint8_t {
  // DeepSpeed: fetch skipped when the module's parameters to fetch have 0 elements in total, so a
  // zero-sized parameter never leaves NOT_AVAILABLE.
  gather_gated_on_numel,
  // A parameter used by a module that does not own it is not registered, so it is used while
  // partitioned (it shows its placeholder).
  external_not_registered,
  // Gradient buckets laid out in hook-arrival order instead of parameter-id order.
  bucket_order_by_arrival,
  // Parameter shard padding left uninitialised (DeepSpeed allocates the flat partition with
  // torch.empty): the last ranks' shards carry garbage beyond the parameter's elements.
  padding_uninitialized,
  // Gradient bucket padding left uninitialised before the reduce-scatter, so the padding of the
  // gradient shards (and the global norm over them) carries garbage.
  grad_padding_uninitialized,
  // A gradient bucket that exactly fills reduce_bucket_size is never flushed on time and its
  // reduction is skipped.
  bucket_exact_size_skipped,
  // The prefetch trace is invalidated without waiting for in-flight gathers.
  invalidate_without_wait,
  // A parameter is released at a module's post-forward although an enclosing module still uses it.
  release_while_in_use,
  // The 1/gradient_accumulation_steps scale is applied per micro-step and again at the end.
  gas_scale_twice,
  // Only parameters that received a gradient on this rank take part in reduce-scatter, as with
  // reduction driven by gradient hooks alone: an expert that no row was routed to on one rank
  // never fires its hook there, so the ranks reduce different buckets (under NCCL a hang or a
  // wrong sum; PyTorch DDP without find_unused_parameters fails the same way).
  unused_params_skipped,
  // A gathered parameter is marked AVAILABLE without waiting for its all-gather.
  missing_gather_wait,
  // A resumed run restores the master weights but restarts the AdamW moments from zero, as when
  // a sharded checkpoint is loaded without its optimizer state because the world size changed.
  resume_without_optimizer_state,
  // Prefetch never runs although overlap_comm and the budgets ask for it, as when DeepSpeed's
  // fetch trace is invalidated every step: results stay exact, every module waits for its own
  // gather, the overlap is silently lost.
  prefetch_silently_off,
  // Parameters are never released after their module's post-forward or post-backward (a release
  // hook that does not fire): results stay exact, gathered memory grows to the whole model.
  never_release,
  // A gather bucket laid out in the order the module lists its parameters (its own, then the
  // external ones as they were registered) instead of by id: ranks that registered externals in
  // another order would lay the same collective out differently.
  gather_order_by_arrival,
  // A checkpointed module's recompute in backward skips the gathers of the modules inside it (their
  // pre-forward hooks, fired again by the recompute, fetch nothing), as a recompute that assumes
  // the parameters are still gathered from forward: it reads released parameters. The class of
  // ZeRO-3 + activation checkpointing failures where the recomputed forward sees a parameter in its
  // released [0] shape (huggingface/transformers#47254, DeepSpeed PR #8148; FSDP's recompute sees
  // the same, transformers#34928).
  recompute_without_gather,
  // Under offload_optimizer, the host step updates the f32 master but the compute-dtype shard that
  // ranks gather from is not written back from it, so every later forward runs on the weights from
  // before the step while the optimizer state looks right: the copy that ends ZeRO-Offload's CPU
  // Adam step gone wrong (DeepSpeed PR #2059: z2 + cpu-offload copied fp32 into the wrong fp16
  // partition; issue #1643: DeepSpeedCPUAdam's fp16 copy wrong after step).
  offload_update_not_copied_up,
  // The all-gather after the step that refreshes persistent parameters (at stages 1 and 2, every
  // parameter) is skipped and their gathered copies from before the step stay in use: a ZeRO-1/2
  // step that updates its own partition but never gathers the partitions back into the replicas
  // (DeepSpeed's stage 1/2 step ends with that all-gather), or a persistent ZeRO-3 parameter left
  // as it was gathered.
  stale_replica_after_step,
  // HSDP (mics_shard_size): the gradient is reduce-scattered inside the block but the all-reduce
  // across blocks is skipped, so each block steps on its own data only and the replicas drift
  // apart: the hybrid-sharding class where training reaches a worse loss than full sharding
  // (pytorch/pytorch#140183) with nothing failing.
  hsdp_cross_block_skipped,
  // HSDP: the reduced gradient is averaged over the G ranks of a block instead of the W ranks of
  // the world (the divisor of a flat reduce-scatter over the shard group), so every gradient is
  // W/G times too large.
  hsdp_average_over_block,
  // hpZ (zero_hpz_partition_size): the secondary shards kept for backward's gathers are not
  // dropped after the optimizer step, so the next step's backward gathers the weights from
  // before the step while its forward used the new ones.
  hpz_secondary_kept_after_step,
  // A checkpoint series' `latest` is rewritten to name the new save when the save starts, not once
  // it is published: a crash mid-save leaves `latest` naming a checkpoint that is not there, and a
  // resume finds nothing to load although the previous save is intact (DeepSpeed writes its
  // `latest` tag after every rank's files; a tag written first is the bug class of
  // microsoft/DeepSpeed#1917's incomplete-checkpoint reports). Only a crash during a save shows it.
  latest_recorded_before_save,
  count_,
};

const char* bug_name(Bug bug);
const char* bug_description(Bug bug);
std::vector<Bug> all_bugs();
// Throws InputError listing the known names when `name` is not one.
Bug parse_bug(const std::string& name);

// What the padding bugs (padding_uninitialized, grad_padding_uninitialized) leave where zeros
// belong: a value that differs by rank, as uninitialised memory would, so sums over the ranks
// carry it visibly instead of cancelling.
inline float uninitialized_padding_value(int rank) { return 3.0f + static_cast<float>(rank); }

class BugInjections {
 public:
  bool on(Bug bug) const { return bits_.test(static_cast<size_t>(bug)); }
  void set(Bug bug) { bits_.set(static_cast<size_t>(bug)); }
  bool any() const { return bits_.any(); }

 private:
  std::bitset<static_cast<size_t>(Bug::count_)> bits_;
};

}  // namespace zero3
