// Target cases go to runners whose case.json has no field for a lever: they draw none, and stay at
// stage 3 without groups, whatever the generator's other cases draw.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "props/target/target_case.h"

namespace zero3 {
namespace {

RC_GTEST_PROP(TargetCase, DrawsNoLeverTheRunnersCannotExpress, ()) {
  const TrainConfig config = (*gen_target_case({.max_ranks = 4})).run.config;
  RC_ASSERT(config.zero.stage == 3);
  RC_ASSERT(config.checkpoint_modules.empty());
  RC_ASSERT(config.zero.offload_optimizer == OffloadDevice::none);
  RC_ASSERT(config.zero.offload_param == OffloadDevice::none);
  RC_ASSERT(!config.zero.hierarchical());
}

}  // namespace
}  // namespace zero3
