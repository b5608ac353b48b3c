// A hand-built op for tests of the tape and of module hooks: it logs when its backward runs.
#pragma once
#include <string>
#include <vector>

#include "core/autograd/autograd.h"
#include "core/autograd/context.h"
#include "core/tensor/kernels.h"

namespace zero3 {

// A hand-built op: output = sum of inputs (all one shape); backward logs "op <label>" and passes the
// gradient to every input unchanged.
inline Var logged_sum(Context& ctx, const std::string& label, const std::vector<Var>& inputs, std::vector<std::string>* log) {
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

}  // namespace zero3
