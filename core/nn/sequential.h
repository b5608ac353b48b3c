// Sequential: layers applied in order, named "0", "1", ... so that module names mirror the JSON
// paths of a model spec (/layers/3 is module "layers.3").
#pragma once
#include <memory>
#include <vector>

#include "core/nn/layer.h"

namespace zero3 {

class Sequential : public Layer {
 public:
  Sequential() : Layer("sequential") {}
  Layer& append(std::unique_ptr<Layer> layer);
  int64_t size() const { return static_cast<int64_t>(layers_.size()); }
  Layer& at(int64_t index) const { return *layers_.at(static_cast<size_t>(index)); }
  Var forward(Context& ctx, const Var& x) override;

 private:
  std::vector<Layer*> layers_;
};

}  // namespace zero3
