// Teacher-labelled feature data.
#include "core/models/teacher_data.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/base/errors.h"
#include "core/base/rng.h"

namespace zero3 {

namespace {

std::vector<double> normals(uint64_t seed, const char* stream, int64_t count, double scale) {
  std::vector<double> values(static_cast<size_t>(count));
  for (size_t i = 0; i < values.size(); ++i) values[i] = standard_normal(seed, stream_id(stream), i) * scale;
  return values;
}

}  // namespace

TeacherData::TeacherData(uint64_t seed, int64_t input_width, int64_t output_width, SequentialLoss loss)
    : seed_(seed), input_width_(input_width), output_width_(output_width), loss_(loss) {
  ZERO3_CHECK(input_width >= 0 && output_width >= 1, "teacher needs output width >= 1");
}

void TeacherData::draw_weights() const {
  std::call_once(weights_drawn_, [this] {
    w1_ = normals(seed_, "teacher.w1", kHidden * input_width_,
                  1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(input_width_, 1))));
    b1_ = normals(seed_, "teacher.b1", kHidden, 0.5);
    w2_ = normals(seed_, "teacher.w2", output_width_ * kHidden, 1.0 / std::sqrt(static_cast<double>(kHidden)));
  });
}

std::vector<double> TeacherData::teach(const float* input) const {
  draw_weights();
  std::vector<double> hidden(static_cast<size_t>(kHidden));
  for (int64_t h = 0; h < kHidden; ++h) {
    double sum = b1_[static_cast<size_t>(h)];
    for (int64_t i = 0; i < input_width_; ++i) sum += w1_[static_cast<size_t>(h * input_width_ + i)] * input[i];
    hidden[static_cast<size_t>(h)] = std::tanh(sum);
  }
  std::vector<double> out(static_cast<size_t>(output_width_));
  for (int64_t o = 0; o < output_width_; ++o) {
    double sum = 0.0;
    for (int64_t h = 0; h < kHidden; ++h) sum += w2_[static_cast<size_t>(o * kHidden + h)] * hidden[static_cast<size_t>(h)];
    out[static_cast<size_t>(o)] = sum;
  }
  return out;
}

Batch TeacherData::batch(int64_t step, int64_t micro, int rank, int world, int64_t batch_size) const {
  ZERO3_CHECK(rank >= 0 && rank < world && batch_size >= 0, "batch for rank " + std::to_string(rank) + " of " +
                                                                std::to_string(world));
  const uint64_t stream = mix64(stream_id("teacher.inputs"), static_cast<uint64_t>(step), static_cast<uint64_t>(micro));
  Tensor inputs = Tensor::zeros({batch_size, input_width_});
  Tensor targets = loss_ == SequentialLoss::mse ? Tensor::zeros({batch_size, output_width_}) : Tensor::zeros({batch_size});
  for (int64_t b = 0; b < batch_size; ++b) {
    const auto example = static_cast<uint64_t>(rank * batch_size + b);
    float* row = inputs.data() + b * input_width_;
    for (int64_t i = 0; i < input_width_; ++i) {
      row[i] = static_cast<float>(standard_normal(seed_, stream, example * static_cast<uint64_t>(input_width_) + static_cast<uint64_t>(i)));
    }
    const std::vector<double> out = teach(row);
    if (loss_ == SequentialLoss::cross_entropy) {
      targets.data()[b] = static_cast<float>(std::max_element(out.begin(), out.end()) - out.begin());
      continue;
    }
    for (int64_t o = 0; o < output_width_; ++o) targets.data()[b * output_width_ + o] = static_cast<float>(out[static_cast<size_t>(o)]);
  }
  return {inputs, targets};
}

std::string TeacherData::description() const {
  std::ostringstream out;
  out << "teacher network " << input_width_ << " -> " << kHidden << " (tanh) -> " << output_width_ << ", "
      << (loss_ == SequentialLoss::mse ? "mse targets" : "class targets") << ", seed " << seed_;
  return out.str();
}

}  // namespace zero3
