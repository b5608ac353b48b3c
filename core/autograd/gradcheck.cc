// Finite-difference gradient checking: one backward for the analytic gradients, then two forward
// evaluations per input element for the central difference.
#include "core/autograd/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/base/errors.h"
#include "core/tensor/kernels.h"

namespace zero3 {
namespace {

constexpr size_t kReportedElements = 8;

struct ElementCheck {
  size_t input = 0;
  int64_t element = 0;
  double analytic = 0.0;
  double numeric = 0.0;
  double diff = 0.0;
  double excess = 0.0;  // diff minus the tolerance at this element; > 0 means wrong
  bool wrong = false;
};

double evaluate(const GradcheckLoss& loss, const std::vector<Tensor>& inputs) {
  Context ctx(cpu_kernels());
  std::vector<Var> vars;
  for (const Tensor& input : inputs) vars.emplace_back(input, /*requires_grad=*/false);
  const Var result = loss(ctx, vars);
  ZERO3_CHECK(result.defined() && result.value().numel() == 1 && !result.value().is_meta(),
              "gradcheck loss must be a cpu scalar, got " + describe(result.value()));
  return static_cast<double>(result.value().item());
}

// The analytic gradient of every input, zeros where no gradient reached an input.
std::vector<Tensor> analytic_gradients(const GradcheckLoss& loss, const std::vector<Tensor>& inputs) {
  Context ctx(cpu_kernels());
  std::vector<Var> vars;
  for (const Tensor& input : inputs) vars.emplace_back(input.clone(), /*requires_grad=*/true);
  const Var result = loss(ctx, vars);
  backward(ctx, result);
  std::vector<Tensor> grads;
  for (const Var& var : vars) {
    grads.push_back(var.grad().defined() ? var.grad() : Tensor::zeros(var.shape(), var.value().dtype()));
  }
  return grads;
}

float perturbed(float value, double delta, DType dtype) {
  const auto moved = static_cast<float>(static_cast<double>(value) + delta);
  return dtype == DType::bf16 ? round_to_bf16(moved) : moved;
}

// Central difference at one element; the step actually taken (after float or bf16 rounding) is the
// denominator, so rounding of the perturbed value does not bias the estimate.
double numeric_derivative(const GradcheckLoss& loss, std::vector<Tensor>& work, size_t input, int64_t element,
                          double step) {
  float& slot = work[input].data()[element];
  const float original = slot;
  const float plus = perturbed(original, step, work[input].dtype());
  const float minus = perturbed(original, -step, work[input].dtype());
  ZERO3_CHECK(plus != minus,
              "gradcheck step " + std::to_string(step) + " vanishes at value " + std::to_string(original));
  slot = plus;
  const double loss_plus = evaluate(loss, work);
  slot = minus;
  const double loss_minus = evaluate(loss, work);
  slot = original;
  return (loss_plus - loss_minus) / (static_cast<double>(plus) - static_cast<double>(minus));
}

std::string index_str(const Shape& shape, int64_t element) {
  Shape index(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    index[d] = element % shape[d];
    element /= shape[d];
  }
  return shape_str(index);
}

std::string make_report(const std::vector<Tensor>& inputs, std::vector<ElementCheck> checks,
                        const GradcheckResult& result, const GradcheckOptions& options) {
  std::ostringstream out;
  out << "gradcheck: " << checks.size() << " elements over " << inputs.size() << " inputs (";
  for (size_t i = 0; i < inputs.size(); ++i) out << (i ? ", " : "") << describe(inputs[i]);
  out << "), #wrong=" << result.wrong << ", max_abs_diff=" << result.max_abs_diff << " (step=" << options.step
      << ", abs_tol=" << options.abs_tol << ", rel_tol=" << options.rel_tol << ")\n";
  std::sort(checks.begin(), checks.end(), [](const ElementCheck& a, const ElementCheck& b) {
    return a.excess > b.excess || (std::isnan(a.excess) && !std::isnan(b.excess));
  });
  for (size_t i = 0; i < std::min(checks.size(), kReportedElements); ++i) {
    const ElementCheck& c = checks[i];
    out << "  input " << c.input << " element " << c.element << " " << index_str(inputs[c.input].shape(), c.element)
        << ": analytic=" << c.analytic << " numeric=" << c.numeric << " diff=" << c.diff
        << (c.wrong ? " WRONG" : "") << "\n";
  }
  return out.str();
}

}  // namespace

GradcheckResult gradcheck(const GradcheckLoss& loss, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options) {
  for (const Tensor& input : inputs) {
    ZERO3_CHECK(input.defined() && !input.is_meta(), "gradcheck needs cpu inputs, got " + describe(input));
  }
  const std::vector<Tensor> grads = analytic_gradients(loss, inputs);
  std::vector<Tensor> work;
  for (const Tensor& input : inputs) work.push_back(input.clone());

  GradcheckResult result;
  std::vector<ElementCheck> checks;
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (int64_t e = 0; e < inputs[i].numel(); ++e) {
      ElementCheck c;
      c.input = i;
      c.element = e;
      c.analytic = grads[i].data()[e];
      c.numeric = numeric_derivative(loss, work, i, e, options.step);
      c.diff = std::abs(c.analytic - c.numeric);
      c.excess = c.diff - (options.abs_tol + options.rel_tol * std::abs(c.numeric));
      c.wrong = !(c.excess <= 0.0);  // NaN anywhere counts as wrong
      if (c.wrong) ++result.wrong;
      if (std::isnan(c.diff) || c.diff > result.max_abs_diff) result.max_abs_diff = c.diff;
      checks.push_back(c);
    }
  }
  result.ok = result.wrong == 0;
  result.report = make_report(inputs, std::move(checks), result, options);
  return result;
}

}  // namespace zero3
