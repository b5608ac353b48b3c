// What the harness needs to know about a model built from a spec: the parameter sizes that make
// interesting bucket limits, the modules that can be made leaves or checkpointed, and the most
// elements one module holds gathered while it runs (its fetch unit), which bounds the engine's
// live elements.
//
//   ModelFacts facts = model_facts(spec, config.zero.leaf_modules);
//   rc::Gen<int64_t> bucket = gen_bucket_elements(facts);   // props/generators.h
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/nn/module.h"

namespace zero3 {

struct ModelFacts {
  std::vector<int64_t> param_numels;   // by parameter id
  std::vector<int64_t> module_numels;  // own parameter elements of each module that owns any
  std::vector<int64_t> module_largest_param;  // the largest own parameter of each of those modules
  int64_t total_elements = 0;
  bool has_moe = false;
  // Module types and dotted names that have parameters below them: candidates for leaf_modules.
  std::vector<std::string> leaf_candidates;
  // Every module type and dotted name: candidates for checkpoint_modules (every built-in module's
  // forward returns one Var, which is what activation checkpointing keeps).
  std::vector<std::string> checkpoint_candidates;
  // The largest fetch unit over all modules, under the leaf_modules given to model_facts.
  int64_t fetch_unit_elements_max = 0;
};

ModelFacts model_facts(const nlohmann::json& spec, const std::vector<std::string>& leaf_modules);

// As the engine's config reads: a module is a leaf when its type or dotted name is listed.
bool is_leaf_module(const Module& module, const std::vector<std::string>& leaf_modules);
bool has_leaf_ancestor(const Module& module, const std::vector<std::string>& leaf_modules);
// Elements a module holds gathered while it runs: its own parameters and the weights it uses
// through a tied_linear; a leaf gathers its whole subtree (and the tied weights used inside it).
int64_t fetch_unit_elements(const Module& module, bool is_leaf);

}  // namespace zero3
