// Generators and the memory levers: what SPMD cases draw is a combination the engine accepts and
// names modules of the case's own model, every lever and group scheme comes up in a few hundred
// cases (so the injections that need one are reachable), and stage 3 without levers stays common.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include "core/models/model_zoo.h"
#include "core/nn/model.h"
#include "props/generators.h"

namespace zero3 {
namespace {

RC_GTEST_PROP(Generators, SpmdLeversAreCombinationsTheEngineAcceptsOnModulesOfTheModel, ()) {
  const FuzzCase fuzz_case = *gen_spmd_case({.max_ranks = 8});
  const TrainConfig& config = fuzz_case.config;
  RC_ASSERT(config.zero.stage >= 1 && config.zero.stage <= 3);
  // Refused combinations (offload_param below stage 3) are an InputError, which fails the property.
  check_lever_combinations(config, "generated case");
  const BuiltModel built = build_model_from_spec(fuzz_case.model_spec, "model_spec", {});
  // A name that matches no module of the model is an InputError too.
  const auto selected = select_modules(*built.model, config.checkpoint_modules, kCheckpointModulesKey);
  RC_ASSERT(selected.empty() == config.checkpoint_modules.empty());
  // Group sizes the world cannot hold, or both schemes at once, are an InputError as well.
  check_group_sizes(config, fuzz_case.world, "generated case");
}

// A checkpoint case resumes with its config, so its block divides the resume world as well.
RC_GTEST_PROP(Generators, CheckpointCasesDrawOnlyGroupsTheirResumedRunsCanHold, ()) {
  const FuzzCase checkpoint = *gen_checkpoint_case({.max_ranks = 8});
  check_group_sizes(checkpoint.config, checkpoint.world, "generated case");
  check_group_sizes(checkpoint.config, checkpoint.checkpoint.resume_world, "generated case, resumed");
}

// The broadcast-trap cases measure the placeholder policies alone: they draw no lever (target cases
// neither: props/target/target_case_test.cc).
RC_GTEST_PROP(Generators, BroadcastTrapCasesDrawNoLever, ()) {
  const TrainConfig config = (*gen_broadcast_trap_case({.max_ranks = 8})).config;
  RC_ASSERT(config.zero.stage == 3);
  RC_ASSERT(config.checkpoint_modules.empty());
  RC_ASSERT(config.zero.offload_optimizer == OffloadDevice::none);
  RC_ASSERT(config.zero.offload_param == OffloadDevice::none);
  RC_ASSERT(!config.zero.hierarchical());
}

struct LeverCounts {
  int64_t cases = 0;
  int64_t stage[4] = {0, 0, 0, 0};
  int64_t checkpointing = 0;
  int64_t checkpointing_a_container = 0;  // a module with parameters in modules below it
  int64_t offload_optimizer = 0;
  int64_t offload_param = 0;
  int64_t hsdp_inner = 0;  // HSDP blocks of 1 < G < W: where its injected bugs live
  int64_t hsdp_of_one = 0;
  int64_t hpz_inner = 0;   // hpZ blocks of 1 < G < W
  int64_t no_lever = 0;    // stage 3, nothing checkpointed or offloaded
  int64_t no_lever_flat = 0;  // and no group either
};

LeverCounts count_levers(uint64_t seed, int64_t cases) {
  LeverCounts counts;
  for (int64_t i = 0; i < cases; ++i) {
    // Case i from its own seed, as placeholder_rates.cc draws them.
    const rc::Random random(seed + static_cast<uint64_t>(i));
    const FuzzCase fuzz_case = gen_spmd_case({.max_ranks = 8})(random, static_cast<int>(i % 100)).value();
    const TrainConfig& config = fuzz_case.config;
    const ModelFacts facts = model_facts(fuzz_case.model_spec, {});
    counts.cases++;
    counts.stage[config.zero.stage]++;
    if (!config.checkpoint_modules.empty()) counts.checkpointing++;
    for (const std::string& name : config.checkpoint_modules) {
      if (std::find(facts.leaf_candidates.begin(), facts.leaf_candidates.end(), name) != facts.leaf_candidates.end()) {
        counts.checkpointing_a_container++;
        break;
      }
    }
    const bool offloads_optimizer = config.zero.offload_optimizer != OffloadDevice::none;
    const bool offloads_params = config.zero.offload_param != OffloadDevice::none;
    counts.offload_optimizer += offloads_optimizer ? 1 : 0;
    counts.offload_param += offloads_params ? 1 : 0;
    const int hsdp = config.zero.shard_group_size;
    const int hpz = config.zero.hpz_group_size;
    counts.hsdp_inner += hsdp > 1 && hsdp < fuzz_case.world ? 1 : 0;
    counts.hsdp_of_one += hsdp == 1 && fuzz_case.world > 1 ? 1 : 0;
    counts.hpz_inner += hpz > 1 && hpz < fuzz_case.world ? 1 : 0;
    if (config.zero.stage == 3 && config.checkpoint_modules.empty() && !offloads_optimizer && !offloads_params) {
      counts.no_lever++;
      counts.no_lever_flat += config.zero.hierarchical() ? 0 : 1;
    }
  }
  return counts;
}

TEST(Generators, EveryLeverComesUpInFiveHundredSpmdCasesAndStageThreeWithoutLeversStaysTheMostCommon) {
  constexpr uint64_t kSeed = 20240601;
  const LeverCounts counts = count_levers(kSeed, 500);
  std::printf("seed=%llu: of %lld SPMD cases, stage 1 %lld, stage 2 %lld, stage 3 %lld; checkpointing %lld (a "
              "container %lld); offload_optimizer %lld, offload_param %lld; HSDP 1 < G < W %lld, G = 1 %lld; "
              "hpZ 1 < G < W %lld; no lever %lld (and flat %lld)\n",
              static_cast<unsigned long long>(kSeed), static_cast<long long>(counts.cases),
              static_cast<long long>(counts.stage[1]), static_cast<long long>(counts.stage[2]),
              static_cast<long long>(counts.stage[3]), static_cast<long long>(counts.checkpointing),
              static_cast<long long>(counts.checkpointing_a_container), static_cast<long long>(counts.offload_optimizer),
              static_cast<long long>(counts.offload_param), static_cast<long long>(counts.hsdp_inner),
              static_cast<long long>(counts.hsdp_of_one), static_cast<long long>(counts.hpz_inner),
              static_cast<long long>(counts.no_lever), static_cast<long long>(counts.no_lever_flat));
  EXPECT_EQ(counts.stage[0], 0) << "stage 0 is the reference, never the case";
  EXPECT_GT(counts.stage[1], 0);
  EXPECT_GT(counts.stage[2], 0);
  EXPECT_GT(counts.stage[3], counts.cases / 2) << "stage 3 keeps most of the coverage it had";
  EXPECT_GT(counts.checkpointing_a_container, 0);
  EXPECT_GT(counts.checkpointing, counts.checkpointing_a_container) << "leaf layers are checkpointed too";
  EXPECT_GT(counts.offload_optimizer, 0);
  EXPECT_GT(counts.offload_param, 0);
  EXPECT_GT(counts.hsdp_inner, 0);
  EXPECT_GT(counts.hsdp_of_one, 0);
  EXPECT_GT(counts.hpz_inner, 0);
  EXPECT_GT(counts.no_lever, counts.cases / 4);
  // The groups take about one in five of those (generators.cc draw_groups).
  EXPECT_GT(counts.no_lever_flat, counts.cases / 5);
}

struct TransformerCounts {
  int64_t token_models = 0, with_attention = 0, tied_head = 0, frozen_embedding = 0, zero_dim = 0, vocab_one = 0;
  int64_t attention_layers = 0, zero_width_attention = 0, frozen_attention = 0, attention_without_qkv_bias = 0;
};

// Attention layers anywhere in a layer list, bodies included; `width` is not tracked, so a zero-width
// attention is one whose qkv the spec builds as [0, 0] (model_facts' parameter sizes say so).
void count_attention(const nlohmann::json& layers, TransformerCounts& counts, bool& found) {
  for (const nlohmann::json& layer : layers) {
    if (layer.contains("layers")) count_attention(layer.at("layers"), counts, found);
    if (layer.at("type") != "causal_self_attention") continue;
    found = true;
    counts.attention_layers++;
    counts.frozen_attention += layer.value("requires_grad", true) ? 0 : 1;
    counts.attention_without_qkv_bias += layer.at("bias").get<bool>() ? 0 : 1;
  }
}

TEST(Generators, TokenModelsAndAttentionComeUpAsOftenAsTheFeatureShapes) {
  constexpr uint64_t kSeed = 20261207;
  constexpr int64_t kCases = 500;
  TransformerCounts counts;
  for (int64_t i = 0; i < kCases; ++i) {
    const rc::Random random(kSeed + static_cast<uint64_t>(i));
    const FuzzCase fuzz_case = gen_spmd_case({.max_ranks = 8})(random, static_cast<int>(i % 100)).value();
    const nlohmann::json& spec = fuzz_case.model_spec;
    bool has_attention = false;
    count_attention(spec.at("layers"), counts, has_attention);
    counts.with_attention += has_attention ? 1 : 0;
    if (!spec.contains("vocab")) continue;
    counts.token_models++;
    const nlohmann::json& embedding = spec.at("layers").at(0);
    EXPECT_EQ(embedding.at("type"), "embedding");
    counts.frozen_embedding += embedding.value("requires_grad", true) ? 0 : 1;
    counts.zero_dim += embedding.at("dim") == 0 ? 1 : 0;
    counts.vocab_one += spec.at("vocab") == 1 ? 1 : 0;
    const nlohmann::json& head = spec.at("layers").back();
    counts.tied_head += head.at("type") == "tied_linear" && head.at("tie_to") == "layers.0" ? 1 : 0;
    const BuiltModel built = build_model_from_spec(spec, "generated", {});
    for (const Parameter* param : built.model->parameters()) {
      if (param->name().ends_with(".qkv.weight") && param->numel() == 0) counts.zero_width_attention++;
    }
  }
  std::printf("seed=%llu: of %lld SPMD cases, %lld token models (tied head %lld, frozen embedding %lld, dim 0 %lld, "
              "vocab 1 %lld), %lld with attention (%lld layers: zero width %lld, frozen %lld, no qkv bias %lld)\n",
              static_cast<unsigned long long>(kSeed), static_cast<long long>(kCases),
              static_cast<long long>(counts.token_models), static_cast<long long>(counts.tied_head),
              static_cast<long long>(counts.frozen_embedding), static_cast<long long>(counts.zero_dim),
              static_cast<long long>(counts.vocab_one), static_cast<long long>(counts.with_attention),
              static_cast<long long>(counts.attention_layers), static_cast<long long>(counts.zero_width_attention),
              static_cast<long long>(counts.frozen_attention), static_cast<long long>(counts.attention_without_qkv_bias));
  // "As often as today's shapes": token models about half, attention in about as many cases.
  EXPECT_GT(counts.token_models, kCases * 35 / 100);
  EXPECT_LT(counts.token_models, kCases * 65 / 100);
  EXPECT_GT(counts.with_attention, kCases * 35 / 100);
  // The edge cases stay drawn in the new layers: each comes up.
  EXPECT_GT(counts.tied_head, 0);
  EXPECT_GT(counts.frozen_embedding, 0);
  EXPECT_GT(counts.zero_dim, 0);
  EXPECT_GT(counts.vocab_one, 0);
  EXPECT_GT(counts.zero_width_attention, 0);
  EXPECT_GT(counts.frozen_attention, 0);
  EXPECT_GT(counts.attention_without_qkv_bias, 0);
  EXPECT_LT(counts.attention_without_qkv_bias, counts.attention_layers);
}

// LLaMA's layers anywhere in a layer list, bodies included.
void count_llama_layers(const nlohmann::json& layers, std::map<std::string, int64_t>& counts) {
  for (const nlohmann::json& layer : layers) {
    if (layer.contains("layers")) count_llama_layers(layer.at("layers"), counts);
    const std::string type = layer.at("type");
    if (type != "rms_norm" && type != "swiglu") continue;
    counts[type]++;
    if (!layer.value("requires_grad", true)) counts[type + " frozen"]++;
    if (type != "swiglu") continue;
    if (layer.at("hidden") == 0) counts["swiglu hidden 0"]++;
    if (layer.at("bias").get<bool>()) counts["swiglu with bias"]++;
  }
}

TEST(Generators, RmsNormAndSwiGluComeUpWithTheirEdgeCases) {
  constexpr uint64_t kSeed = 20261208;
  constexpr int64_t kCases = 300;
  std::map<std::string, int64_t> counts;
  for (int64_t i = 0; i < kCases; ++i) {
    const rc::Random random(kSeed + static_cast<uint64_t>(i));
    const FuzzCase fuzz_case = gen_spmd_case({.max_ranks = 8})(random, static_cast<int>(i % 100)).value();
    count_llama_layers(fuzz_case.model_spec.at("layers"), counts);
    build_model_from_spec(fuzz_case.model_spec, "generated", {});  // every one builds
  }
  for (const auto& [what, count] : counts) {
    std::printf("seed=%llu: %s %lld\n", static_cast<unsigned long long>(kSeed), what.c_str(), static_cast<long long>(count));
  }
  for (const char* what : {"rms_norm", "swiglu", "rms_norm frozen", "swiglu frozen", "swiglu hidden 0", "swiglu with bias"}) {
    EXPECT_GT(counts[what], 0) << what;
  }
  EXPECT_LT(counts["swiglu with bias"], counts["swiglu"]);
}

}  // namespace
}  // namespace zero3
