// Planted: the format never builds on replay.
#include "traces/format/trace.h"
#include "traces/replay/replay.h"
