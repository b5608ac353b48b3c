// Names and descriptions of the injectable bugs.
#include "core/zero3/bug_injection.h"

#include "core/base/errors.h"
#include "core/base/text.h"

namespace zero3 {

namespace {
struct BugInfo {
  const char* name;
  const char* description;
};
constexpr BugInfo kBugs[] = {
    {"gather-gated-on-numel", "fetch skipped when the parameters to fetch have 0 elements (DeepSpeed zero-sized bug)"},
    {"external-not-registered", "parameters used by a non-owner module are not registered and gathered"},
    {"bucket-order-by-arrival", "gradient buckets laid out in hook-arrival order, not by parameter id"},
    {"padding-uninitialized", "parameter shard padding left uninitialised (make_shard's padding not zeroed)"},
    {"grad-padding-uninitialized", "gradient bucket padding left uninitialised instead of zero-filled"},
    {"bucket-exact-size-skipped", "a gradient bucket exactly reduce_bucket_size large is not reduced"},
    {"invalidate-without-wait", "trace invalidation releases in-flight gathers without waiting"},
    {"release-while-in-use", "post-forward releases parameters an enclosing module still uses"},
    {"gas-scale-twice", "1/gradient_accumulation_steps applied per micro-step and again at the end"},
    {"unused-params-skipped", "parameters without a gradient on this rank (unrouted experts) skip reduce-scatter"},
    {"missing-gather-wait", "a gathered parameter is used without waiting for its all-gather"},
    {"resume-without-optimizer-state", "a resumed run restores master weights but zeroes the AdamW moments"},
    {"prefetch-silently-off", "no gather is issued ahead of its module although overlap_comm and the budgets allow"},
    {"never-release", "gathered parameters are not released after their module's post-forward/post-backward"},
    {"gather-order-by-arrival", "gather buckets laid out in the order a module lists its parameters, not by id"},
    {"recompute-without-gather", "a checkpointed module's recompute in backward skips the gathers of the modules inside it"},
    {"offload-update-not-copied-up", "under offload_optimizer the host master is updated but the shard ranks gather from is not"},
    {"stale-replica-after-step", "the all-gather that refreshes persistent (stage 1/2: all) parameters after the step is skipped"},
    {"hsdp-cross-block-skipped", "HSDP reduces gradients inside each block of mics_shard_size ranks but not across blocks"},
    {"hsdp-average-over-block", "HSDP averages reduced gradients over the block's ranks instead of the world's"},
    {"hpz-secondary-kept-after-step", "hpZ's secondary shards survive the optimizer step: backward gathers pre-step weights"},
    {"latest-recorded-before-save", "a checkpoint series' latest names the new save before it is complete"},
};
static_assert(std::size(kBugs) == static_cast<size_t>(Bug::count_));
}  // namespace

const char* bug_name(Bug bug) { return kBugs[static_cast<size_t>(bug)].name; }
const char* bug_description(Bug bug) { return kBugs[static_cast<size_t>(bug)].description; }

std::vector<Bug> all_bugs() {
  std::vector<Bug> bugs;
  for (size_t i = 0; i < static_cast<size_t>(Bug::count_); ++i) bugs.push_back(static_cast<Bug>(i));
  return bugs;
}

Bug parse_bug(const std::string& name) {
  std::vector<std::string> known;
  for (Bug bug : all_bugs()) {
    if (name == bug_name(bug)) return bug;
    known.push_back(bug_name(bug));
  }
  throw InputError("unknown bug injection '" + name + "' (known: " + join_words(known) + ")");
}

}  // namespace zero3
