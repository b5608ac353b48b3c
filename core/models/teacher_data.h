// TeacherData: random inputs x ~ N(0, 1) [B, input_width] labelled by a fixed random teacher
// network (input_width -> 32 tanh -> output_width, weights from the seed): its outputs are the mse
// targets [B, output_width], or their argmax the class targets [B] for cross-entropy.
//
// The teacher's weights are drawn on the first batch, not at construction: building a model (as
// `zero3 inspect` does) must not allocate kHidden x input_width doubles for a huge spec.
#pragma once
#include <mutex>
#include <vector>

#include "core/models/data.h"
#include "core/models/sequential_model.h"

namespace zero3 {

class TeacherData : public DataSource {
 public:
  static constexpr int64_t kHidden = 32;

  TeacherData(uint64_t seed, int64_t input_width, int64_t output_width, SequentialLoss loss);

  Batch batch(int64_t step, int64_t micro, int rank, int world, int64_t batch_size) const override;
  std::string description() const override;
  // The teacher's outputs for one input row (input_width values) -> output_width values.
  std::vector<double> teach(const float* input) const;

 private:
  uint64_t seed_;
  int64_t input_width_;
  int64_t output_width_;
  SequentialLoss loss_;
  void draw_weights() const;

  mutable std::once_flag weights_drawn_;
  mutable std::vector<double> w1_, b1_, w2_;  // [hidden, in], [hidden], [out, hidden]
};

}  // namespace zero3
