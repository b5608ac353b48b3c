// Facts about a model for generators and invariant checks (see model_facts.h).
#include "props/model_facts.h"

#include <algorithm>
#include <set>

#include "core/models/model_zoo.h"
#include "core/nn/tied_linear.h"

namespace zero3 {

namespace {

void external_and_own(const Module& module, bool subtree, std::set<const Parameter*>& params) {
  for (const auto& param : module.parameters()) params.insert(param.get());
  if (const auto* tied = dynamic_cast<const TiedLinear*>(&module)) params.insert(&tied->tied_weight());
  if (!subtree) return;
  for (const auto& child : module.children()) external_and_own(*child, true, params);
}

// The sets of leaf and checkpoint candidates, sorted and without repeats.
struct Candidates {
  std::set<std::string> leaf;
  std::set<std::string> checkpoint;
};

void visit(const Module& module, const std::vector<std::string>& leaf_modules, ModelFacts& facts,
           Candidates& candidates) {
  int64_t own = 0;
  int64_t largest = 0;
  for (const auto& param : module.parameters()) {
    own += param->numel();
    largest = std::max(largest, param->numel());
  }
  if (!module.parameters().empty()) {
    facts.module_numels.push_back(own);
    facts.module_largest_param.push_back(largest);
  }
  if (module.type() == "moe") facts.has_moe = true;
  if (!module.children().empty() && !module.all_parameters().empty()) {
    candidates.leaf.insert(module.type());
    if (!module.name().empty()) candidates.leaf.insert(module.name());
  }
  candidates.checkpoint.insert(module.type());
  if (!module.name().empty()) candidates.checkpoint.insert(module.name());
  const bool leaf = is_leaf_module(module, leaf_modules);
  facts.fetch_unit_elements_max = std::max(facts.fetch_unit_elements_max, fetch_unit_elements(module, leaf));
  for (const auto& child : module.children()) visit(*child, leaf_modules, facts, candidates);
}

}  // namespace

ModelFacts model_facts(const nlohmann::json& spec, const std::vector<std::string>& leaf_modules) {
  const BuiltModel built = build_model_from_spec(spec, "model_spec", {});
  ModelFacts facts;
  for (const Parameter* param : built.model->parameters()) {
    facts.param_numels.push_back(param->numel());
    facts.total_elements += param->numel();
  }
  Candidates candidates;
  visit(built.model->root(), leaf_modules, facts, candidates);
  facts.leaf_candidates.assign(candidates.leaf.begin(), candidates.leaf.end());
  facts.checkpoint_candidates.assign(candidates.checkpoint.begin(), candidates.checkpoint.end());
  return facts;
}

bool is_leaf_module(const Module& module, const std::vector<std::string>& leaf_modules) {
  return std::any_of(leaf_modules.begin(), leaf_modules.end(),
                     [&](const std::string& leaf) { return leaf == module.type() || leaf == module.name(); });
}

bool has_leaf_ancestor(const Module& module, const std::vector<std::string>& leaf_modules) {
  for (const Module* up = module.parent(); up != nullptr; up = up->parent()) {
    if (is_leaf_module(*up, leaf_modules)) return true;
  }
  return false;
}

int64_t fetch_unit_elements(const Module& module, bool is_leaf) {
  std::set<const Parameter*> params;
  external_and_own(module, is_leaf, params);
  int64_t elements = 0;
  for (const Parameter* param : params) elements += param->numel();
  return elements;
}

}  // namespace zero3
