// Autograd: gradients of a Var used twice add up, ops off the loss path never run backward,
// the tape counts activations outside modules. Module hooks around backward: nn/module_hooks_test.cc.
#include "core/autograd/autograd.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "core/autograd/context.h"
#include "core/autograd/logged_op_test_support.h"
#include "core/autograd/ops.h"
#include "core/base/errors.h"
#include "core/tensor/allocator.h"
#include "core/tensor/kernels.h"

namespace zero3 {
namespace {

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
