// RapidCheck generators for models, configs, faults and fuzz cases (see generators.h).
#include "props/generators.h"

#include <algorithm>

#include "sim/fault_plan.h"

namespace zero3 {

namespace {

constexpr int64_t kDefaultLimit = 1'000'000'000;  // the engine's defaults: effectively unbounded

// Kinds listed once per unit of weight; the first is what a kind shrinks to.
std::vector<LayerKind> layer_kinds(const RealizeOptions& options, int depth) {
  std::vector<LayerKind> kinds = {
      LayerKind::linear,     LayerKind::linear,  LayerKind::linear, LayerKind::linear,
      LayerKind::tied_linear, LayerKind::tied_linear, LayerKind::tied_linear, LayerKind::tied_linear,
      LayerKind::unused_linear,
      LayerKind::gelu,       LayerKind::gelu,    LayerKind::relu,   LayerKind::layer_norm,
      LayerKind::scale,      LayerKind::scale,   LayerKind::bias,   LayerKind::raw_scale, LayerKind::raw_scale,
  };
  if (depth < 2) {
    kinds.insert(kinds.end(), {LayerKind::residual, LayerKind::concat, LayerKind::sum_residual, LayerKind::repeat,
                               LayerKind::repeat});
  }
  if (options.moe) kinds.insert(kinds.end(), 3, LayerKind::moe);
  // LLaMA's layers come with attention: drawn only in the transformer space, so the draws of every
  // other space (and the seeds pinned on them) are what they were.
  if (options.transformer) {
    kinds.insert(kinds.end(), {LayerKind::causal_self_attention, LayerKind::causal_self_attention,
                               LayerKind::rms_norm, LayerKind::swiglu});
  }
  // The broadcast trap hides best inside a sum_residual body, whose width may collapse to 0: with
  // raw handles allowed, such bodies come up more often (and gen_layer_draw ends some with one).
  if (options.raw_foreign && depth < 2) kinds.insert(kinds.end(), 2, LayerKind::sum_residual);
  return kinds;
}

// Never drawn, but what a container shrinks to first: its body's layers in its place.
rc::Gen<bool> gen_splice() { return gen_weighted_element<bool>({{0, true}, {1, false}}); }
// Always drawn, but shrinks to left out.
rc::Gen<bool> gen_kept() { return gen_weighted_element<bool>({{0, false}, {1, true}}); }

// The broadcast trap's motif ends a sum_residual body with this raw read of an earlier parameter:
// a placeholder that collapses the width to 0 sums to 0 there instead of failing. Its even pick
// asks for a target that collapses (spec_realizer.cc raw_scale).
LayerDraw trap_read(int64_t choice) {
  return {.kind = LayerKind::raw_scale, .size = 1, .count = 1, .pick = 2 * choice, .flag = true};
}

rc::Gen<LayerDraw> gen_layer_draw(int world, const RealizeOptions& options, int depth) {
  return rc::gen::exec([=] {
    LayerDraw draw;
    draw.kind = *rc::gen::elementOf(layer_kinds(options, depth));
    draw.size = *gen_dimension(world);
    draw.count = *gen_uniform(1, 4);
    draw.pick = *gen_uniform(0, 12);
    draw.flag = *rc::gen::element(false, true);
    // Frozen layers, as a fine-tuned base's: shrinks to trained.
    draw.frozen = *gen_weighted_element<bool>({{3, false}, {1, true}});
    if (has_body(draw.kind)) {
      draw.body = *gen_layer_draws(world, options, depth + 1);
      draw.splice = *gen_splice();
    }
    if (draw.kind == LayerKind::sum_residual && options.raw_foreign &&
        *gen_weighted_element<bool>({{1, false}, {3, true}})) {
      draw.body.push_back(trap_read(*gen_uniform(0, 6)));
    }
    return draw;
  });
}

std::vector<int64_t> interesting_sizes(const ModelFacts& facts) {
  std::vector<int64_t> sizes = facts.param_numels;
  sizes.insert(sizes.end(), facts.module_numels.begin(), facts.module_numels.end());
  if (sizes.empty()) sizes.push_back(1);
  return sizes;
}

rc::Gen<std::vector<std::string>> gen_leaf_modules(const ModelFacts& facts, const ConfigOptions& options) {
  return rc::gen::exec([=] {
    std::vector<std::string> leaves;
    const bool moe_leaf = options.require_moe_leaf || (facts.has_moe && *rc::gen::element(false, true));
    if (moe_leaf) leaves.push_back("moe");
    if (!facts.leaf_candidates.empty() && *gen_weighted_element<bool>({{3, false}, {1, true}})) {
      const std::string extra = *rc::gen::elementOf(facts.leaf_candidates);
      if (std::find(leaves.begin(), leaves.end(), extra) == leaves.end()) leaves.push_back(extra);
    }
    return leaves;
  });
}

// Hierarchical sharding (ConfigOptions::world): HSDP over blocks of G ranks, any divisor of W (1
// replicates every parameter, W is flat ZeRO-3), or hpZ's secondary blocks, a divisor above 1 (W
// keeps none). A size shrinks toward W, the flat layout, and the scheme toward neither. Blocks
// strictly inside the world, where the HSDP and hpZ bugs live, count twice. hpZ is drawn only where
// such a block exists (W = 4, 6, 8, ...; at a prime W its only block is the flat one), and then
// twice as often as HSDP, as its bug also needs a second step and a parameter gathered again in
// backward. Every group draw is one fewer flat stage-3 case for the other levers' bugs: props/README.md's
// injection table (zero3 fuzz --injection-table) shows each still caught.
void draw_groups(int world, ZeroConfig& zero) {
  if (world < 2) return;
  const std::vector<int> inner = divisors_inside(world);
  enum class Scheme : uint8_t { none, hsdp, hpz };
  const Scheme scheme = inner.empty()
                            ? *gen_weighted_element<Scheme>({{4, Scheme::none}, {1, Scheme::hsdp}})
                            : *gen_weighted_element<Scheme>({{4, Scheme::none}, {1, Scheme::hsdp}, {2, Scheme::hpz}});
  if (scheme == Scheme::none) return;
  std::vector<int> sizes = {world};
  if (scheme == Scheme::hsdp) sizes.push_back(1);
  for (int size : inner) sizes.insert(sizes.end(), 2, size);
  const int size = *rc::gen::elementOf(sizes);
  if (scheme == Scheme::hsdp) zero.shard_group_size = size;
  else zero.hpz_group_size = size;
}

// The stage, offloads and checkpointed modules (ConfigOptions::levers), each drawn off most of the
// time and shrinking toward off, so that a counterexample keeps a lever only when it needs it.
void draw_levers(const ModelFacts& facts, int world, TrainConfig& config) {
  ZeroConfig& zero = config.zero;
  // Stage 3 first: the sharded path has the most to get wrong, and what a lever shrinks to.
  zero.stage = *gen_weighted_element<int>({{6, 3}, {1, 1}, {1, 2}});
  config.checkpoint_modules = *gen_checkpoint_modules(facts);
  zero.offload_optimizer = *gen_weighted_element<OffloadDevice>({{3, OffloadDevice::none}, {1, OffloadDevice::cpu}});
  // DeepSpeed (and check_lever_combinations) refuse parameter offload below stage 3: stages 1 and 2
  // keep every parameter whole on the device.
  if (zero.stage == 3) {
    zero.offload_param = *gen_weighted_element<OffloadDevice>({{3, OffloadDevice::none}, {1, OffloadDevice::cpu}});
    draw_groups(world, zero);  // check_group_sizes: stage 3 only
  }
}

rc::Gen<uint64_t> gen_seed() {
  return rc::gen::noShrink(
      rc::gen::map(gen_uniform(0, 1'000'000'000), [](int64_t seed) { return static_cast<uint64_t>(seed); }));
}

rc::Gen<int64_t> gen_steps() { return gen_weighted_element<int64_t>({{2, 1}, {3, 2}, {1, 3}}); }

}  // namespace

std::vector<int> divisors_inside(int world) {
  std::vector<int> inner;
  for (int size = 2; size < world; ++size) {
    if (world % size == 0) inner.push_back(size);
  }
  return inner;
}

rc::Gen<int64_t> gen_uniform(int64_t min, int64_t max) {
  return rc::gen::resize(rc::kNominalSize, rc::gen::inRange<int64_t>(min, max));
}

rc::Gen<int64_t> gen_dimension(int world) {
  const int64_t w = world;
  return rc::gen::weightedOneOf<int64_t>({
      {2, rc::gen::just<int64_t>(0)},
      {3, rc::gen::just<int64_t>(1)},
      {3, rc::gen::element<int64_t>(2, 3, 5, 7, 11, 13)},
      {3, rc::gen::elementOf(std::vector<int64_t>{std::max<int64_t>(w - 1, 0), w, w + 1})},
      {2, gen_uniform(0, 9)},
  });
}

rc::Gen<int> gen_world(int max_ranks) {
  return rc::gen::weightedOneOf<int>({
      {5, rc::gen::inRange(1, std::min(max_ranks, 4) + 1)},
      {2, rc::gen::inRange(1, max_ranks + 1)},
      {1, rc::gen::just(max_ranks)},
  });
}

rc::Gen<std::vector<LayerDraw>> gen_layer_draws(int world, const RealizeOptions& options, int depth) {
  // The top level grows with RapidCheck's size, up to 12 layers; a body holds up to 4 layers.
  const double scale = depth == 0 ? 0.12 : 0.04;
  const rc::Gen<LayerDraw> draw = rc::gen::resize(rc::kNominalSize, gen_layer_draw(world, options, depth));
  return rc::gen::scale(scale, rc::gen::container<std::vector<LayerDraw>>(draw));
}

namespace {

// A pre-norm transformer block as GPT's, made of spec layers: residual [layer_norm, attention] then
// residual [layer_norm, linear, gelu, linear] (the realizer projects the MLP back to the width).
// Every part shrinks away on its own, each residual into its body.
std::vector<LayerDraw> gen_transformer_block(int world) {
  LayerDraw attend{.kind = LayerKind::residual, .splice = *gen_splice()};
  if (*gen_kept()) attend.body.push_back({.kind = LayerKind::layer_norm});
  attend.body.push_back({.kind = LayerKind::causal_self_attention, .count = *gen_uniform(1, 4),
                         .pick = *gen_uniform(0, 1), .flag = *rc::gen::element(false, true),
                         .frozen = *gen_weighted_element<bool>({{4, false}, {1, true}})});
  LayerDraw mlp{.kind = LayerKind::residual, .splice = *gen_splice()};
  if (*gen_kept()) mlp.body.push_back({.kind = LayerKind::layer_norm});
  mlp.body.push_back({.kind = LayerKind::linear, .size = *gen_dimension(world), .flag = true});
  if (*gen_kept()) mlp.body.push_back({.kind = LayerKind::gelu});
  std::vector<LayerDraw> block = {attend};
  if (*gen_kept()) block.push_back(mlp);
  return block;
}

// Half the models read token ids (shrinking to feature vectors): a vocab from 1 (every target the
// same token) up, short contexts so that attention's T x T stays cheap, and 0-2 transformer blocks
// ahead of the drawn layers.
TokenDraw gen_token_draw(int world, std::vector<LayerDraw>& draws) {
  if (!*gen_weighted_element<bool>({{1, false}, {1, true}})) return {};
  TokenDraw tokens{.vocab = *rc::gen::weightedOneOf<int64_t>({{1, rc::gen::just<int64_t>(1)},
                                                               {4, gen_uniform(2, 16)}}),
                   .context = *gen_uniform(1, 4),
                   .tied_head = *gen_weighted_element<bool>({{1, false}, {2, true}}),
                   .frozen_embedding = *gen_weighted_element<bool>({{5, false}, {1, true}})};
  const int64_t blocks = *gen_weighted_element<int64_t>({{1, 0}, {2, 1}, {1, 2}});
  std::vector<LayerDraw> stacked;
  for (int64_t b = 0; b < blocks; ++b) {
    for (LayerDraw& draw : gen_transformer_block(world)) stacked.push_back(std::move(draw));
  }
  draws.insert(draws.begin(), stacked.begin(), stacked.end());
  return tokens;
}

}  // namespace

rc::Gen<nlohmann::json> gen_model_spec(int world, const RealizeOptions& options, bool trap_motif) {
  return rc::gen::exec([=] {
    const int64_t input_width = *gen_dimension(world);
    const bool cross_entropy = *rc::gen::element(false, true);
    std::vector<LayerDraw> draws = *gen_layer_draws(world, options, 0);
    if (trap_motif && options.raw_foreign && *gen_weighted_element<bool>({{1, false}, {1, true}})) {
      // The body opens with a column for the read to find ([n, 1], frozen half the time, as an
      // adapter's frozen base weight), then any layers. Each part shrinks away on its own, and
      // the container into its body.
      LayerDraw motif{.kind = LayerKind::sum_residual, .splice = *gen_splice()};
      const LayerDraw column{.kind = LayerKind::scale, .size = *gen_dimension(world), .pick = 1,
                             .frozen = *gen_weighted_element<bool>({{1, false}, {1, true}})};
      if (*gen_kept()) motif.body.push_back(column);
      for (LayerDraw& draw : *gen_layer_draws(world, options, 1)) motif.body.push_back(std::move(draw));
      const LayerDraw read = trap_read(*gen_uniform(0, 6));
      if (*gen_kept()) motif.body.push_back(read);
      // Anywhere; it shrinks toward the end, after every parameter it could read.
      const int64_t from_end = *gen_uniform(0, static_cast<int64_t>(draws.size()) + 1);
      draws.insert(draws.end() - from_end, std::move(motif));
    }
    const TokenDraw tokens = options.transformer ? gen_token_draw(world, draws) : TokenDraw{};
    return realize_model_spec(input_width, cross_entropy, draws, options, tokens);
  });
}

rc::Gen<int64_t> gen_element_limit(const ModelFacts& facts) {
  return rc::gen::weightedOneOf<int64_t>({
      {1, rc::gen::element<int64_t>(0, 1)},
      {4, rc::gen::elementOf(interesting_sizes(facts))},
      {1, rc::gen::elementOf(std::vector<int64_t>{facts.total_elements, facts.total_elements + 1})},
      {1, rc::gen::just(kDefaultLimit)},
  });
}

rc::Gen<TrainConfig> gen_train_config(const ModelFacts& facts, const ConfigOptions& options) {
  return rc::gen::exec([=] {
    TrainConfig config;
    config.micro_batch_size = *gen_weighted_element<int64_t>({{3, 1}, {3, 2}, {1, 3}});
    config.gradient_accumulation_steps = *gen_weighted_element<int64_t>({{4, 1}, {2, 2}, {1, 3}, {1, 4}});
    config.gradient_clipping = *gen_weighted_element<float>({{2, 0.0f}, {2, 1.0f}, {1, 0.01f}});
    config.bf16 = *gen_weighted_element<bool>({{3, false}, {1, true}});
    config.adamw.weight_decay = *rc::gen::element(0.0f, 0.1f);
    ZeroConfig& zero = config.zero;
    zero.prefetch_bucket_elements = *gen_element_limit(facts);
    zero.max_live_elements = *gen_element_limit(facts);
    zero.max_reuse_distance = *gen_element_limit(facts);
    // Mostly 0: a threshold above the parameter sizes makes everything persistent, never sharded.
    zero.persistence_threshold = *rc::gen::weightedOneOf<int64_t>({
        {4, rc::gen::just<int64_t>(0)},
        {2, rc::gen::elementOf(interesting_sizes(facts))},
        {1, rc::gen::just<int64_t>(100'000)},
    });
    zero.reduce_bucket_elements = std::max<int64_t>(1, *gen_element_limit(facts));
    zero.overlap_comm = *rc::gen::element(true, false);
    zero.leaf_modules = *gen_leaf_modules(facts, options);
    if (options.levers) draw_levers(facts, options.world, config);
    return config;
  });
}

rc::Gen<std::vector<std::string>> gen_checkpoint_modules(const ModelFacts& facts) {
  return rc::gen::exec([=] {
    std::vector<std::string> modules;
    if (facts.checkpoint_candidates.empty() || !*gen_weighted_element<bool>({{3, false}, {1, true}})) return modules;
    const int64_t count = *gen_weighted_element<int64_t>({{3, 1}, {1, 2}});
    for (int64_t i = 0; i < count; ++i) {
      // A container's recompute fires the forward hooks of the modules inside it, so ZeRO-3
      // gathers them again in backward; any other module's recompute only runs its own ops again.
      const bool container = !facts.leaf_candidates.empty() && *rc::gen::element(true, false);
      const std::string module =
          *rc::gen::elementOf(container ? facts.leaf_candidates : facts.checkpoint_candidates);
      if (std::find(modules.begin(), modules.end(), module) == modules.end()) modules.push_back(module);
    }
    return modules;
  });
}

rc::Gen<std::string> gen_fault_plan(bool destructive) {
  const auto plan = !destructive
                        ? gen_weighted_element<std::string>(
                              {{6, "none"}, {1, "late"}, {1, "reorder"}, {1, "late,reorder"}, {1, "stall"}})
                        : gen_weighted_element<std::string>({{8, "none"},
                                                                 {1, "late,reorder"},
                                                                 {1, "stall"},
                                                                 {1, "crash=0.05"},
                                                                 {1, "alloc=0.02"},
                                                                 {1, "crash?=0.1,late?"}});
  // The canonical text, as FaultPlan prints it and case files hold it.
  return rc::gen::map(plan, [](const std::string& text) { return FaultPlan::parse(text).to_string(); });
}

rc::Gen<std::string> gen_campaign_fault_plan() {
  // Prefixes of the site classes (FiredFault::site_class) a plan can aim at, the paths the levers
  // added first: a crash is rare per site (FaultPlan::fire_probability), so a site met a few times
  // a run would otherwise see one only in thousands of runs.
  static const std::vector<std::string> kSites = {
      "checkpoint",  "offload", "recompute gather", "secondary-shard gather", "block gather",
      "across-block", "block reduce-scatter", "gradient", "gather", "compute", "memory", "loss", "grad_norm"};
  const auto aimed = rc::gen::exec([] {
    const std::string kind = *rc::gen::element<std::string>("crash", "stall", "alloc", "late", "reorder");
    // alloc fires at allocations only: the offload host buffer or a device category.
    const std::string site = kind == "alloc" ? *rc::gen::element<std::string>("offload host buffer", "memory")
                                             : *rc::gen::elementOf(kSites);
    const std::string probability = *rc::gen::element<std::string>("0.05", "0.2", "0.5");
    return kind + "@" + site + "=" + probability;
  });
  const auto plan = rc::gen::weightedOneOf<std::string>({{1, rc::gen::just(std::string("all?"))}, {1, aimed}});
  return rc::gen::map(plan, [](const std::string& text) { return FaultPlan::parse(text).to_string(); });
}

namespace {

// The shape every case generator shares: a world, a model for it, a config fitted to the model,
// a seed, a step count and a fault plan. `require_leaf_for_moe` asks for the leaf policy on
// multi-rank MoE models (the SPMD cases); `destructive_faults` allows crashes and refused allocations.
rc::Gen<FuzzCase> gen_case(const GenLimits& limits, bool raw_foreign, bool require_leaf_for_moe,
                           bool destructive_faults) {
  return rc::gen::exec([=] {
    FuzzCase fuzz_case;
    fuzz_case.world = *gen_world(limits.max_ranks);
    fuzz_case.model_spec =
        *gen_model_spec(fuzz_case.world, {.moe = true, .raw_foreign = raw_foreign, .require_moe = false, .transformer = true});
    const ModelFacts facts = model_facts(fuzz_case.model_spec, {});
    fuzz_case.config = *gen_train_config(
        facts, {.require_moe_leaf = require_leaf_for_moe && facts.has_moe && fuzz_case.world > 1,
                .world = fuzz_case.world});
    fuzz_case.seed = *gen_seed();
    fuzz_case.steps = *gen_steps();
    fuzz_case.faults = *gen_fault_plan(destructive_faults);
    return fuzz_case;
  });
}

}  // namespace

rc::Gen<FuzzCase> gen_spmd_case(const GenLimits& limits) {
  return gen_case(limits, /*raw_foreign=*/false, /*require_leaf_for_moe=*/true, /*destructive_faults=*/false);
}

rc::Gen<FuzzCase> gen_any_case(const GenLimits& limits) {
  return gen_case(limits, /*raw_foreign=*/true, /*require_leaf_for_moe=*/false, /*destructive_faults=*/true);
}

rc::Gen<FuzzCase> gen_broadcast_trap_case(const GenLimits& limits) {
  return rc::gen::exec([=] {
    FuzzCase fuzz_case;
    fuzz_case.world = *gen_world(limits.max_ranks);
    fuzz_case.model_spec = *gen_model_spec(fuzz_case.world,
                                            {.moe = false, .raw_foreign = true, .require_moe = false, .transformer = true});
    const ModelFacts facts = model_facts(fuzz_case.model_spec, {});
    fuzz_case.config = *gen_train_config(facts, {.require_moe_leaf = false, .levers = false});
    fuzz_case.config.zero.leaf_modules.clear();
    fuzz_case.seed = *gen_seed();
    fuzz_case.steps = *gen_steps();
    return fuzz_case;
  });
}

rc::Gen<FuzzCase> gen_fault_case(const GenLimits& limits) {
  return rc::gen::exec([=] {
    FuzzCase fuzz_case = *gen_spmd_case(limits);
    fuzz_case.faults = *gen_campaign_fault_plan();
    fuzz_case.steps = *gen_uniform(2, 4);
    fuzz_case.save_every = *gen_weighted_element<int64_t>({{1, 0}, {1, 1}, {1, 2}});
    return fuzz_case;
  });
}

rc::Gen<FuzzCase> gen_divergent_case(const GenLimits& limits) {
  return rc::gen::exec([=] {
    FuzzCase fuzz_case;
    const int max_ranks = std::max(limits.max_ranks, 2);
    fuzz_case.world = *rc::gen::weightedOneOf<int>(
        {{4, rc::gen::inRange(2, std::min(max_ranks, 4) + 1)}, {1, rc::gen::inRange(2, max_ranks + 1)}});
    fuzz_case.model_spec = *gen_model_spec(fuzz_case.world,
                                            {.moe = true, .raw_foreign = false, .require_moe = true, .transformer = true});
    const ModelFacts facts = model_facts(fuzz_case.model_spec, {});
    fuzz_case.config = *gen_train_config(facts, {.require_moe_leaf = false, .world = fuzz_case.world});
    fuzz_case.config.zero.leaf_modules.clear();
    fuzz_case.seed = *gen_seed();
    fuzz_case.steps = *gen_steps();
    return fuzz_case;
  });
}

rc::Gen<FuzzCase> gen_replay_case(const GenLimits& limits) { return gen_spmd_case(limits); }

rc::Gen<FuzzCase> gen_checkpoint_case(const GenLimits& limits) {
  return rc::gen::exec([=] {
    FuzzCase fuzz_case = *gen_spmd_case(limits);
    // Resharding to another world size is the interesting case; the same world size comes up too.
    const int resume_world =
        *rc::gen::weightedOneOf<int>({{1, rc::gen::just(fuzz_case.world)}, {2, gen_world(limits.max_ranks)}});
    // MoE must be a leaf wherever more than one rank runs it, on either side of the checkpoint.
    std::vector<std::string>& leaves = fuzz_case.config.zero.leaf_modules;
    if (resume_world > 1 && model_facts(fuzz_case.model_spec, {}).has_moe &&
        std::find(leaves.begin(), leaves.end(), "moe") == leaves.end()) {
      leaves.push_back("moe");
    }
    // Checkpoints hold world shards under HSDP and hpZ alike (zero3_checkpoint.cc); the resumed run
    // keeps the config, so its block must divide the world it resumes on too (check_group_sizes).
    ZeroConfig& zero = fuzz_case.config.zero;
    if (zero.shard_group_size > 0 && resume_world % zero.shard_group_size != 0) zero.shard_group_size = 0;
    if (resume_world % zero.hpz_group_size != 0) zero.hpz_group_size = 1;
    fuzz_case.steps = *gen_uniform(2, 5);
    fuzz_case.checkpoint = {.save_at_step = *gen_uniform(1, fuzz_case.steps), .resume_world = resume_world};
    return fuzz_case;
  });
}

}  // namespace zero3
