// Building a SequentialModel from a model spec of kind "sequential" (core/models/MODEL_SPEC.md): layers
// in order, each layer's input width the previous layer's output width, every error naming the
// source, the JSON path and what was expected.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/models/model_spec.h"
#include "core/models/sequential_model.h"

namespace zero3 {

// The layer "type" values a sequential spec accepts.
const std::vector<std::string>& sequential_layer_types();
// `spec` is the whole document (its version already checked).
std::unique_ptr<SequentialModel> build_sequential_model(const SpecNode& spec);

}  // namespace zero3
