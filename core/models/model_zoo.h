// Building models by built-in name or from a JSON model spec (see core/models/MODEL_SPEC.md), together
// with the synthetic data that fits them.
//
//   BuiltModel built = build_model("gpt-tiny", {.seed = 7});
//   built.model->initialize(7);
//   Batch batch = built.data->batch(/*step=*/0, /*micro=*/0, /*rank=*/0, /*world=*/1, /*batch_size=*/4);
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/models/data.h"
#include "core/nn/model.h"

namespace zero3 {

struct ModelOptions {
  uint64_t seed = 0;       // seeds the synthetic data (teacher, Markov chain)
  std::string data_file{};  // when set, a GPT trains on this file's bytes instead (vocab must be >= 256)
};

struct BuiltModel {
  std::unique_ptr<Model> model;
  std::unique_ptr<DataSource> data;
  nlohmann::json spec;  // the resolved spec, as written into reports and traces
};

std::vector<std::string> builtin_model_names();
// Throws InputError listing the built-in names when `name` is not one.
nlohmann::json builtin_model_spec(const std::string& name);
// `name_or_path`: a built-in name, or a path to a JSON spec file. Bad specs raise InputError naming
// the file, the JSON path (e.g. /layers/3/out) and what was expected.
BuiltModel build_model(const std::string& name_or_path, const ModelOptions& options);
// `source` names the spec in errors (a file path, or "builtin:NAME").
BuiltModel build_model_from_spec(const nlohmann::json& spec, const std::string& source, const ModelOptions& options);

}  // namespace zero3
