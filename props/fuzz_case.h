// One fuzz case: everything a simulated ZeRO-3 run needs — a model spec, a world size, a seed, a
// training config, the bugs injected into the engine and a fault plan — and its JSON case file,
// the form in which every counterexample is saved and replayed (`zero3 fuzz --replay FILE`).
//
//   FuzzCase fuzz_case = *gen_spmd_case({.max_ranks = 8});       // props/generators.h
//   DistributedRunResult zero3 = run_distributed(run_options(fuzz_case));
//   write_file_atomically("case.json", case_file_json(fuzz_case, "equivalence", message).dump(2));
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/training/train_config.h"
#include "sim/distributed_training.h"

namespace zero3 {

// For the checkpoint round trip: save after `save_at_step` steps, then resume on `resume_world`
// ranks and train to the case's last step. save_at_step 0: no checkpoint in this case.
struct CheckpointPlan {
  int64_t save_at_step = 0;
  int resume_world = 1;
  bool operator==(const CheckpointPlan&) const = default;
};

struct FuzzCase {
  nlohmann::json model_spec = nullptr;
  int world = 1;
  uint64_t seed = 0;  // the simulator's and the data's seed
  int64_t steps = 1;
  TrainConfig config{};
  std::vector<std::string> inject{};  // Bug names (core/zero3/bug_injection.h) switched on in the engine
  std::string faults = "none";        // FaultPlan::to_string()
  CheckpointPlan checkpoint{};
  // > 0: the fault-tolerance property saves a checkpoint series every this many steps, so that
  // faults reach checkpoint writes (a crash mid-save must leave the last complete one as it was).
  int64_t save_every = 0;
  // Where every rank's tensors live: cpu, or opaque (sim/opaque_device.h), whose runs equal cpu's
  // bit for bit. `zero3 fuzz --device` sets it on every generated case.
  Device device = Device::cpu;
};

// The ZeRO-3 run of the case: its config, bugs and faults as given (no checkpoint: the checkpoint
// property sets the save and load fields itself).
DistributedRunOptions run_options(const FuzzCase& fuzz_case);
// The DDP reference for the case: the same model, seed, world and data, stage 0, nothing
// checkpointed or offloaded, no bugs, no faults.
DistributedRunOptions reference_options(const FuzzCase& fuzz_case);

// {"zero3_trace": 1, "source": "fuzz", "model_spec": ..., "run": {...}, "expected": {...}};
// run.checkpoint {"save_at_step", "resume_world"} only when the case has one; run.device only when
// it is not cpu (so case files from before the field still read).
nlohmann::json case_file_json(const FuzzCase& fuzz_case, const std::string& property, const std::string& message);
// Reads a case file back; InputError naming `source`, the JSON path and what was expected.
FuzzCase case_from_file_json(const nlohmann::json& json, const std::string& source);

// How big a case is, for reports of shrunk counterexamples.
struct CaseSize {
  int64_t layers = 0;    // layers in the spec, bodies of containers included
  int64_t elements = 0;  // parameter elements of the model
};
CaseSize case_size(const FuzzCase& fuzz_case);
// "4 layers, 37 elements, W=3, 2 steps, gas 1", then the levers and faults that are on ("stage 2,
// checkpointing [residual], optimizer offloaded, faults late")
std::string describe(const FuzzCase& fuzz_case);

// RapidCheck prints counterexamples with showValue: the case as one line of JSON.
void showValue(const FuzzCase& fuzz_case, std::ostream& os);

}  // namespace zero3
