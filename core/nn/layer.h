// Layer: a module that maps one activation to one activation, so layers compose into sequences,
// residual bodies and repeated blocks. Concrete layers wrap their forward body in ctx.invoke.
#pragma once
#include <string>

#include "core/nn/module.h"
#include "core/autograd/ops.h"

namespace zero3 {

class Layer : public Module {
 public:
  explicit Layer(std::string type) : Module(std::move(type)) {}
  virtual Var forward(Context& ctx, const Var& x) = 0;
};

}  // namespace zero3
