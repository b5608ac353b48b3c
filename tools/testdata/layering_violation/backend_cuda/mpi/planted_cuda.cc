// A planted violation for tools/lint/check_layers_test.py: the MPI backend including the CUDA backend.
#include "backend_cuda/launch/launch_environment.h"
#include "backend_cuda/cuda/nccl_communicator.h"
