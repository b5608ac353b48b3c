// Model: a module tree plus its loss. Construction registers modules and parameters; finalize()
// names them (dotted paths) and numbers parameters (ids in registration order, own parameters of
// a module before its children's), identically on every rank.
//
//   class TinyModel : public Model {
//    public:
//     TinyModel() : Model(std::make_unique<Linear>(4, 2, /*has_bias=*/true, 0.02f)) { finalize(); }
//     Var loss(Context& ctx, const Batch& batch) override { ... }   // forward + loss
//   };
//   TinyModel model;
//   model.initialize(seed);              // same values on every rank
//   Var loss = model.loss(ctx, batch);
#pragma once
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/autograd/context.h"
#include "core/nn/module.h"

namespace zero3 {

// One micro-batch of one rank: inputs and targets as the model's loss expects them
// (token ids [B, T] and next tokens [B, T] for GPT; features [B, in] and values [B, out] for MLPs).
struct Batch {
  Tensor inputs;
  Tensor targets;
};

class Model {
 public:
  explicit Model(std::unique_ptr<Module> root);
  virtual ~Model() = default;

  Module& root() { return *root_; }
  const Module& root() const { return *root_; }
  // Every parameter by id.
  const std::vector<Parameter*>& parameters() const { return parameters_; }
  std::vector<std::string> parameter_names() const;  // dotted names by id
  int64_t parameter_count() const;  // elements, each parameter counted once
  Parameter& parameter(const std::string& name) const;  // InputError if there is none

  // Allocates and fills every parameter's data from `seed` (independent of world size and rank).
  void initialize(uint64_t seed, Device device = Device::cpu);
  // Where initialize() put the parameters: a model without any is still meta for a shape replay.
  Device device() const { return device_; }

  virtual Var loss(Context& ctx, const Batch& batch) = 0;

 protected:
  // Call at the end of a derived constructor, once the tree is complete.
  void finalize();

 private:
  void name_subtree(Module& module, const std::string& prefix);

  std::unique_ptr<Module> root_;
  std::vector<Parameter*> parameters_;
  Device device_ = Device::cpu;
};

// The modules `names` select, each a module type ("block") or a dotted name ("h.0"), as
// zero3_leaf_modules and activation_checkpointing.zero3_modules take them. A name matching no
// module is an InputError naming `what` (the key or flag), the name and the model's types.
std::set<const Module*> select_modules(const Model& model, const std::vector<std::string>& names, const std::string& what);

}  // namespace zero3
