// Module: a node of the model tree. A module registers its parameters and children while it is
// constructed; the Model then names everything with dotted paths and numbers parameters in
// registration order. Concrete modules expose their own forward(...) and wrap its body in
// ctx.invoke(*this, ...) so engines get pre/post forward and backward hooks.
//
//   class Scale : public Module {
//    public:
//     Scale() : Module("scale"), weight_(add_parameter("weight", {1}, Init::ones)) {}
//     Var forward(Context& ctx, const Var& x) {
//       // ctx.param is the checked accessor: the engine sees the access and gathers if needed.
//       return ctx.invoke(*this, [&] { return mul(ctx, x, ctx.param(*this, weight_)); });
//     }
//    private:
//     Parameter& weight_;
//   };
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/nn/parameter.h"

namespace zero3 {

class Module {
 public:
  explicit Module(std::string type);
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& type() const { return type_; }
  const std::string& name() const { return name_; }        // dotted from the root; "" for the root
  const std::string& local_name() const { return local_name_; }
  Module* parent() const { return parent_; }

  const std::vector<std::unique_ptr<Parameter>>& parameters() const { return parameters_; }
  const std::vector<std::unique_ptr<Module>>& children() const { return children_; }
  // This module's own parameters plus those of every descendant, in registration order.
  std::vector<Parameter*> all_parameters() const;
  // A readable name for errors: the dotted name, or "<root>".
  std::string display_name() const;

 protected:
  Parameter& add_parameter(const std::string& local_name, const Shape& shape, Init init, float init_std = 0.02f);
  template <class M>
  M& add_child(const std::string& local_name, std::unique_ptr<M> child) {
    M& ref = *child;
    adopt(local_name, std::move(child));
    return ref;
  }

 private:
  friend class Model;
  void adopt(const std::string& local_name, std::unique_ptr<Module> child);

  std::string type_;
  std::string local_name_;
  std::string name_;
  Module* parent_ = nullptr;
  std::vector<std::unique_ptr<Parameter>> parameters_;
  std::vector<std::unique_ptr<Module>> children_;
};

}  // namespace zero3
