// Finite-difference checks of module gradients, with respect to the module's inputs AND its
// parameters. gradcheck() cannot see parameters: they enter forward through the checked accessor,
// whose per-step leaf no gradcheck input stands in for, so here they are perturbed in place
// through param.data and their analytic gradients read from ctx.param_grad().
//
//   ModuleHarness harness(std::make_unique<Linear>(3, 2, true, 0.5f));
//   auto result = module_gradcheck([&](Context& ctx, const std::vector<Var>& in) {
//     return sum(ctx, harness.root_as<Linear>().forward(ctx, in[0]));
//   }, {x}, harness.parameters());
#pragma once
#include <memory>

#include "core/autograd/gradcheck.h"
#include "core/nn/model.h"

namespace zero3 {

// Wraps a standalone module in a Model so that its parameters get names and distinct ids (the
// checked accessor keys per-step leaves by id), initialised from `seed`.
class ModuleHarness : public Model {
 public:
  explicit ModuleHarness(std::unique_ptr<Module> module, uint64_t seed = 1);
  template <class M>
  M& root_as() {
    return static_cast<M&>(root());
  }
  // A harness is differentiated through module_gradcheck, never trained: this throws.
  Var loss(Context& ctx, const Batch& batch) override;
};

// Values N(0, std) from (seed, index): reproducible test inputs of any shape.
Tensor seeded_normal(const Shape& shape, uint64_t seed, float std = 1.0f);
// The sum of `out` weighted element by element with seeded_normal values: every output element
// gets its own gradient (a plain sum would give LayerNorm an exactly zero input gradient).
Var weighted_sum(Context& ctx, const Var& out, uint64_t seed);

// `loss` builds a scalar from Vars of `inputs`; `params` (finalized, distinct) are perturbed in
// place and restored. Every element of every input and parameter is checked.
GradcheckResult module_gradcheck(const GradcheckLoss& loss, const std::vector<Tensor>& inputs,
                                 const std::vector<Parameter*>& params, const GradcheckOptions& options = {});

}  // namespace zero3
