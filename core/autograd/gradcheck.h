// Finite-difference gradient checking: the oracle for every op's and every module's backward.
// Inputs are perturbed one element at a time (central differences, computed in double from the
// float loss), and each analytic gradient element must satisfy
//   |analytic - numeric| <= abs_tol + rel_tol * |numeric|.
//
//   auto result = gradcheck([](Context& ctx, const std::vector<Var>& in) {
//     return sum(ctx, mul(ctx, in[0], in[1]));
//   }, {Tensor::from_values({2, 1}, {1, 2}), Tensor::from_values({3}, {3, 4, 5})});
//   EXPECT_TRUE(result.ok) << result.report;
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/autograd/autograd.h"
#include "core/autograd/context.h"

namespace zero3 {

struct GradcheckOptions {
  double step = 1e-2;      // finite-difference step
  double abs_tol = 2e-3;
  double rel_tol = 2e-2;
};

struct GradcheckResult {
  bool ok = true;
  double max_abs_diff = 0.0;
  int64_t wrong = 0;        // elements outside tolerance, over all inputs
  std::string report;      // the worst elements by input and index, analytic vs numeric
};

// `loss` builds a scalar from Vars of `inputs` (each a leaf that requires grad).
using GradcheckLoss = std::function<Var(Context&, const std::vector<Var>&)>;
GradcheckResult gradcheck(const GradcheckLoss& loss, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options = {});

}  // namespace zero3
