// Planted: runs/ builds on nothing of the tools; the command line builds on it.
#include "tools/runs/progress.h"
#include "tools/cli/fuzz_target_command.h"
