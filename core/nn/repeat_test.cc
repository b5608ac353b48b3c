// Repeat: one body called several times per forward, with one set of shared parameters.
#include "core/nn/repeat.h"

#include <map>

#include <gtest/gtest.h>

#include "core/tensor/kernels.h"
#include "core/nn/linear.h"
#include "core/nn/module_gradcheck.h"

namespace zero3 {
namespace {

std::unique_ptr<ModuleHarness> repeated_linear(int64_t times, bool has_bias) {
  auto body = std::make_unique<Sequential>();
  body->append(std::make_unique<Linear>(2, 2, has_bias, 0.5f));
  return std::make_unique<ModuleHarness>(std::make_unique<Repeat>(std::move(body), times));
}

// Counts module backward hooks, to check they fire once per invocation.
class BackwardCounter : public ModuleHooks {
 public:
  void pre_backward(Context&, Module& module) override { ++pre[&module]; }
  void post_backward(Context&, Module& module) override { ++post[&module]; }
  std::map<const Module*, int> pre;
  std::map<const Module*, int> post;
};

TEST(Repeat, ThreeCallsLeaveThreeEnterMarkersWithInvocationsZeroOneTwo) {
  auto harness = repeated_linear(3, true);
  auto& repeat = harness->root_as<Repeat>();
  Context ctx(cpu_kernels());
  repeat.forward(ctx, constant(seeded_normal({2, 2}, 1)));
  const Module* linear = &repeat.body().at(0);
  std::vector<int64_t> body_calls;
  std::vector<int64_t> linear_calls;
  for (const TapeEntry& entry : ctx.tape().entries()) {
    if (!entry.is_marker || entry.marker.kind != MarkerKind::module_enter) continue;
    if (entry.marker.module == &repeat.body()) body_calls.push_back(entry.marker.invocation);
    if (entry.marker.module == linear) linear_calls.push_back(entry.marker.invocation);
  }
  EXPECT_EQ(body_calls, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(linear_calls, (std::vector<int64_t>{0, 1, 2}));
}

TEST(Repeat, AppliesTheSharedBodyTimesOver) {
  auto harness = repeated_linear(3, false);
  auto& repeat = harness->root_as<Repeat>();
  static_cast<Linear&>(repeat.body().at(0)).weight().data = Tensor::from_values({2, 2}, {2, 0, 0, 2});
  Context ctx(cpu_kernels());
  const Var y = repeat.forward(ctx, constant(Tensor::from_values({1, 2}, {1, -3})));
  EXPECT_FLOAT_EQ(y.value().data()[0], 8.0f);
  EXPECT_FLOAT_EQ(y.value().data()[1], -24.0f);
}

TEST(Repeat, BackwardHooksFireOncePerInvocation) {
  auto harness = repeated_linear(3, true);
  auto& repeat = harness->root_as<Repeat>();
  BackwardCounter counter;
  Context ctx(cpu_kernels(), &counter);
  backward(ctx, weighted_sum(ctx, repeat.forward(ctx, constant(seeded_normal({2, 2}, 1))), 2));
  const Module* linear = &repeat.body().at(0);
  EXPECT_EQ(counter.pre[linear], 3);
  EXPECT_EQ(counter.post[linear], 3);
  EXPECT_EQ(counter.pre[&repeat], 1);
}

TEST(Repeat, SharedParameterGradientsAddUpOverCallsAndMatchFiniteDifferences) {
  auto harness = repeated_linear(3, true);
  auto& repeat = harness->root_as<Repeat>();
  const auto result = module_gradcheck([&](Context& ctx, const std::vector<Var>& in) {
    return weighted_sum(ctx, repeat.forward(ctx, in[0]), 3);
  }, {seeded_normal({3, 2}, 4)}, harness->parameters());
  EXPECT_TRUE(result.ok) << result.report;
}

}  // namespace
}  // namespace zero3
