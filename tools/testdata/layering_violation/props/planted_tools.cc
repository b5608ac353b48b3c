// Planted: props/ is below the tools.
#include "props/generators.h"
#include "tools/runs/training_run.h"
