// The DDP reference with PyTorch-style bucketed all-reduce equals its one-all-reduce-per-parameter
// form bit for bit (the simulator sums every element in rank order wherever it sits in a buffer),
// on the host-readable cpu device and on the opaque one, and issues one all-reduce per bucket.
#include <gtest/gtest.h>

#include <cctype>
#include <string>

#include "sim/distributed_training.h"

namespace zero3 {
namespace {

struct BucketingCase {
  std::string model;
  int world;
  bool bf16;
  int64_t gas;
  Device device;
};

std::string case_name(const BucketingCase& c) {
  std::string name = c.model + "_W" + std::to_string(c.world) + (c.bf16 ? "_bf16" : "_f32") + "_gas" +
                     std::to_string(c.gas) + "_" + device_name(c.device);
  for (char& ch : name) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';  // gpt-tiny, opaque:0
  return name;
}

void PrintTo(const BucketingCase& c, std::ostream* out) { *out << case_name(c); }

constexpr int64_t kSteps = 2;

DistributedRunOptions ddp_options(const BucketingCase& c, int64_t bucket_bytes) {
  DistributedRunOptions options;
  options.model = c.model;
  options.seed = 13;
  options.world = c.world;
  options.steps = kSteps;
  options.device = c.device;
  options.config.micro_batch_size = 2;
  options.config.bf16 = c.bf16;
  options.config.gradient_accumulation_steps = c.gas;
  options.config.zero.stage = 0;
  options.ddp_allreduce_bucket_bytes = bucket_bytes;
  return options;
}

// The test's own statement of the rule (PyTorch DDP's): parameters in id order, a bucket closes
// once its f32 gradients reach the cap.
int64_t expected_buckets(const DistributedRunResult& run, int64_t bucket_bytes) {
  int64_t buckets = 0;
  int64_t open_bytes = 0;
  bool open = false;
  for (const OptimizerSlot& slot : run.final_state) {
    open = true;
    open_bytes += 4 * slot.master.numel();
    if (open_bytes >= bucket_bytes) {
      ++buckets;
      open = false;
      open_bytes = 0;
    }
  }
  return buckets + (open ? 1 : 0);
}

int64_t model_f32_bytes(const DistributedRunResult& run) {
  int64_t bytes = 0;
  for (const OptimizerSlot& slot : run.final_state) bytes += 4 * slot.master.numel();
  return bytes;
}

class DdpBucketing : public testing::TestWithParam<BucketingCase> {};

TEST_P(DdpBucketing, EqualsOneAllReducePerParameterBitForBitWithOneAllReducePerBucket) {
  const BucketingCase& c = GetParam();
  const DistributedRunResult plain = run_distributed(ddp_options(c, 0));
  ASSERT_TRUE(plain.sim.all_ok()) << plain.sim.summary();
  const int64_t params = static_cast<int64_t>(plain.final_state.size());
  const int64_t total_bytes = model_f32_bytes(plain);
  // The whole model in one bucket (PyTorch's 25 MiB default is far above these models), then a
  // quarter of the model per bucket: several buckets, some of one parameter, some of several.
  for (const int64_t bucket_bytes : {int64_t{25} << 20, total_bytes / 4}) {
    SCOPED_TRACE("bucket_bytes " + std::to_string(bucket_bytes));
    const int64_t buckets = expected_buckets(plain, bucket_bytes);
    ASSERT_LT(buckets, params) << "the cap must put several parameters in one bucket";
    if (bucket_bytes < total_bytes) {
      ASSERT_GT(buckets, 1) << "the cap must split the model";
    }

    const DistributedRunResult bucketed = run_distributed(ddp_options(c, bucket_bytes));
    ASSERT_TRUE(bucketed.sim.all_ok()) << bucketed.sim.summary();
    const StateComparison comparison = compare_runs(bucketed, plain);
    EXPECT_TRUE(comparison.bitwise_equal) << "#wrong " << comparison.wrong << " max diff "
                                          << comparison.max_abs_diff << "\n" << comparison.first_differences;
    // Per micro-step the parameters' all-reduces become the buckets'; the same bytes move.
    const CollectiveTotals& plain_reduces = plain.collectives.at("all_reduce");
    const CollectiveTotals& bucketed_reduces = bucketed.collectives.at("all_reduce");
    EXPECT_EQ(plain_reduces.count - bucketed_reduces.count, kSteps * c.gas * (params - buckets));
    EXPECT_EQ(bucketed_reduces.bytes, plain_reduces.bytes);
    for (size_t step = 0; step < bucketed.steps.size(); ++step) {
      EXPECT_EQ(bucketed.steps[step].host_syncs, plain.steps[step].host_syncs) << "packing never reads the host";
    }
  }
}

std::vector<BucketingCase> bucketing_grid() {
  std::vector<BucketingCase> cases;
  for (const char* model : {"gpt-tiny", "moe-tiny"}) {
    for (int world : {1, 3, 4}) {
      for (bool bf16 : {false, true}) {
        for (int64_t gas : {1, 3}) {
          for (Device device : {Device::cpu, Device::opaque}) cases.push_back({model, world, bf16, gas, device});
        }
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Grid, DdpBucketing, testing::ValuesIn(bucketing_grid()),
                         [](const testing::TestParamInfo<BucketingCase>& case_info) { return case_name(case_info.param); });

}  // namespace
}  // namespace zero3
