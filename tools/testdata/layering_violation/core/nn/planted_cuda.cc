// A planted violation for tools/lint/check_layers_test.py: the core including a CUDA header.
#include <vector>
#include <cuda_runtime.h>
