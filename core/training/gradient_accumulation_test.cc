// Gradient accumulation (failure class 10, README.md "Design"): GAS = k over micro-batches of m examples equals one
// step over the k * m examples concatenated, to rounding — the 1/k scale applied exactly once,
// which the gradient norms show directly and the weights (under AdamW) hardly at all.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/tensor/kernels.h"
#include "core/models/model_zoo.h"
#include "core/training/replicated_trainer.h"

namespace zero3 {
namespace {

// Rows [first, first + count) of a batch-major tensor.
Tensor rows(const Tensor& whole, int64_t first, int64_t count) {
  Shape shape = whole.shape();
  const int64_t row_elements = shape[0] == 0 ? 0 : whole.numel() / shape[0];
  shape[0] = count;
  Tensor out = Tensor::zeros(shape);
  std::memcpy(out.data(), whole.data() + first * row_elements, sizeof(float) * static_cast<size_t>(count * row_elements));
  return out;
}

// Micro-step `micro` of a step gets the micro-th slice of the batch that `inner` gives the whole
// step at once, so k micro-steps see exactly the examples of one k-times-larger batch.
class SlicesOfOneBatch : public DataSource {
 public:
  SlicesOfOneBatch(const DataSource& inner, int64_t micro_steps) : inner_(inner), micro_steps_(micro_steps) {}
  Batch batch(int64_t step, int64_t micro, int rank, int world, int64_t batch_size) const override {
    const Batch whole = inner_.batch(step, 0, rank, world, batch_size * micro_steps_);
    return {rows(whole.inputs, micro * batch_size, batch_size), rows(whole.targets, micro * batch_size, batch_size)};
  }
  std::string description() const override { return inner_.description(); }

 private:
  const DataSource& inner_;
  int64_t micro_steps_;
};

struct Trained {
  std::vector<double> losses;
  std::vector<float> grad_norms;  // of the accumulated gradient, before clipping and the optimizer
  std::vector<OptimizerSlot> slots;
};

Trained train(const std::string& model, int64_t gas, int64_t micro_batch, bool slice_one_batch) {
  BuiltModel built = build_model(model, {.seed = 5, .data_file = ""});
  built.model->initialize(5);
  TrainConfig config;
  config.gradient_accumulation_steps = gas;
  config.micro_batch_size = micro_batch;
  const SlicesOfOneBatch sliced(*built.data, gas);
  const DataSource& data = slice_one_batch ? static_cast<const DataSource&>(sliced) : *built.data;
  ReplicatedTrainer trainer(*built.model, config, {.global_ranks = 1, .comm = nullptr});
  Context ctx(cpu_kernels());
  Trained out;
  for (int64_t step = 0; step < 3; ++step) {
    const StepStats stats = trainer.train_step(ctx, data, step);
    out.losses.push_back(stats.loss);
    out.grad_norms.push_back(stats.grad_norm);
  }
  out.slots = trainer.slots();
  return out;
}

TEST(GradientAccumulation, KMicroStepsOfMExamplesEqualOneStepOverTheKTimesMExamples) {
  for (const std::string model : {"gpt-tiny", "mlp-tiny", "classifier-tiny"}) {
    const Trained accumulated = train(model, 3, 2, /*slice_one_batch=*/true);
    const Trained whole = train(model, 1, 6, /*slice_one_batch=*/false);
    for (size_t step = 0; step < whole.losses.size(); ++step) {
      EXPECT_NEAR(accumulated.losses[step], whole.losses[step], 1e-5) << model << " step " << step;
      // AdamW's update barely depends on a uniform gradient scale, so the weights alone would miss a
      // wrong 1/k; the accumulated gradient's norm scales with it (k times off for a missing 1/k).
      EXPECT_NEAR(accumulated.grad_norms[step] / whole.grad_norms[step], 1.0, 1e-4) << model << " step " << step;
      EXPECT_GT(whole.grad_norms[step], 0.0f) << model << " step " << step;
    }
    double max_diff = 0.0;
    double max_change = 0.0;  // how far training moved the weights, so that the comparison means something
    BuiltModel initial = build_model(model, {.seed = 5, .data_file = ""});
    initial.model->initialize(5);
    for (size_t id = 0; id < whole.slots.size(); ++id) {
      const auto a = accumulated.slots[id].master.values();
      const auto b = whole.slots[id].master.values();
      const auto start = initial.model->parameters()[id]->data.values();
      for (size_t i = 0; i < a.size(); ++i) {
        max_diff = std::max(max_diff, static_cast<double>(std::fabs(a[i] - b[i])));
        max_change = std::max(max_change, static_cast<double>(std::fabs(b[i] - start[i])));
      }
    }
    EXPECT_LT(max_diff, 1e-5) << model;
    EXPECT_GT(max_change, 100 * max_diff + 1e-4) << model << ": training must move the weights well beyond rounding";
  }
}

}  // namespace
}  // namespace zero3
