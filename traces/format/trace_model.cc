// Building a module tree from a trace's module and parameter tables.
#include "traces/format/trace_model.h"

#include <unordered_map>

#include "core/base/errors.h"

namespace zero3 {

namespace {

// A module with no behaviour: its type and place in the tree are what the engine needs.
class ReplayModule : public Module {
 public:
  explicit ReplayModule(std::string type) : Module(std::move(type)) {}
  using Module::add_child;
  using Module::add_parameter;
};

std::string local_part(const std::string& name) {
  const size_t dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

}  // namespace

TraceModel::Tree TraceModel::build_tree(const Trace& trace) {
  Tree tree;
  std::vector<Module*>& modules = tree.modules;
  auto root = std::make_unique<ReplayModule>(trace.modules.at(0).type);
  modules.push_back(root.get());
  std::unordered_map<std::string, ReplayModule*> by_name = {{"", root.get()}};
  for (size_t i = 1; i < trace.modules.size(); ++i) {
    const std::string& name = trace.modules[i].name;
    const size_t dot = name.rfind('.');
    ReplayModule* parent = by_name.at(dot == std::string::npos ? "" : name.substr(0, dot));
    ReplayModule& child = parent->add_child(local_part(name), std::make_unique<ReplayModule>(trace.modules[i].type));
    by_name[name] = &child;
    modules.push_back(&child);
  }
  for (const TraceParam& param : trace.params) {
    auto* owner = static_cast<ReplayModule*>(modules.at(static_cast<size_t>(param.owner)));
    tree.params.push_back(&owner->add_parameter(local_part(param.name), param.shape, Init::zeros));
    tree.params.back()->set_requires_grad(param.requires_grad);
  }
  tree.root = std::move(root);
  return tree;
}

TraceModel::TraceModel(const Trace& trace) : TraceModel(trace, build_tree(trace)) {}

TraceModel::TraceModel(const Trace& trace, Tree tree)
    : Model(std::move(tree.root)), modules_(std::move(tree.modules)), params_(std::move(tree.params)) {
  finalize();
  trace_index_by_id_.assign(params_.size(), -1);
  for (size_t i = 0; i < params_.size(); ++i) {
    ZERO3_CHECK(params_[i]->name() == trace.params[i].name, "trace parameter " + trace.params[i].name + " named " +
                                                                 params_[i]->name() + " by the model");
    trace_index_by_id_[static_cast<size_t>(params_[i]->id())] = static_cast<int32_t>(i);
  }
}

Var TraceModel::loss(Context&, const Batch&) {
  throw InputError("a model built from a trace has no forward: `zero3 replay` drives its recorded events");
}

}  // namespace zero3
