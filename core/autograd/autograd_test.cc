// Autograd: gradients of a Var used twice add up, ops off the loss path never run backward, and
// backward fires module hooks in reverse (pre-backward at exit markers, post-backward at enter
// markers), once per invocation of a module that runs several times.
#include "core/autograd/autograd.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "core/tensor/allocator.h"
#include "core/autograd/context.h"
#include "core/base/errors.h"
#include "core/tensor/kernels.h"
#include "core/nn/module.h"
#include "core/autograd/ops.h"

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

// A hand-built op: output = sum of inputs (all one shape); backward logs "op <label>" and passes the
// gradient to every input unchanged.
Var logged_sum(Context& ctx, const std::string& label, const std::vector<Var>& inputs, std::vector<std::string>* log) {
  Tensor value = inputs[0].value().clone();
  for (size_t i = 1; i < inputs.size(); ++i) ctx.kernels().add_into(value, inputs[i].value());
  Var output(value, /*requires_grad=*/true);
  TapeOp op;
  op.name = label;
  op.inputs = inputs;
  op.output = output;
  op.backward = [inputs, label, log](Context& c, const Tensor& grad) {
    log->push_back("op " + label);
    for (Var in : inputs) in.accumulate_grad(c, grad);
  };
  ctx.tape().record(std::move(op));
  return output;
}

TEST(Autograd, GradientsOfAVarUsedTwiceAddUp) {
  Context ctx(cpu_kernels());
  std::vector<std::string> log;
  Var x(Tensor::scalar(3.0f), /*requires_grad=*/true);
  Var loss = logged_sum(ctx, "twice", {x, x}, &log);
  backward(ctx, loss);
  EXPECT_EQ(x.grad().item(), 2.0f);
}

TEST(Autograd, GradientOfXTimesXPlusXIsTwoXPlusOne) {
  Context ctx(cpu_kernels());
  Var x(Tensor::from_values({3}, {1, -2, 3}), /*requires_grad=*/true);
  backward(ctx, sum(ctx, add(ctx, mul(ctx, x, x), x)));
  EXPECT_EQ(std::vector<float>(x.grad().values().begin(), x.grad().values().end()), (std::vector<float>{3, -3, 7}));
}

TEST(Autograd, OpsThatDoNotReachTheLossNeverRunBackward) {
  Context ctx(cpu_kernels());
  std::vector<std::string> log;
  Var x(Tensor::scalar(1.0f), /*requires_grad=*/true);
  logged_sum(ctx, "unused", {x}, &log);
  Var loss = logged_sum(ctx, "used", {x}, &log);
  backward(ctx, loss);
  EXPECT_EQ(log, (std::vector<std::string>{"op used"}));
  EXPECT_EQ(x.grad().item(), 1.0f);
}

TEST(Autograd, BackwardClearsTheTape) {
  Context ctx(cpu_kernels());
  std::vector<std::string> log;
  Var x(Tensor::scalar(1.0f), /*requires_grad=*/true);
  backward(ctx, logged_sum(ctx, "a", {x}, &log));
  EXPECT_TRUE(ctx.tape().entries().empty());
}

TEST(Autograd, BackwardOfANonScalarLossIsAProgrammerError) {
  Context ctx(cpu_kernels());
  Var x(Tensor::zeros({2}), /*requires_grad=*/true);
  EXPECT_THROW(backward(ctx, x), std::logic_error);
}

TEST(Autograd, AVarThatTakesNoGradientIgnoresGradients) {
  Context ctx(cpu_kernels());
  Var x(Tensor::scalar(1.0f), /*requires_grad=*/false);
  x.accumulate_grad(ctx, Tensor::scalar(5.0f));
  EXPECT_FALSE(x.grad().defined());
}

TEST(Autograd, AGradientOfTheWrongShapeRaisesShapeError) {
  Context ctx(cpu_kernels());
  Var x(Tensor::zeros({2, 3}), /*requires_grad=*/true);
  EXPECT_THROW(x.accumulate_grad(ctx, Tensor::zeros({3, 2})), ShapeError);
}

TEST(Autograd, MetaGradientsOfAVarUsedTwiceStayMeta) {
  Context ctx(cpu_kernels());
  Var x(Tensor::meta({4, 5}), /*requires_grad=*/true);
  backward(ctx, sum(ctx, add(ctx, x, x)));
  ASSERT_TRUE(x.grad().defined());
  EXPECT_TRUE(x.grad().is_meta());
  EXPECT_EQ(x.grad().shape(), (Shape{4, 5}));
}

TEST(Autograd, NestedModulesRunBackwardHooksInReverseAroundTheirOps) {
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

TEST(Autograd, AModuleInvokedTwiceGetsOneBackwardPairPerInvocation) {
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

TEST(ActivationCounting, OpsOutsideEveryModuleAreCountedWhenTheyRunAndReleasedWithTheTape) {
  CountingAllocator memory;
  Context ctx(cpu_kernels());
  ctx.tape().count_activations(&memory);
  const Var x(Tensor::full({4}, 2.0f), /*requires_grad=*/true);
  mul(ctx, x, x);
  EXPECT_EQ(memory.current_bytes(MemoryCategory::activation), 4 * 4);
  ctx.begin_micro_step();  // a forward without backward: the tape is dropped, so are its activations
  EXPECT_EQ(memory.current_bytes(MemoryCategory::activation), 0);
}

}  // namespace
}  // namespace zero3
