// A case for an outside framework (`zero3 fuzz --target NAME`): a generated model and config
// written as a case directory of the differential runner protocol
// (tools/zero3py/runners/PROTOCOL.md): case.json, init.safetensors and data.safetensors.
//
// The case's seed fixes the initial weights (zero3's seeded init) and the data (zero3's synthetic
// batches), so case.json alone is the whole case: `zero3 fuzz --target T --replay case.json`
// writes the same weights and data again.
//
//   TargetCase target_case = *gen_target_case({.max_ranks = 4});   // inside a property
//   write_target_case(target_case, "work/case-17");               // then a runner trains it
#pragma once
#include <string>

#include <nlohmann/json.hpp>
#include <rapidcheck.h>

#include "props/fuzz_case.h"
#include "props/generators.h"

namespace zero3 {

// How a raw_scale layer's torch code reaches the parameter it reads (PROTOCOL.md, `torch`).
inline const std::vector<std::string> kRawAccessWays = {"cached_reference", "own_forward", "parent_attribute",
                                                       "external_parameter"};

struct TargetCase {
  // Model spec, world, seed, steps and config (micro-batch, gas, clipping, AdamW, ZeRO sizes and
  // leaf modules). f32 only, no injections, no faults: the framework is what is under test.
  FuzzCase run;
  std::string raw_access = "cached_reference";
  bool raw_gradient = false;
  double timeout_s = 60.0;
};

// W in 1..max_ranks (2 most often), any generated layer (broadcast traps, frozen, tied, zero-sized,
// MoE as a leaf on W > 1), every way a trap reaches its parameter. With `shard_groups`, worlds that
// hold a block strictly inside them (4, 6, 8, ... up to max_ranks) and HSDP in 2 of 3 of those
// cases (zero.shard_group_size); without it the draws are exactly those of before, so earlier
// campaigns' seeds still give their cases. With `transformer`, the model space of zero3's own fuzz:
// half the models token models with transformer blocks, attention among the layers
// (generators.cc gen_model_spec); without it, again the draws of before.
rc::Gen<TargetCase> gen_target_case(const GenLimits& limits, bool shard_groups = false, bool transformer = false);

// case.json (PROTOCOL.md): every hyperparameter a framework has a default for is written out.
nlohmann::json target_case_json(const TargetCase& target_case);
// InputError naming `source`, the JSON path and what was expected.
TargetCase target_case_from_json(const nlohmann::json& json, const std::string& source);
// A case.json, or a saved finding ({"signature", "case": case.json, ...}, traces/findings/).
TargetCase read_target_case(const std::string& path);

// Writes case.json, init.safetensors and data.safetensors into `directory` (created).
void write_target_case(const TargetCase& target_case, const std::string& directory);

// "3 layers, 41 elements, W=2, 2 steps, gas 1, cached_reference"
std::string describe(const TargetCase& target_case);
void showValue(const TargetCase& target_case, std::ostream& os);

}  // namespace zero3
