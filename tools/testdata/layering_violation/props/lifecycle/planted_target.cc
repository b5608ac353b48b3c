// Planted: the lifecycle checkers are zero3's; only props/target/ uses the differential harness.
#include "props/lifecycle/lifecycle_model.h"
#include "props/target/target_case.h"
