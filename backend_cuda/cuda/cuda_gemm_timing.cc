// GEMMs timed alone on one GPU with CUDA events on the compute stream (cuda_gemm_timing.h).
#include "backend_cuda/cuda/cuda_gemm_timing.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <map>

#include "core/base/errors.h"
#include "core/base/rng.h"

namespace zero3 {

namespace {

// Seeded values every operand is tiled from: 4 MiB, uploaded once.
constexpr int64_t kSourceNumel = int64_t{1} << 20;
constexpr uint64_t kSourceSeed = 1;

// One CUDA event with timing on, destroyed with its owner.
class TimingEvent {
 public:
  TimingEvent() { check_cuda(cudaEventCreate(&event_), "cudaEventCreate (GEMM timing)"); }
  ~TimingEvent() { cudaEventDestroy(event_); }
  TimingEvent(const TimingEvent&) = delete;
  TimingEvent& operator=(const TimingEvent&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

struct GemmOperands {
  Tensor a, b, out;
};

// Values in [-1, 1) rather than zeros or one repeated value: the GEMMs then toggle as many bits as
// a training step's do, and a GPU that draws less power on quiet data would flatter the ceiling.
Tensor value_source(Kernels& kernels) {
  std::vector<float> values(static_cast<size_t>(kSourceNumel));
  const uint64_t stream = stream_id("gemm-timing");
  for (int64_t i = 0; i < kSourceNumel; ++i) {
    const double unit = uniform01(kSourceSeed, stream, static_cast<uint64_t>(i));
    values[static_cast<size_t>(i)] = static_cast<float>(2.0 * unit - 1.0);
  }
  return kernels.copy_to_device(Tensor::from_values({kSourceNumel}, values));
}

// A device tensor of `numel` elements of `dtype`, tiled from `source` (rounded when bf16).
Tensor filled_operand(Kernels& kernels, const Tensor& source, int64_t numel, DType dtype) {
  Tensor operand = Tensor::uninitialized({numel}, dtype, kernels.device());
  std::vector<CopySegment> segments;
  for (int64_t begin = 0; begin < numel; begin += kSourceNumel) {
    segments.push_back({.from = 0, .to = begin, .count = std::min(kSourceNumel, numel - begin)});
  }
  if (!segments.empty()) kernels.copy_segments(source, operand, segments);
  return operand;
}

std::map<GemmShape, GemmOperands> operands_for(Kernels& kernels, const std::vector<GemmShape>& gemms) {
  const Tensor source = value_source(kernels);
  std::map<GemmShape, GemmOperands> operands;
  for (const GemmShape& shape : gemms) {
    if (operands.contains(shape)) continue;
    operands.emplace(shape, GemmOperands{.a = filled_operand(kernels, source, shape.a_numel(), shape.a_dtype),
                                         .b = filled_operand(kernels, source, shape.b_numel(), shape.b_dtype),
                                         .out = filled_operand(kernels, source, shape.out_numel(), shape.out_dtype)});
  }
  return operands;
}

// Any beta but 0 costs the same (out is read either way); 1 keeps the accumulated values modest.
void run_pass(Kernels& kernels, const std::vector<GemmShape>& gemms, std::map<GemmShape, GemmOperands>& operands) {
  for (const GemmShape& shape : gemms) {
    GemmOperands& operand = operands.at(shape);
    kernels.matmul(operand.a, shape.trans_a, operand.b, shape.trans_b, operand.out, shape.batch, shape.m, shape.n,
                   shape.k, shape.b_shared, shape.accumulates ? 1.0f : 0.0f);
  }
}

}  // namespace

double time_gemms_seconds(CudaContext& context, Kernels& kernels, const std::vector<GemmShape>& gemms,
                          int repetitions) {
  ZERO3_CHECK(repetitions >= 1, "GEMM timing repeats its pass at least once, got " + std::to_string(repetitions));
  ZERO3_CHECK(kernels.device() == context.device(), "the kernels compute on the context's GPU");
  context.make_current();
  std::map<GemmShape, GemmOperands> operands = operands_for(kernels, gemms);
  run_pass(kernels, gemms, operands);  // untimed: cuBLAS picks its algorithms, the pool allocates scratch
  std::deque<TimingEvent> starts, stops;  // a deque constructs in place: events cannot be copied
  for (int repetition = 0; repetition < repetitions; ++repetition) {
    starts.emplace_back();
    stops.emplace_back();
    check_cuda(cudaEventRecord(starts.back().get(), context.compute_stream()), "cudaEventRecord (GEMM pass start)");
    run_pass(kernels, gemms, operands);
    check_cuda(cudaEventRecord(stops.back().get(), context.compute_stream()), "cudaEventRecord (GEMM pass end)");
  }
  // The one host wait, after every pass was enqueued: the passes run back to back, as in a step.
  check_cuda(cudaEventSynchronize(stops.back().get()), "cudaEventSynchronize (GEMM passes)");
  float best_ms = std::numeric_limits<float>::infinity();
  for (int repetition = 0; repetition < repetitions; ++repetition) {
    float pass_ms = 0.0f;
    const size_t index = static_cast<size_t>(repetition);
    check_cuda(cudaEventElapsedTime(&pass_ms, starts[index].get(), stops[index].get()),
               "cudaEventElapsedTime (GEMM pass)");
    best_ms = std::min(best_ms, pass_ms);
  }
  return static_cast<double>(best_ms) / 1e3;
}

}  // namespace zero3
