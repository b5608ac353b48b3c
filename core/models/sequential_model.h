// SequentialModel: a stack of layers on feature vectors x [B, input_width] with an mse loss
// (against a teacher's values [B, output_width]) or a cross-entropy loss (output_width classes,
// integer targets [B]). Built from the "sequential" kind of model spec (sequential_spec.h).
// A token model (the spec's "vocab") reads token ids [B, context] instead: its first layer, the
// embedding, turns them into one row per token, and the loss is next-token cross-entropy over the
// B*context rows (targets [B, context], output width = vocab).
#pragma once
#include <memory>

#include "core/nn/model.h"
#include "core/nn/sequential.h"

namespace zero3 {

enum class SequentialLoss : uint8_t { mse, cross_entropy };

// vocab 0: a model on feature vectors.
struct TokenShape {
  int64_t vocab = 0;
  int64_t context = 0;
};
const char* sequential_loss_name(SequentialLoss loss);

// The root module: holds the stack as child "layers", so module names mirror the spec's paths.
class SequentialNet : public Module {
 public:
  explicit SequentialNet(std::unique_ptr<Sequential> layers);
  Sequential& layers() const { return layers_; }
  Var forward(Context& ctx, const Var& x);

 private:
  Sequential& layers_;
};

class SequentialModel : public Model {
 public:
  SequentialModel(std::unique_ptr<Sequential> layers, SequentialLoss loss, int64_t input_width, int64_t output_width,
                  TokenShape tokens = {});

  SequentialNet& net() { return static_cast<SequentialNet&>(root()); }
  SequentialLoss loss_kind() const { return loss_; }
  int64_t input_width() const { return input_width_; }
  int64_t output_width() const { return output_width_; }
  const TokenShape& tokens() const { return tokens_; }
  Var loss(Context& ctx, const Batch& batch) override;

 private:
  SequentialLoss loss_;
  int64_t input_width_;
  int64_t output_width_;
  TokenShape tokens_;
};

}  // namespace zero3
