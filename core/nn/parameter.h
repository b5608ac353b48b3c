// Parameter: one tensor of a module's state with exactly one owner module, a dotted name and a
// stable id assigned in registration order (identical on every rank). A frozen one
// (requires_grad false, as base weights are while adapters fine-tune) takes part in forward and
// backward like any other but gets no gradient, no reduction and no optimizer update.
//
// `data` is the full tensor as the unsharded reference trainer sees it. An engine that partitions
// parameters keeps its own shards and answers checked and raw accesses through ModuleHooks; for
// raw handles it applies the placeholder policy (placeholder_policy.h).
//
//   Parameter& weight = add_parameter("weight", {out, in}, Init::normal, 0.02f);  // in a Module
//   Var w = ctx.param(*this, weight);   // checked: hooks see it, an engine gathers it
//   Tensor cached = ctx.raw(weight);    // unchecked: a placeholder while partitioned
#pragma once
#include <cstdint>
#include <string>

#include "core/tensor/tensor.h"

namespace zero3 {

class Module;

// How a parameter is initialised from the model seed.
enum class Init : uint8_t {
  normal,  // N(0, std) with std given per parameter
  zeros,
  ones,
};

class Parameter {
 public:
  Parameter(Module* owner, std::string local_name, Shape shape, Init init, float init_std);

  int64_t id() const { return id_; }
  const std::string& name() const { return name_; }  // dotted, from the model root
  const std::string& local_name() const { return local_name_; }
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return shape_numel(shape_); }
  Module& owner() const { return *owner_; }
  Init init() const { return init_; }
  float init_std() const { return init_std_; }
  bool requires_grad() const { return requires_grad_; }
  void set_requires_grad(bool requires_grad) { requires_grad_ = requires_grad; }

  Tensor data;  // the full value (reference trainer); see the file comment

 private:
  friend class Model;  // assigns names and ids once the tree is complete
  Module* owner_;
  std::string local_name_;
  std::string name_;
  int64_t id_ = -1;
  Shape shape_;
  Init init_;
  float init_std_;
  bool requires_grad_ = true;
};

}  // namespace zero3
