// RapidCheck generators for the property harness: dimensions, world sizes, models, training
// configs, fault plans and whole fuzz cases. Generate only in the test thread (inside a property);
// every case draws its own simulator seed.
//
// Dimensions weigh 0, 1, small primes and sizes just below, at and above the world size, so that
// zero-sized parameters, numel < W and numel % W != 0 come up constantly. Bucket-like limits weigh
// the model's own parameter and module sizes, so that "a bucket exactly this big" comes up too.
//
//   RC_GTEST_PROP(Zero3, EqualsDdp, ()) {
//     const FuzzCase fuzz_case = *gen_spmd_case({.max_ranks = 8});
//     ...
//   }
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include <rapidcheck.h>

#include "core/training/train_config.h"
#include "props/fuzz_case.h"
#include "props/model_facts.h"
#include "props/spec_realizer.h"

namespace zero3 {

struct GenLimits {
  int max_ranks = 16;
};

// Uniform in [min, max) whatever RapidCheck's size (its inRange narrows the range at small sizes).
rc::Gen<int64_t> gen_uniform(int64_t min, int64_t max);

// rc::gen::weightedElement's draw (the same element from the same random source), shrinking toward
// the earlier elements as elementOf does. RapidCheck's weighted choice does not shrink at all, so a
// found case kept its steps, micro-batch, fault plan and frozen flags whatever its failure needed.
// An element of weight 0 is never drawn but is still a shrink: a simplification to try.
template <typename T>
rc::Gen<T> gen_weighted_element(std::initializer_list<std::pair<std::size_t, T>> pairs) {
  std::vector<std::size_t> cumulative;
  std::vector<T> elements;
  std::size_t total = 0;
  for (const auto& [weight, element] : pairs) {
    total += weight;
    cumulative.push_back(total);
    elements.push_back(element);
  }
  return rc::Gen<T>([=](const rc::Random& random, int) {
    const std::size_t drawn = static_cast<std::size_t>(rc::Random(random).next() % total);
    const auto index = static_cast<std::size_t>(
        std::upper_bound(cumulative.begin(), cumulative.end(), drawn) - cumulative.begin());
    return rc::shrinkable::map(
        rc::shrinkable::shrinkRecur(index, [](std::size_t i) { return rc::seq::range<std::size_t>(0, i); }),
        [elements](std::size_t i) { return elements[i]; });
  });
}

// 0, 1, primes, world - 1, world, world + 1, or small; never above world + 1 or 13.
rc::Gen<int64_t> gen_dimension(int world);
// 1..max_ranks, mostly small; max_ranks itself comes up too.
rc::Gen<int> gen_world(int max_ranks);
// A list of layer draws; containers nest at most two deep. RapidCheck's size sets only how many
// layers the top level holds (up to 12), so that early cases are small; each draw is uniform.
rc::Gen<std::vector<LayerDraw>> gen_layer_draws(int world, const RealizeOptions& options, int depth);
// A valid sequential model spec (realize_model_spec over generated draws). With `trap_motif`
// (and raw_foreign), half the models also get, somewhere in their top level, a sum_residual whose
// body ends with a raw read of an earlier parameter: the broadcast trap's shape, which a campaign
// against a framework must reach in every hundred cases; the motif shrinks away when not needed.
rc::Gen<nlohmann::json> gen_model_spec(int world, const RealizeOptions& options, bool trap_motif = false);
// An element count for bucket sizes and live/reuse limits: 0 or 1, a parameter's or a module's
// size, the whole model and one more, or the (huge) default.
rc::Gen<int64_t> gen_element_limit(const ModelFacts& facts);
// What the config may hold beyond the always-varied knobs.
struct ConfigOptions {
  bool require_moe_leaf = false;  // MoE layers must be leaves (SPMD on W > 1)
  // The memory levers: ZeRO stage 1 or 2 (3 most of the time), activation checkpointing of the
  // model's modules, offload_optimizer (stage >= 1) and offload_param (stage 3). Each shrinks toward
  // off (stage 3, nothing checkpointed, nothing offloaded). Off: the config keeps those defaults.
  bool levers = true;
  // With levers at stage 3 on `world` ranks: HSDP (shard_group_size, any divisor of the world) or
  // hpZ (hpz_group_size, a divisor above 1, where one lies below W), shrinking toward neither
  // (generators.cc draw_groups). 0: no groups, for cases whose runs cannot hold them (a target).
  int world = 0;
};
rc::Gen<TrainConfig> gen_train_config(const ModelFacts& facts, const ConfigOptions& options);
// checkpoint_modules for the model: none three times in four, else one or two of its module types
// and dotted names, half of them containers with parameters below (whose recompute gathers the
// modules inside them again).
rc::Gen<std::vector<std::string>> gen_checkpoint_modules(const ModelFacts& facts);
// FaultPlan text. Benign faults (late, reorder, stall) only delay; destructive ones (crash, alloc)
// must end in a specific error.
rc::Gen<std::string> gen_fault_plan(bool destructive);

// The fault campaign's plans: every kind on in half of the runs (BUGGIFY, the first table's plan)
// or one kind aimed at one class of site (`crash@checkpoint=0.2`, `alloc@offload=0.5`), so that
// rare sites — a checkpoint write, an offload copy, a recompute gather — see faults in every
// campaign. Shrinks toward the BUGGIFY plan.
rc::Gen<std::string> gen_campaign_fault_plan();

// Cases for the properties (props/properties.h):
// SPMD: every rank runs the same modules — MoE only as a leaf, or on one rank; benign faults.
rc::Gen<FuzzCase> gen_spmd_case(const GenLimits& limits);
// Anything: raw handles to other layers' parameters (the broadcast trap), MoE with or without the
// leaf policy, destructive faults.
rc::Gen<FuzzCase> gen_any_case(const GenLimits& limits);
// Raw handles to other layers' parameters in otherwise plain SPMD models (no MoE, no leaf modules,
// no memory levers, no faults): whether a run fails silently depends on the placeholder policy alone.
rc::Gen<FuzzCase> gen_broadcast_trap_case(const GenLimits& limits);
// The fault campaign's cases (fault-tolerance): gen_spmd_case's models, levers and groups, a
// campaign fault plan, 2..4 steps, and half of them save a checkpoint series (save_every).
rc::Gen<FuzzCase> gen_fault_case(const GenLimits& limits);
// Rank-divergent: W >= 2, at least one MoE, no leaf modules.
rc::Gen<FuzzCase> gen_divergent_case(const GenLimits& limits);
// The cases the replay-memory property replays: gen_spmd_case's, group sizes included (the
// symmetric replay splits into blocks and across blocks, traces/replay/symmetric_communicator.h).
rc::Gen<FuzzCase> gen_replay_case(const GenLimits& limits);
// SPMD with a CheckpointPlan: 2..4 steps, a save step in between and a world size to resume on
// (the same one a third of the time); MoE layers are leaves whenever either world size is above 1.
// No HSDP (its checkpoints are refused); hpZ only where its block divides the resume world too.
rc::Gen<FuzzCase> gen_checkpoint_case(const GenLimits& limits);

// The divisors of `world` strictly between 1 and `world`, ascending: the block sizes of HSDP and
// hpZ that are neither flat sharding nor one rank per block (none at a prime world).
std::vector<int> divisors_inside(int world);

}  // namespace zero3
