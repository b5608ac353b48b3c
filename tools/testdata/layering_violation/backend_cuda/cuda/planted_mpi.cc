// A planted violation for tools/lint/check_layers_test.py: the CUDA backend including MPI's header.
#include "backend_cuda/launch/cuda_launch.h"
#include <mpi.h>
