// Hierarchical sharding (train_config.h): HSDP equals DDP reduced over its tree bit for bit, and flat
// DDP within f32 rounding; hpZ equals flat DDP bit for bit; G = W is flat ZeRO-3 exactly; each
// injected HSDP/hpZ bug makes the run differ from its oracle.
#include <gtest/gtest.h>

#include <string>

#include "core/base/errors.h"
#include "sim/distributed_training.h"

namespace zero3 {
namespace {

enum class Scheme { hsdp, hpz };

struct GroupCase {
  std::string model;
  int world;
  int group;
  Scheme scheme;
  bool bf16;
};

std::string case_name(const GroupCase& c) {
  std::string name = c.model + "_W" + std::to_string(c.world) + (c.scheme == Scheme::hsdp ? "_hsdp" : "_hpz") +
                     std::to_string(c.group) + (c.bf16 ? "_bf16" : "_f32");
  for (char& ch : name) ch = ch == '-' ? '_' : ch;
  return name;
}

void PrintTo(const GroupCase& c, std::ostream* out) { *out << case_name(c); }

DistributedRunOptions run_options(const GroupCase& c) {
  DistributedRunOptions options;
  options.model = c.model;
  options.seed = 7;
  options.world = c.world;
  options.steps = 3;
  options.config.micro_batch_size = 2;
  options.config.gradient_accumulation_steps = 2;
  options.config.bf16 = c.bf16;
  // Small buckets and no persistence: many collectives, every parameter gathered in backward again.
  options.config.zero.reduce_bucket_elements = 2000;
  options.config.zero.prefetch_bucket_elements = 1 << 20;
  options.config.zero.persistence_threshold = 0;
  options.config.zero.max_reuse_distance = 0;
  if (c.model == "moe-tiny") options.config.zero.leaf_modules = {"moe"};
  if (c.scheme == Scheme::hsdp) options.config.zero.shard_group_size = c.group;
  else options.config.zero.hpz_group_size = c.group;
  return options;
}

// The oracle: DDP over HSDP's tree (the shard group size stays), flat DDP for hpZ.
DistributedRunOptions oracle_options(const GroupCase& c) {
  DistributedRunOptions options = run_options(c);
  options.config.zero.stage = 0;
  options.config.zero.hpz_group_size = 1;
  return options;
}

DistributedRunResult run_ok(const DistributedRunOptions& options) {
  DistributedRunResult result = run_distributed(options);
  EXPECT_TRUE(result.sim.all_ok()) << result.sim.summary();
  return result;
}

class HierarchicalSharding : public testing::TestWithParam<GroupCase> {};

TEST_P(HierarchicalSharding, EqualsItsDdpOracleBitForBit) {
  const GroupCase& c = GetParam();
  const DistributedRunResult run = run_ok(run_options(c));
  const DistributedRunResult oracle = run_ok(oracle_options(c));
  ASSERT_EQ(run.steps.size(), 3u);
  const StateComparison comparison = compare_runs(run, oracle);
  EXPECT_TRUE(comparison.bitwise_equal) << "#wrong " << comparison.wrong << " max diff " << comparison.max_abs_diff
                                        << "\n" << comparison.first_differences;
  // Flat DDP: the same bits where the tree is flat (G = 1 sums every rank in order across blocks
  // of one, G = W inside one block; the norm's partials differ at G = 1, so within rounding only).
  DistributedRunOptions flat = oracle_options(c);
  flat.config.zero.shard_group_size = 0;
  const DistributedRunResult flat_run = run_ok(flat);
  const StateComparison to_flat = compare_runs(run, flat_run);
  EXPECT_LT(to_flat.max_abs_diff, c.bf16 ? 5e-2 : 1e-4) << to_flat.first_differences;
  if (c.scheme == Scheme::hpz || c.group == c.world) {
    EXPECT_TRUE(to_flat.bitwise_equal) << to_flat.first_differences;
  }
  // hpZ keeps a secondary copy for a block between 1 (DeepSpeed's "off") and the world; HSDP never does.
  for (const RankMemory& memory : run.memory) {
    const int64_t secondary = memory.peak_bytes[static_cast<size_t>(MemoryCategory::secondary_param_shard)];
    if (c.scheme == Scheme::hpz && c.group > 1 && c.group < c.world) EXPECT_GT(secondary, 0);
    else EXPECT_EQ(secondary, 0);
  }
  // Backward's gathers come from the secondary copy (those prefetched while forward still runs take
  // the world's, as ZeRO++'s do).
  if (c.scheme == Scheme::hpz && c.group > 1 && c.group < c.world) {
    EXPECT_GT(run.counters.secondary_gathers, 0) << run.counters.gathers;
  } else {
    EXPECT_EQ(run.counters.secondary_gathers, 0);
  }
}

std::vector<GroupCase> group_grid() {
  std::vector<GroupCase> cases;
  for (const char* model : {"gpt-tiny", "moe-tiny", "zero-sized"}) {
    for (int world : {4, 8}) {
      for (int group : {1, 2, world}) {
        for (Scheme scheme : {Scheme::hsdp, Scheme::hpz}) cases.push_back({model, world, group, scheme, world == 8});
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Grid, HierarchicalSharding, testing::ValuesIn(group_grid()),
                         [](const testing::TestParamInfo<GroupCase>& case_info) { return case_name(case_info.param); });

TEST(HierarchicalShardingMemory, HsdpShardsAreTheBlocksAndHpzAddsASecondaryCopy) {
  const GroupCase flat{"gpt-tiny", 4, 4, Scheme::hsdp, false};
  const GroupCase hsdp{"gpt-tiny", 4, 2, Scheme::hsdp, false};
  const GroupCase hpz{"gpt-tiny", 4, 2, Scheme::hpz, false};
  const auto shard_bytes = [](const DistributedRunResult& run) {
    return run.memory[0].peak_bytes[static_cast<size_t>(MemoryCategory::param_shard)];
  };
  const DistributedRunResult flat_run = run_ok(run_options(flat));
  const DistributedRunResult hsdp_run = run_ok(run_options(hsdp));
  const DistributedRunResult hpz_run = run_ok(run_options(hpz));
  // Blocks of 2 of 4 ranks: each shard about twice the flat one (padding aside).
  EXPECT_GT(shard_bytes(hsdp_run), shard_bytes(flat_run) * 3 / 2);
  EXPECT_EQ(shard_bytes(hpz_run), shard_bytes(flat_run));
  EXPECT_GT(hpz_run.memory[0].peak_bytes[static_cast<size_t>(MemoryCategory::secondary_param_shard)], 0);
}

struct InjectedCase {
  Bug bug;
  Scheme scheme;
};

class HierarchicalShardingInjection : public testing::TestWithParam<InjectedCase> {};

TEST_P(HierarchicalShardingInjection, MakesTheRunDifferFromItsOracle) {
  const GroupCase c{"gpt-tiny", 4, 2, GetParam().scheme, false};
  DistributedRunOptions injected = run_options(c);
  injected.bugs.set(GetParam().bug);
  const DistributedRunResult run = run_ok(injected);
  const DistributedRunResult oracle = run_ok(oracle_options(c));
  const StateComparison comparison = compare_runs(run, oracle);
  EXPECT_FALSE(comparison.bitwise_equal) << bug_name(GetParam().bug) << " went unnoticed";
}

INSTANTIATE_TEST_SUITE_P(Bugs, HierarchicalShardingInjection,
                         testing::Values(InjectedCase{Bug::hsdp_cross_block_skipped, Scheme::hsdp},
                                         InjectedCase{Bug::hsdp_average_over_block, Scheme::hsdp},
                                         InjectedCase{Bug::hpz_secondary_kept_after_step, Scheme::hpz}),
                         [](const testing::TestParamInfo<InjectedCase>& case_info) {
                           std::string name = bug_name(case_info.param.bug);
                           for (char& ch : name) ch = ch == '-' ? '_' : ch;
                           return name;
                         });

// Without the leaf policy each rank gathers only the experts it routes to. Under HSDP those gathers
// run inside a block, so the report must name the block and its world ranks, and no rank of the
// other block (which is no party to it): "in group 0 (ranks 0,1)" or "in group 1 (ranks 2,3)".
TEST(HierarchicalShardingDivergence, AnMoeRoutingDifferentlyInsideABlockIsReportedNamingTheBlock) {
  DistributedRunOptions options = run_options({"moe-tiny", 4, 2, Scheme::hsdp, false});
  options.config.zero.leaf_modules.clear();
  const DistributedRunResult run = run_distributed(options);
  ASSERT_FALSE(run.sim.all_ok()) << "the experts' routing agreed on every rank: no divergence to report";
  const RankOutcome& root = run.sim.ranks[static_cast<size_t>(run.sim.root_cause_rank)];
  const bool collective_report = [&] {
    try {
      std::rethrow_exception(root.exception);
    } catch (const CollectiveMismatchError&) {
      return true;
    } catch (const DeadlockError&) {
      return true;
    } catch (...) {
      return false;
    }
  }();
  EXPECT_TRUE(collective_report) << root.error;
  const std::string& report = root.error;
  const int block = run.sim.root_cause_rank / 2;
  const std::string members = block == 0 ? "0,1" : "2,3";
  const std::string others = block == 0 ? "2,3" : "0,1";
  EXPECT_NE(report.find("in group " + std::to_string(block) + " (ranks " + members + ")"), std::string::npos) << report;
  EXPECT_EQ(report.find("rank " + std::string(1, others[0])), std::string::npos) << report;
  EXPECT_EQ(report.find("rank " + std::string(1, others[2])), std::string::npos) << report;
}

TEST(HierarchicalShardingErrors, AGroupThatDoesNotDivideTheWorldIsRefusedNamingTheKey) {
  DistributedRunOptions options = run_options({"gpt-tiny", 4, 3, Scheme::hsdp, false});
  try {
    check_group_sizes(options.config, options.world, "ds.json");
    FAIL() << "a block of 3 in a world of 4 was accepted";
  } catch (const InputError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("/zero_optimization/mics_shard_size = 3 does not divide the world size 4"),
              std::string::npos) << message;
  }
}

}  // namespace
}  // namespace zero3
