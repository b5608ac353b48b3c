// Sequential model and its loss.
#include "core/models/sequential_model.h"

namespace zero3 {

const char* sequential_loss_name(SequentialLoss loss) {
  return loss == SequentialLoss::mse ? "mse" : "cross_entropy";
}

SequentialNet::SequentialNet(std::unique_ptr<Sequential> layers)
    : Module("sequential_model"), layers_(add_child("layers", std::move(layers))) {}

Var SequentialNet::forward(Context& ctx, const Var& x) {
  return ctx.invoke(*this, [&] { return layers_.forward(ctx, x); });
}

SequentialModel::SequentialModel(std::unique_ptr<Sequential> layers, SequentialLoss loss, int64_t input_width,
                                 int64_t output_width, TokenShape tokens)
    : Model(std::make_unique<SequentialNet>(std::move(layers))), loss_(loss), input_width_(input_width),
      output_width_(output_width), tokens_(tokens) {
  finalize();
}

Var SequentialModel::loss(Context& ctx, const Batch& batch) {
  if (tokens_.vocab > 0) {
    // The embedding reads the ids on the host (it checks them) and moves them itself.
    const Var logits = net().forward(ctx, constant(batch.inputs));
    return cross_entropy(ctx, logits, batch.targets.reshape({batch.targets.numel()}));
  }
  // The data source made the inputs on the host; they move to the device once per micro-step.
  const Var out = net().forward(ctx, constant(ctx.kernels().to_device(batch.inputs)));
  if (loss_ == SequentialLoss::mse) return mse(ctx, out, batch.targets);
  return cross_entropy(ctx, out, batch.targets);
}

}  // namespace zero3
