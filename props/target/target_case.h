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
  // leaf modules, the levers, f32 or bf16). No injections, no faults: the framework is under test.
  FuzzCase run;
  std::string raw_access = "cached_reference";
  bool raw_gradient = false;
  double timeout_s = 60.0;
  // case.json `measure_memory`: every rank reports its tensor bytes per step, judged by
  // memory_verdict.h; such a case trains at least kMemoryStepsMin steps.
  bool measure_memory = false;
};

// The zero3 layer types a runner can checkpoint (PROTOCOL.md, `activation_checkpointing`): the ones
// its torch twin has a module class of its own for.
inline const std::vector<std::string> kCheckpointableTypes = {"linear", "layer_norm", "causal_self_attention",
                                                              "embedding", "moe", "mlp", "rms_norm", "swiglu"};

// What a campaign draws beyond the first space (flat ZeRO-3, f32, small feature models). Each part
// is off by default, and with every part off the draws are exactly those of before, so earlier
// campaigns' seeds still give their cases.
struct TargetSpace {
  // Worlds that hold a block strictly inside them (4, 6, 8, ... up to max_ranks) and HSDP in 2 of 3
  // of those cases (zero.shard_group_size).
  bool shard_groups = false;
  // The model space of zero3's own fuzz: half the models token models with transformer blocks,
  // attention among the layers (generators.cc gen_model_spec).
  bool transformer = false;
  // The levers, each off in most cases and shrinking toward off: ZeRO stages 1 and 2, optimizer and
  // parameter offload to the CPU, hpZ blocks, activation checkpointing of layer types.
  bool levers = false;
  // bf16 compute with f32 master weights in 1 of 3 cases (zero3's bf16.enabled, DeepSpeed's bf16
  // mode, FSDP2's MixedPrecisionPolicy), judged at bf16's tolerances (target_verdict.h).
  bool bf16 = false;
  // Tensor memory measured per rank and step in 1 of 4 cases, each of those training 4 steps
  // (memory_verdict.h: memory_growth); shrinks toward unmeasured.
  bool memory = false;
};

// W in 1..max_ranks (2 most often), any generated layer (broadcast traps, frozen, tied, zero-sized,
// MoE as a leaf on W > 1), every way a trap reaches its parameter, and what `space` adds.
rc::Gen<TargetCase> gen_target_case(const GenLimits& limits, const TargetSpace& space = {});

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
