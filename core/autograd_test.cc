// Autograd: gradients of a Var used twice add up, ops off the loss path never run backward, and
// backward fires module hooks in reverse (pre-backward at exit markers, post-backward at enter
// markers), once per invocation of a module that runs several times.
#include "core/autograd.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "core/context.h"
#include "core/errors.h"
#include "core/kernels.h"
#include "core/module.h"
#include "core/ops.h"

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

}  // namespace
}  // namespace zero3
