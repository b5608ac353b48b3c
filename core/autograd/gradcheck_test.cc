// gradcheck itself: it accepts a correct backward and flags, counts and names every wrong element.
#include "core/autograd/gradcheck.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/tensor/kernels.h"
#include "core/autograd/ops.h"

namespace zero3 {
namespace {

TEST(Gradcheck, AcceptsTheHeaderExample) {
  const GradcheckResult result = gradcheck([](Context& ctx, const std::vector<Var>& in) {
    return sum(ctx, mul(ctx, in[0], in[1]));
  }, {Tensor::from_values({2, 1}, {1, 2}), Tensor::from_values({3}, {3, 4, 5})});
  EXPECT_TRUE(result.ok) << result.report;
  EXPECT_EQ(result.wrong, 0);
}

// An op whose backward claims d(2x)/dx = 1: gradcheck must flag every element and name them.
TEST(Gradcheck, FlagsAWrongBackwardAndReportsTheElements) {
  const auto wrong_double = [](Context& ctx, const std::vector<Var>& in) {
    Var x = in[0];
    Tensor value = Tensor::zeros(x.shape());
    ctx.kernels().scale(x.value(), 2.0f, value);
    Var out(value, true);
    TapeOp op{"wrong_double", {x}, out, [x](Context& c, const Tensor& grad) mutable { x.accumulate_grad(c, grad); }, 0, {}};
    ctx.tape().record(op);
    return sum(ctx, out);
  };
  const GradcheckResult result = gradcheck(wrong_double, {Tensor::from_values({2, 2}, {1, 2, 3, 4})});
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.wrong, 4);
  EXPECT_NEAR(result.max_abs_diff, 1.0, 1e-3);
  EXPECT_NE(result.report.find("input 0 element 3 [1,1]"), std::string::npos) << result.report;
  EXPECT_NE(result.report.find("WRONG"), std::string::npos) << result.report;
}

}  // namespace
}  // namespace zero3
