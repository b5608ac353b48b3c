// Allowed includes for tools/lint/check_layers_test.py: its own layer, earlier layers, libraries.
#include "core/nn/module.h"
#include "core/tensor/tensor.h"
#include <nlohmann/json.hpp>
