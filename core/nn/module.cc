// Module tree construction.
#include "core/nn/module.h"

#include "core/base/errors.h"

namespace zero3 {

Module::Module(std::string type) : type_(std::move(type)) {}

Parameter& Module::add_parameter(const std::string& local_name, const Shape& shape, Init init, float init_std) {
  for (const auto& existing : parameters_) {
    ZERO3_CHECK(existing->local_name() != local_name, "duplicate parameter '" + local_name + "' in " + type_);
  }
  parameters_.push_back(std::make_unique<Parameter>(this, local_name, shape, init, init_std));
  return *parameters_.back();
}

void Module::adopt(const std::string& local_name, std::unique_ptr<Module> child) {
  for (const auto& existing : children_) {
    ZERO3_CHECK(existing->local_name_ != local_name, "duplicate child '" + local_name + "' in " + type_);
  }
  child->local_name_ = local_name;
  child->parent_ = this;
  children_.push_back(std::move(child));
}

std::vector<Parameter*> Module::all_parameters() const {
  std::vector<Parameter*> out;
  for (const auto& param : parameters_) out.push_back(param.get());
  for (const auto& child : children_) {
    for (Parameter* param : child->all_parameters()) out.push_back(param);
  }
  return out;
}

std::string Module::display_name() const { return name_.empty() ? "<root>" : name_; }

}  // namespace zero3
