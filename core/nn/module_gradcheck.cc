// Module gradient checks over inputs and parameters.
#include "core/nn/module_gradcheck.h"

#include <cmath>
#include <set>
#include <sstream>

#include "core/base/errors.h"
#include "core/tensor/kernels.h"
#include "core/autograd/ops.h"
#include "core/base/rng.h"

namespace zero3 {

namespace {

constexpr int kReportedElements = 8;

// One checked tensor: a work copy of an input, or a parameter's data (edited in place).
struct Checked {
  std::string label;
  Tensor* value;
  Tensor analytic;
};

double evaluate(const GradcheckLoss& loss, const std::vector<Tensor>& inputs) {
  Context ctx(cpu_kernels());
  std::vector<Var> vars;
  for (const Tensor& input : inputs) vars.emplace_back(input, /*requires_grad=*/false);
  return static_cast<double>(loss(ctx, vars).value().item());
}

// Analytic gradients of the inputs and then the parameters; zeros where no gradient arrived.
std::vector<Tensor> analytic_gradients(const GradcheckLoss& loss, const std::vector<Tensor>& inputs,
                                       const std::vector<Parameter*>& params) {
  Context ctx(cpu_kernels());
  std::vector<Var> vars;
  for (const Tensor& input : inputs) vars.emplace_back(input.clone(), /*requires_grad=*/true);
  backward(ctx, loss(ctx, vars));
  std::vector<Tensor> grads;
  for (const Var& var : vars) grads.push_back(var.grad().defined() ? var.grad() : Tensor::zeros(var.shape()));
  for (const Parameter* param : params) {
    const Tensor grad = ctx.param_grad(*param);
    if (grad.defined() && grad.shape() != param->shape()) {
      throw ShapeError("gradient of '" + param->name() + "' is " + describe(grad) + ", expected " +
                       shape_str(param->shape()));
    }
    grads.push_back(grad.defined() ? grad : Tensor::zeros(param->shape()));
  }
  return grads;
}

}  // namespace

Tensor seeded_normal(const Shape& shape, uint64_t seed, float std) {
  Tensor out = Tensor::zeros(shape);
  auto values = out.values();
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = static_cast<float>(standard_normal(seed, stream_id("seeded_normal"), i)) * std;
  }
  return out;
}

Var weighted_sum(Context& ctx, const Var& out, uint64_t seed) {
  return sum(ctx, mul(ctx, out, constant(seeded_normal(out.shape(), seed))));
}

ModuleHarness::ModuleHarness(std::unique_ptr<Module> module, uint64_t seed) : Model(std::move(module)) {
  finalize();
  initialize(seed);
}

Var ModuleHarness::loss(Context&, const Batch&) {
  throw std::logic_error("a ModuleHarness is checked through module_gradcheck and has no training loss");
}

GradcheckResult module_gradcheck(const GradcheckLoss& loss, const std::vector<Tensor>& inputs,
                                 const std::vector<Parameter*>& params, const GradcheckOptions& options) {
  std::set<int64_t> ids;
  for (const Parameter* param : params) {
    ZERO3_CHECK(param->id() >= 0 && ids.insert(param->id()).second,
                "module_gradcheck needs finalized, distinct parameters; '" + param->name() + "' has id " +
                    std::to_string(param->id()));
  }
  std::vector<Tensor> work;
  for (const Tensor& input : inputs) work.push_back(input.clone());
  const std::vector<Tensor> grads = analytic_gradients(loss, inputs, params);
  std::vector<Checked> checked;
  for (size_t i = 0; i < work.size(); ++i) checked.push_back({"input " + std::to_string(i), &work[i], grads[i]});
  for (size_t p = 0; p < params.size(); ++p) {
    checked.push_back({"param " + params[p]->name(), &params[p]->data, grads[work.size() + p]});
  }

  GradcheckResult result;
  std::ostringstream wrong_lines;
  int64_t elements = 0;
  for (Checked& c : checked) {
    for (int64_t e = 0; e < c.value->numel(); ++e, ++elements) {
      float& slot = c.value->data()[e];
      const float original = slot;
      slot = static_cast<float>(original + options.step);
      const double plus = evaluate(loss, work);
      slot = static_cast<float>(original - options.step);
      const double minus = evaluate(loss, work);
      slot = original;
      const double numeric = (plus - minus) / (2.0 * options.step);
      const double analytic = c.analytic.data()[e];
      const double diff = std::abs(analytic - numeric);
      result.max_abs_diff = std::max(result.max_abs_diff, diff);
      if (diff <= options.abs_tol + options.rel_tol * std::abs(numeric)) continue;  // NaN falls through: wrong
      if (result.wrong++ < kReportedElements) {
        wrong_lines << "  " << c.label << " element " << e << ": analytic=" << analytic << " numeric=" << numeric
                    << " diff=" << diff << "\n";
      }
    }
  }
  result.ok = result.wrong == 0;
  std::ostringstream report;
  report << "module_gradcheck: " << elements << " elements over " << inputs.size() << " inputs and " << params.size()
         << " parameters, #wrong=" << result.wrong << ", max_abs_diff=" << result.max_abs_diff << "\n"
         << wrong_lines.str();
  result.report = report.str();
  return result;
}

}  // namespace zero3
