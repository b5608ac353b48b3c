// The Context's own state: kernels, hooks, rank and the per-micro-step tape. Its methods that need
// the full Module and Parameter types (the accessors, module markers) are in nn/context_modules.cc.
#include "core/autograd/context.h"

namespace zero3 {

Context::Context(Kernels& kernels, ModuleHooks* hooks, int rank)
    : kernels_(kernels), hooks_(hooks ? hooks : &default_hooks_), rank_(rank) {}

void Context::begin_micro_step() {
  tape_.clear();
  param_leaves_.clear();
  invocations_.clear();
  module_stack_.clear();
}

}  // namespace zero3
