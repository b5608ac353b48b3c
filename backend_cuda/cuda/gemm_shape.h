// The shape of one Kernels::matmul call, and a log of the calls a rank's CUDA kernels made while it
// was recording: what `zero3 bench step --backend cuda` replays alone to find the ceiling its GEMMs
// set (tools/bench/cuda_step_bench.h). Plain C++, no CUDA type, so tools/ includes it in every build.
//
//   rank.gemm_shapes.start();                 // the kernels append every matmul from here on
//   ... one training step ...
//   rank.gemm_shapes.stop();
//   double seconds = rank.time_gemms_seconds(rank.gemm_shapes.shapes(), 5);
#pragma once
#include <compare>
#include <cstdint>
#include <string>
#include <vector>

#include "core/base/errors.h"
#include "core/tensor/dtype.h"

namespace zero3 {

// Kernels::matmul's arguments less the data: out[b] = beta * out[b] + op(a[b]) @ op(b[b]).
struct GemmShape {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false, b_shared = false;
  DType a_dtype = DType::f32, b_dtype = DType::f32, out_dtype = DType::f32;
  bool accumulates = false;  // beta != 0: out is read as well as written

  auto operator<=>(const GemmShape&) const = default;

  int64_t a_numel() const { return batch * m * k; }
  int64_t b_numel() const { return (b_shared ? 1 : batch) * k * n; }
  int64_t out_numel() const { return batch * m * n; }
  // Multiply-adds counted as two FLOPs each, as MFU counts them.
  double flops() const { return 2.0 * static_cast<double>(batch) * static_cast<double>(m) * static_cast<double>(n) *
                                static_cast<double>(k); }
  // The logical product and how it is stored, e.g. "12 x (64x32 @ 32x64) b^T bf16*bf16->bf16".
  std::string describe() const {
    std::string text = std::to_string(batch) + " x (" + std::to_string(m) + "x" + std::to_string(k) + " @ " +
                       std::to_string(k) + "x" + std::to_string(n) + ")";
    if (trans_a) text += " a^T";
    if (trans_b) text += " b^T";
    if (b_shared) text += " b-shared";
    text += std::string(" ") + dtype_name(a_dtype) + "*" + dtype_name(b_dtype) + "->" + dtype_name(out_dtype);
    if (accumulates) text += " +=";
    return text;
  }
};

// The matmul calls of one rank's kernels between start() and stop(), in call order. One rank's
// kernels run on that rank's host thread only, so the log needs no lock.
class GemmShapeLog {
 public:
  void start() {
    ZERO3_CHECK(!recording_, "the GEMM shape log is started once before it is stopped");
    shapes_.clear();
    recording_ = true;
  }
  void stop() {
    ZERO3_CHECK(recording_, "the GEMM shape log is stopped only while recording");
    recording_ = false;
  }
  bool recording() const { return recording_; }
  void record(const GemmShape& shape) {
    if (recording_) shapes_.push_back(shape);
  }
  const std::vector<GemmShape>& shapes() const { return shapes_; }

 private:
  bool recording_ = false;
  std::vector<GemmShape> shapes_;
};

}  // namespace zero3
