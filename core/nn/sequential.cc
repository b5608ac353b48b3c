// Sequential composition of layers.
#include "core/nn/sequential.h"

namespace zero3 {

Layer& Sequential::append(std::unique_ptr<Layer> layer) {
  Layer& added = add_child(std::to_string(layers_.size()), std::move(layer));
  layers_.push_back(&added);
  return added;
}

Var Sequential::forward(Context& ctx, const Var& x) {
  return ctx.invoke(*this, [&] {
    Var h = x;
    for (Layer* layer : layers_) h = layer->forward(ctx, h);
    return h;
  });
}

}  // namespace zero3
