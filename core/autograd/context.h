// Context: what one rank's forward and backward run against — its kernels, its tape, the hooks an
// engine installs, and the checked parameter accessor.
//
// Parameter access goes through two doors. `ctx.param(user, p)` is the checked accessor: hooks
// see every use, so a parameter used by a module that does not own it (a tied LM head) can be
// recognised as external and gathered. `ctx.raw(p)` is the unchecked handle that real user code
// keeps as a cached reference; while `p` is partitioned it shows whatever the placeholder policy
// says (parameter.h), exactly the situation that produces the broadcast trap.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <type_traits>

#include "core/autograd/autograd.h"
#include "core/tensor/kernels.h"

namespace zero3 {

class Module;
class Parameter;

// Installed by an engine (ZeRO-3, DDP); the reference trainer installs none. Every method has a
// default that behaves like plain unsharded training.
class ModuleHooks {
 public:
  virtual ~ModuleHooks() = default;
  virtual void pre_forward(Context&, Module&) {}
  virtual void post_forward(Context&, Module&) {}
  virtual void pre_backward(Context&, Module&) {}
  virtual void post_backward(Context&, Module&) {}
  // The tensor `user` computes with when it uses `param` through the checked accessor.
  virtual Tensor checked_access(Context& ctx, Module& user, Parameter& param);
  // What a raw handle to `param` shows right now.
  virtual Tensor raw_access(Context& ctx, Parameter& param);
};

class Context {
 public:
  explicit Context(Kernels& kernels, ModuleHooks* hooks = nullptr, int rank = 0);

  Kernels& kernels() { return kernels_; }
  Tape& tape() { return tape_; }
  ModuleHooks& hooks() { return *hooks_; }
  int rank() const { return rank_; }
  int64_t step() const { return step_; }
  void set_step(int64_t step) { step_ = step; }

  // Checked accessor: the leaf Var of `param` for this step, its value refreshed from the hooks.
  // Every use of one parameter in a step shares one leaf, so gradients of all uses add up once.
  Var param(Module& user, Parameter& param);
  // Unchecked raw handle (see the file comment); carries no gradient.
  Tensor raw(Parameter& param);
  // The gradient accumulated for `param` this step (undefined if it was not used).
  Tensor param_grad(const Parameter& param) const;
  // Drops the tape and the per-step leaves; call at the start of every micro-step.
  void begin_micro_step();

  // For engines. Replaces what `param`'s leaf shows to the ops recorded on the tape (the gathered
  // value before a module's backward, a placeholder after release); no-op if it was not used yet.
  void set_param_value(const Parameter& param, const Tensor& value);
  // Drops `param`'s accumulated gradient once the engine has reduced it.
  void release_param_grad(const Parameter& param);
  // The invocation index of the module whose hook is running (0 for its first call this micro-step).
  int64_t current_invocation() const { return current_invocation_; }

  // Runs `body` as one invocation of `module`: markers on the tape and the forward hooks around it.
  // A checkpointed module keeps only what body returns (a Var) for backward.
  template <class Body>
  auto invoke(Module& module, Body&& body) {
    const int64_t invocation = enter_module(module);
    auto result = body();
    if constexpr (std::is_same_v<decltype(result), Var>) {
      exit_module(module, invocation, &result);
    } else {
      exit_module(module, invocation);
    }
    return result;
  }

  // Activation checkpointing: these modules' invocations keep only their output in forward and run
  // again in backward (autograd.h). A module inside another checkpointed one is run again as part
  // of it, not on its own.
  void set_checkpointed(std::set<const Module*> modules) { checkpointed_ = std::move(modules); }
  bool is_checkpointed(const Module& module) const { return checkpointed_.count(&module) > 0; }

  // Wall-clock seconds spent running checkpointed ranges again in backward (recompute_checkpointed),
  // summed over this context's life: a step's share is the difference around it. For reports only.
  double recompute_seconds() const { return recompute_seconds_; }

  // Modules entered and not yet exited, innermost last (used to name the module in errors).
  const std::vector<Module*>& module_stack() const { return module_stack_; }

  // What invoke() does around its body, for drivers that replay a recorded forward event by
  // event (traces): enter returns the invocation index that exit must be given.
  int64_t enter_module(Module& module);
  // `output`: what the invocation returned, kept when the module is checkpointed and measured on
  // the exit marker either way (null: nothing, as for a replayed event that has no values).
  void exit_module(Module& module, int64_t invocation, const Var* output = nullptr);

 private:
  Kernels& kernels_;
  ModuleHooks default_hooks_;
  ModuleHooks* hooks_;
  int rank_;
  int64_t step_ = 0;
  Tape tape_;
  std::map<int64_t, Var> param_leaves_;            // by parameter id
  std::map<const Module*, int64_t> invocations_;   // calls so far in this micro-step
  std::vector<Module*> module_stack_;
  int64_t current_invocation_ = 0;
  std::set<const Module*> checkpointed_;
  double recompute_seconds_ = 0.0;

  friend void backward(Context& ctx, const Var& loss);
  friend void recompute_checkpointed(Context& ctx, size_t exit_index);
};

}  // namespace zero3
