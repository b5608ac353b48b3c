// The Context's methods that name modules and parameters: the checked accessor, raw handles,
// gradients by parameter, and module invocation markers. autograd/ declares them against forward
// declarations of Module and Parameter; they are defined here, where those types are.
#include "core/autograd/context.h"
#include "core/base/errors.h"
#include "core/nn/module.h"
#include "core/nn/parameter.h"

namespace zero3 {

Tensor ModuleHooks::checked_access(Context&, Module&, Parameter& param) { return param.data; }

Tensor ModuleHooks::raw_access(Context&, Parameter& param) { return param.data; }

Var Context::param(Module& user, Parameter& param) {
  Tensor value = hooks_->checked_access(*this, user, param);
  // The value may be a placeholder of another shape when an engine is broken on purpose (bug
  // injection); the ops that use it then fail or, for broadcasting ones, silently compute garbage.
  ZERO3_CHECK(value.defined(), "checked access to '" + param.name() + "' got an undefined tensor");
  // Leaves are keyed by id; an unnumbered parameter would alias every other one.
  ZERO3_CHECK(param.id() >= 0, "parameter '" + param.name() + "' has no id: finalize() the model first");
  auto [it, inserted] = param_leaves_.try_emplace(param.id());
  // A frozen parameter is a constant of the tape: backward computes no gradient for it.
  if (inserted) it->second = Var(value, param.requires_grad());
  else it->second.mutable_value() = value;
  return it->second;
}

Tensor Context::raw(Parameter& param) { return hooks_->raw_access(*this, param); }

Tensor Context::param_grad(const Parameter& param) const {
  auto it = param_leaves_.find(param.id());
  return it == param_leaves_.end() ? Tensor() : it->second.grad();
}

void Context::set_param_value(const Parameter& param, const Tensor& value) {
  auto it = param_leaves_.find(param.id());
  if (it != param_leaves_.end()) it->second.mutable_value() = value;
}

void Context::release_param_grad(const Parameter& param) {
  auto it = param_leaves_.find(param.id());
  if (it != param_leaves_.end()) it->second.clear_grad();
}

int64_t Context::enter_module(Module& module) {
  const int64_t invocation = invocations_[&module]++;
  module_stack_.push_back(&module);
  tape_.mark(MarkerKind::module_enter, &module, invocation, module.name());
  current_invocation_ = invocation;
  hooks_->pre_forward(*this, module);
  return invocation;
}

void Context::exit_module(Module& module, int64_t invocation, const Var* output) {
  current_invocation_ = invocation;
  // Only the outermost checkpointed module of a nest runs again; the ones inside it are part of it.
  bool checkpoint = is_checkpointed(module);
  for (size_t i = 0; checkpoint && i + 1 < module_stack_.size(); ++i) checkpoint = !is_checkpointed(*module_stack_[i]);
  // Marked first: the module's outputs exist before its post-forward hook releases its parameters.
  if (checkpoint) {
    tape_.mark_checkpointed_exit(&module, invocation, module.name(), output);
  } else {
    tape_.mark(MarkerKind::module_exit, &module, invocation, module.name(), output);
  }
  hooks_->post_forward(*this, module);
  ZERO3_CHECK(!module_stack_.empty() && module_stack_.back() == &module, "module exit out of order: " + module.display_name());
  module_stack_.pop_back();
}

}  // namespace zero3
