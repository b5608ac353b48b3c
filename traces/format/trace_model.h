// TraceModel: a Model whose module tree and parameters come from a trace, so the ZeRO-3 engine can
// shard it and a replay driver can fire its hooks. It has no forward of its own: replay drives
// the recorded events (loss() says so loudly). Initialise it on Device::meta for shape replay.
//
//   TraceModel model(trace);
//   model.initialize(0, Device::meta);
//   Module& attn = model.module(trace_module_index);
#pragma once
#include <memory>
#include <vector>

#include "core/nn/model.h"
#include "traces/format/trace.h"

namespace zero3 {

class TraceModel : public Model {
 public:
  explicit TraceModel(const Trace& trace);

  Module& module(int32_t trace_index) const { return *modules_[static_cast<size_t>(trace_index)]; }
  Parameter& param(int32_t trace_index) const { return *params_[static_cast<size_t>(trace_index)]; }
  // Trace index of a parameter by its engine id.
  int32_t trace_index_of(const Parameter& param) const { return trace_index_by_id_[static_cast<size_t>(param.id())]; }

  Var loss(Context& ctx, const Batch& batch) override;

 private:
  struct Tree {
    std::unique_ptr<Module> root;
    std::vector<Module*> modules;
    std::vector<Parameter*> params;
  };
  static Tree build_tree(const Trace& trace);
  TraceModel(const Trace& trace, Tree tree);

  std::vector<Module*> modules_;
  std::vector<Parameter*> params_;
  std::vector<int32_t> trace_index_by_id_;
};

}  // namespace zero3
