// Model naming, numbering and initialisation.
#include "core/nn/model.h"

#include "core/base/errors.h"
#include "core/base/rng.h"

namespace zero3 {

Model::Model(std::unique_ptr<Module> root) : root_(std::move(root)) {}

void Model::finalize() {
  name_subtree(*root_, "");
  parameters_ = root_->all_parameters();
  for (size_t id = 0; id < parameters_.size(); ++id) parameters_[id]->id_ = static_cast<int64_t>(id);
}

void Model::name_subtree(Module& module, const std::string& prefix) {
  module.name_ = prefix;
  const std::string child_prefix = prefix.empty() ? "" : prefix + ".";
  for (auto& param : module.parameters_) param->name_ = child_prefix + param->local_name();
  for (auto& child : module.children_) name_subtree(*child, child_prefix + child->local_name());
}

std::vector<std::string> Model::parameter_names() const {
  std::vector<std::string> names;
  for (const Parameter* param : parameters_) names.push_back(param->name());
  return names;
}

int64_t Model::parameter_count() const {
  int64_t count = 0;
  for (const Parameter* param : parameters_) count += param->numel();
  return count;
}

Parameter& Model::parameter(const std::string& name) const {
  for (Parameter* param : parameters_) {
    if (param->name() == name) return *param;
  }
  throw InputError("model has no parameter named '" + name + "'");
}

void Model::initialize(uint64_t seed, Device device) {
  device_ = device;
  for (Parameter* param : parameters_) {
    if (device == Device::meta) {
      param->data = Tensor::meta(param->shape());
      continue;
    }
    param->data = Tensor::zeros(param->shape());
    // The stream is the parameter's name, so adding a parameter elsewhere changes nothing here.
    const uint64_t stream = stream_id(param->name().c_str());
    auto values = param->data.values();
    for (size_t i = 0; i < values.size(); ++i) {
      switch (param->init()) {
        case Init::normal: values[i] = static_cast<float>(standard_normal(seed, stream, i) * param->init_std()); break;
        case Init::zeros: values[i] = 0.0f; break;
        case Init::ones: values[i] = 1.0f; break;
      }
    }
  }
}

std::set<const Module*> select_modules(const Model& model, const std::vector<std::string>& names,
                                       const std::string& what) {
  std::vector<const Module*> modules = {&model.root()};
  for (size_t i = 0; i < modules.size(); ++i) {
    for (const auto& child : modules[i]->children()) modules.push_back(child.get());
  }
  std::set<const Module*> selected;
  for (const std::string& name : names) {
    bool found = false;
    for (const Module* module : modules) {
      if (module->type() != name && module->name() != name) continue;
      selected.insert(module);
      found = true;
    }
    if (found) continue;
    std::set<std::string> types;
    for (const Module* module : modules) types.insert(module->type());
    std::string listed;
    for (const std::string& type : types) listed += (listed.empty() ? "" : ", ") + type;
    throw InputError(what + ": '" + name + "' is neither a module type nor a dotted module name of this model (its "
                     "types: " + listed + "; `zero3 inspect MODEL` lists every module type with its names)");
  }
  return selected;
}

}  // namespace zero3
