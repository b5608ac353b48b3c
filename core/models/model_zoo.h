// Building models by built-in name or from a JSON model spec (see core/models/MODEL_SPEC.md), together
// with the synthetic data that fits them.
//
//   BuiltModel built = build_model("gpt-tiny", {.seed = 7});
//   initialize_model(built, 7);
//   Batch batch = built.data->batch(/*step=*/0, /*micro=*/0, /*rank=*/0, /*world=*/1, /*batch_size=*/4);
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/models/data.h"
#include "core/nn/model.h"
#include "core/tensor/safetensors.h"

namespace zero3 {

struct ModelOptions {
  uint64_t seed = 0;       // seeds the synthetic data (teacher, Markov chain)
  // When set, a GPT trains on this file instead: an llm.c token file (token_file_data.h) when it
  // starts with llm.c's magic, else the file's bytes (vocab must be >= 256).
  std::string data_file{};
  // Token files only: micro-steps per optimizer step (GAS), so that windows follow one another.
  int64_t micro_steps_per_step = 1;
  // When set, initialize_model() overwrites the seeded values with this safetensors file's
  // (core/models/weight_names.h), under these names ("zero3" or "hf-gpt2").
  std::string init_from{};
  std::string init_names = "zero3";
};

struct BuiltModel {
  std::unique_ptr<Model> model;
  std::unique_ptr<DataSource> data;
  nlohmann::json spec;  // the resolved spec, as written into reports and traces
  // The spec's checkpoint_activations: modules checkpointed in every run of this model, besides the
  // config's activation_checkpointing.zero3_modules.
  std::vector<std::string> checkpoint_modules{};
  std::string init_from{};  // ModelOptions::init_from and init_names, for initialize_model()
  std::string init_names = "zero3";
};

// The modules checkpointed in a run: the model spec's and the config's.
std::vector<std::string> checkpointed_names(const BuiltModel& built, const std::vector<std::string>& from_config);

// The seeded initialisation (Model::initialize), then the --init-from weights when there are any:
// how every trainer, reference and rank starts, so that they all start from the same values.
void initialize_model(BuiltModel& built, uint64_t seed);

// The global batch of every micro-step (all ranks' `rows` examples in rank order, as the
// single-process reference sees them) as "step{s}.micro{m}.inputs" and ".targets": what an outside
// framework trains on (`zero3 inspect --dump-data`, `zero3 fuzz --target`).
std::vector<NamedTensor> global_batch_tensors(const BuiltModel& built, int64_t steps, int64_t gas, int64_t rows);

std::vector<std::string> builtin_model_names();
// Throws InputError listing the built-in names when `name` is not one.
nlohmann::json builtin_model_spec(const std::string& name);
// `name_or_path`: a built-in name, or a path to a JSON spec file. Bad specs raise InputError naming
// the file, the JSON path (e.g. /layers/3/out) and what was expected.
BuiltModel build_model(const std::string& name_or_path, const ModelOptions& options);
// `source` names the spec in errors (a file path, or "builtin:NAME").
BuiltModel build_model_from_spec(const nlohmann::json& spec, const std::string& source, const ModelOptions& options);

}  // namespace zero3
