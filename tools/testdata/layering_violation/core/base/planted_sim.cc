// A planted violation for tools/lint/check_layers_test.py: the core including the simulator.
#include "sim/sim_world.h"
