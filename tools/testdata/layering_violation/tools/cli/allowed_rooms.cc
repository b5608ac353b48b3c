// Allowed: the command line builds on runs/ and bench/.
#include "tools/runs/progress.h"
#include "tools/bench/comm_bench.h"
