// A planted violation for tools/lint/check_layers_test.py: tensor/ reaching up into the engine.
#pragma once
#include "core/base/errors.h"
#include "core/zero3/zero3_engine.h"
