// Module hooks around backward: pre-backward at exit markers, post-backward at enter markers, in
// reverse, once per invocation of a module that runs several times; activations held per module.
#include <gtest/gtest.h>

#include "core/autograd/autograd.h"
#include "core/autograd/context.h"
#include "core/autograd/logged_op_test_support.h"
#include "core/autograd/ops.h"
#include "core/tensor/allocator.h"
#include "core/tensor/kernels.h"
#include "core/nn/module.h"

namespace zero3 {
namespace {

class TinyModule : public Module {
 public:
  explicit TinyModule(std::string type) : Module(std::move(type)) {}
};

// Records every hook call as "<hook> <module type>".
class RecordingHooks : public ModuleHooks {
 public:
  explicit RecordingHooks(std::vector<std::string>* log) : log_(log) {}
  void pre_forward(Context&, Module& m) override { log_->push_back("pre_forward " + m.type()); }
  void post_forward(Context&, Module& m) override { log_->push_back("post_forward " + m.type()); }
  void pre_backward(Context&, Module& m) override { log_->push_back("pre_backward " + m.type()); }
  void post_backward(Context&, Module& m) override { log_->push_back("post_backward " + m.type()); }

 private:
  std::vector<std::string>* log_;
};

TEST(ModuleHooks, NestedModulesRunBackwardHooksInReverseAroundTheirOps) {
  std::vector<std::string> log;
  RecordingHooks hooks(&log);
  Context ctx(cpu_kernels(), &hooks);
  TinyModule outer("outer"), inner("inner");
  Var x(Tensor::scalar(1.0f), /*requires_grad=*/true);
  Var loss = ctx.invoke(outer, [&] {
    Var h = ctx.invoke(inner, [&] { return logged_sum(ctx, "inner_op", {x}, &log); });
    return logged_sum(ctx, "outer_op", {h}, &log);
  });
  log.push_back("-- backward --");
  backward(ctx, loss);
  EXPECT_EQ(log, (std::vector<std::string>{
                     "pre_forward outer", "pre_forward inner", "post_forward inner", "post_forward outer",
                     "-- backward --", "pre_backward outer", "op outer_op", "pre_backward inner", "op inner_op",
                     "post_backward inner", "post_backward outer"}));
}

TEST(ModuleHooks, AModuleInvokedTwiceGetsOneBackwardPairPerInvocation) {
  std::vector<std::string> log;
  RecordingHooks hooks(&log);
  Context ctx(cpu_kernels(), &hooks);
  TinyModule block("block");
  Var x(Tensor::scalar(1.0f), /*requires_grad=*/true);
  Var h1 = ctx.invoke(block, [&] { return logged_sum(ctx, "first", {x}, &log); });
  Var h2 = ctx.invoke(block, [&] { return logged_sum(ctx, "second", {h1}, &log); });
  log.clear();
  backward(ctx, h2);
  EXPECT_EQ(log, (std::vector<std::string>{"pre_backward block", "op second", "post_backward block",
                                           "pre_backward block", "op first", "post_backward block"}));
  EXPECT_EQ(x.grad().item(), 1.0f);
}

// Records the activation bytes held when each module's backward ends.
class ActivationProbe : public ModuleHooks {
 public:
  explicit ActivationProbe(const CountingAllocator& memory) : memory_(memory) {}
  void post_backward(Context&, Module& m) override {
    held_after_backward.push_back(m.type() + " " + std::to_string(memory_.current_bytes(MemoryCategory::activation)));
  }
  std::vector<std::string> held_after_backward;

 private:
  const CountingAllocator& memory_;
};

TEST(ActivationCounting, AModulesOutputsAreHeldFromItsExitUntilItsBackwardEndsAndViewsAreFree) {
  CountingAllocator memory;
  ActivationProbe probe(memory);
  Context ctx(cpu_kernels(), &probe);
  ctx.tape().count_activations(&memory);
  TinyModule outer("outer");
  TinyModule inner("inner");
  const Var x(Tensor::full({2, 3}, 1.5f), /*requires_grad=*/true);
  const auto held = [&] { return memory.current_bytes(MemoryCategory::activation); };
  const Var loss = ctx.invoke(outer, [&] {
    const Var product = ctx.invoke(inner, [&] { return mul(ctx, x, x); });
    EXPECT_EQ(held(), 6 * 4) << "inner's [2, 3] f32 output, counted at its exit";
    const Var flat = reshape(ctx, product, {6});  // a view of product: no new bytes
    return sum(ctx, flat);                         // outer's own output: one f32
  });
  EXPECT_EQ(held(), 6 * 4 + 4);
  backward(ctx, loss);
  EXPECT_EQ(probe.held_after_backward, (std::vector<std::string>{"inner 4", "outer 0"}));
  EXPECT_EQ(memory.peak_bytes(MemoryCategory::activation), 6 * 4 + 4);
  EXPECT_EQ(held(), 0);
}

}  // namespace
}  // namespace zero3
