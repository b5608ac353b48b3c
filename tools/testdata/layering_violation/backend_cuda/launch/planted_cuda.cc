// A planted violation for tools/lint/check_layers_test.py: launch/ reaching into the CUDA backend.
#include "backend_cuda/launch/launch_environment.h"
#include "backend_cuda/cuda/cuda_world.h"
