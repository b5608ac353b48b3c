// Every CUDA kernel against the CPU reference kernels on the same inputs, f32 and bf16 in every mix
// the reference accepts, zero-sized and broadcast shapes included; each case prints its max
// difference and #wrong. Needs a GPU: without one every test skips, saying why, and nothing here
// touches CUDA before a test runs (test discovery runs this binary on machines without a GPU).
//
// Tolerances are abs + |ref| * eps. Single IEEE operations per element (casts, copies, add, mul,
// relu, scaling) and the index-ordered scatter sums must match exactly. Formulas whose
// multiply-adds nvcc fuses unless built with --fmad=false (GELU, AdamW, the cross-entropy
// gradient) get 1e-6 + 1e-5 relative: a fused 1 - t*t near t = 1 moves GELU's derivative by up to
// ~1e-6. Double sums taken in another order than the reference's get 1e-6 + 1e-6 relative (their
// float results differ by an ulp at most); GEMMs 1e-4 + 1e-4 relative (cuBLAS sums the k products
// in its own order, k = 9 here). A bf16 output adds one bf16 ulp (2^-7 relative): a float a hair
// away from the reference's can round to the neighbouring bf16 value.
#include "backend_cuda/cuda/cuda_kernels.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "backend_cuda/cuda/cuda_context.h"
#include "backend_cuda/cuda/cuda_gemm_timing.h"
#include "backend_cuda/cuda/cuda_memory.h"
#include "backend_cuda/cuda/kernel_test_data.h"
#include "core/base/rng.h"

namespace zero3 {
namespace {

constexpr uint64_t kSeed = 4242;
const std::vector<DType> kDtypes = {DType::f32, DType::bf16};

struct Tolerance {
  float abs = 0.0f;
  float eps = 0.0f;
};
constexpr Tolerance kExact{};
constexpr Tolerance kFormula{1e-6f, 1e-5f};
constexpr Tolerance kReordered{1e-6f, 1e-6f};
constexpr Tolerance kGemm{1e-4f, 1e-4f};

Tolerance for_output(DType dtype, Tolerance f32) {
  if (dtype == DType::f32) return f32;
  return {std::max(f32.abs, 1e-6f), f32.eps + 1.0f / 128.0f};
}

// Edge values first when asked, then uniform in [-spread, spread] from (kSeed, stream, index).
Tensor host_tensor(const Shape& shape, DType dtype, uint64_t stream, float spread = 2.0f, bool edges = false) {
  return seeded_test_tensor(kSeed, shape, dtype, stream, spread, edges);
}

// Integer-valued floats in [0, bound), exact in bf16 too (bound <= 256).
Tensor host_indices(int64_t count, int64_t bound, DType dtype, uint64_t stream) {
  std::vector<float> values(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) values[i] = static_cast<float>(mix64(kSeed, stream, i) % bound);
  return Tensor::from_values({count}, values, dtype);
}

const char* op_name(BinaryOp op) { return op == BinaryOp::add ? "add" : op == BinaryOp::sub ? "sub" : "mul"; }

std::string dtypes_name(std::initializer_list<DType> dtypes) {
  std::string name;
  for (DType dtype : dtypes) name += std::string(name.empty() ? "" : "/") + dtype_name(dtype);
  return name;
}

class CudaKernelsTest : public ::testing::Test {
 protected:
  // One context for the suite, made when the first test starts, never at static initialisation.
  static void SetUpTestSuite() {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess || count == 0) {
      skip_reason_ = status != cudaSuccess ? std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(status)
                                           : std::string("no CUDA device is visible");
      return;
    }
    context_ = std::make_unique<CudaContext>(0);
    register_cuda_memory();
    kernels_ = make_cuda_kernels(*context_);
  }
  static void TearDownTestSuite() {
    kernels_.reset();
    context_.reset();
  }
  void SetUp() override {
    if (!kernels_) GTEST_SKIP() << "no usable CUDA device: " << skip_reason_;
  }

  static Kernels& gpu() { return *kernels_; }
  static Tensor on_gpu(const Tensor& host) { return kernels_->copy_to_device(host); }
  static Tensor gpu_zeros(const Shape& shape, DType dtype) { return Tensor::zeros(shape, dtype, kernels_->device()); }

  // Downloads `device_result` and compares it with the reference's `want`; prints the case's line.
  static void expect_close(const std::string& name, const Tensor& device_result, const Tensor& want,
                           Tolerance tolerance) {
    const std::vector<float> got = kernels_->to_host(device_result).to_floats(), expected = want.to_floats();
    ASSERT_EQ(got.size(), expected.size()) << name;
    float max_diff = 0.0f;
    int wrong = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const bool same = got[i] == expected[i] || (std::isnan(got[i]) && std::isnan(expected[i]));
      const float diff = same ? 0.0f : std::abs(got[i] - expected[i]);
      if (!same && !(diff <= tolerance.abs + std::abs(expected[i]) * tolerance.eps)) {
        if (wrong++ < 4) ADD_FAILURE() << name << " element " << i << ": got " << got[i] << " want " << expected[i];
      }
      max_diff = std::isnan(diff) ? diff : std::max(max_diff, diff);
    }
    std::cout << name << ": max_diff=" << max_diff << " #wrong=" << wrong << " (tolerance " << tolerance.abs
              << " + |ref|*" << tolerance.eps << ")\n";
    EXPECT_EQ(wrong, 0) << name;
  }

  static inline std::unique_ptr<CudaContext> context_;
  static inline std::unique_ptr<Kernels> kernels_;
  static inline std::string skip_reason_;
};

TEST_F(CudaKernelsTest, BinaryBroadcastsLikeTheReferenceForEveryDtypeMix) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 3}, {2, 3}}, {{64, 48}, {48}}, {{4, 1, 3}, {2, 1}}, {{2, 3}, {}},           {{}, {2, 3}},
      {{0, 3}, {3}},    {{3, 1}, {0}},    {{2, 3, 4, 5}, {3, 1, 5}}, {{5, 1, 1, 2}, {1, 4, 3, 1}}};
  for (const auto& [shape_a, shape_b] : shapes) {
    const Shape out_shape = broadcast_shapes(shape_a, shape_b);
    for (BinaryOp op : {BinaryOp::add, BinaryOp::sub, BinaryOp::mul}) {
      for (DType da : kDtypes) for (DType db : kDtypes) for (DType dout : kDtypes) {
        const Tensor a = host_tensor(shape_a, da, 1, 2.0f, true), b = host_tensor(shape_b, db, 2);
        Tensor want = Tensor::zeros(out_shape, dout), got = gpu_zeros(out_shape, dout);
        cpu_kernels().binary(op, a, b, want);
        gpu().binary(op, on_gpu(a), on_gpu(b), got);
        expect_close(std::string("binary ") + op_name(op) + " " + shape_str(shape_a) + " " +
                         shape_str(shape_b) + " " + dtypes_name({da, db, dout}),
                     got, want, kExact);
      }
    }
  }
}

TEST_F(CudaKernelsTest, SumToShapeSumsBroadcastDimsLikeTheReference) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{4, 2, 5, 3}, {2, 1, 3}}, {{4096, 3}, {3}}, {{3, 5000}, {3, 1}}, {{300, 70}, {1, 1}}, {{0, 3}, {3}},
      {{1, 2, 3}, {2, 3}},       {{7}, {1}},       {{0}, {1}},          {{5, 0}, {5, 0}}};
  for (const auto& [in_shape, out_shape] : cases) {
    for (DType din : kDtypes) for (DType dout : kDtypes) {
      const Tensor in = host_tensor(in_shape, din, 3, 4.0f);
      Tensor want = Tensor::zeros(out_shape, dout), got = gpu_zeros(out_shape, dout);
      cpu_kernels().sum_to_shape(in, want);
      gpu().sum_to_shape(on_gpu(in), got);
      expect_close("sum_to_shape " + shape_str(in_shape) + " -> " + shape_str(out_shape) + " " +
                       dtypes_name({din, dout}),
                   got, want, for_output(dout, kReordered));
    }
  }
}

TEST_F(CudaKernelsTest, UnaryAndItsBackwardMatchTheReference) {
  for (UnaryOp op : {UnaryOp::gelu, UnaryOp::relu, UnaryOp::silu}) {
    for (DType din : kDtypes) for (DType dout : kDtypes) {
      const Tensor in = host_tensor({1000}, din, 4, 6.0f, true), grad = host_tensor({1000}, din, 5, 1.0f, true);
      Tensor want = Tensor::zeros({1000}, dout), want_grad = Tensor::zeros({1000}, dout);
      Tensor got = gpu_zeros({1000}, dout), got_grad = gpu_zeros({1000}, dout);
      cpu_kernels().unary(op, in, want);
      cpu_kernels().unary_backward(op, in, grad, want_grad);
      gpu().unary(op, on_gpu(in), got);
      gpu().unary_backward(op, on_gpu(in), on_gpu(grad), got_grad);
      // SiLU's double exp is the device's own: a formula, as GELU's tanh.
      const Tolerance tolerance = for_output(dout, op == UnaryOp::relu ? kExact : kFormula);
      const char* op_name = op == UnaryOp::gelu ? "gelu " : op == UnaryOp::relu ? "relu " : "silu ";
      const std::string name = std::string(op_name) + dtypes_name({din, dout});
      expect_close(name, got, want, tolerance);
      expect_close(name + " backward", got_grad, want_grad, tolerance);
    }
  }
}

TEST_F(CudaKernelsTest, ScalingFillsAndAccumulationMatchTheReference) {
  for (DType din : kDtypes) for (DType dout : kDtypes) {
    const std::string name = dtypes_name({din, dout});
    const Tensor in = host_tensor({777}, din, 6, 3.0f, true), seed = Tensor::scalar(3.3f, din);
    Tensor want = Tensor::zeros({777}, dout), got = gpu_zeros({777}, dout);
    cpu_kernels().scale(in, 0.37f, want);
    gpu().scale(on_gpu(in), 0.37f, got);
    expect_close("scale " + name, got, want, kExact);
    cpu_kernels().scale_by_scalar(in, seed, 0.7f, 3.0f, want);
    gpu().scale_by_scalar(on_gpu(in), on_gpu(seed), 0.7f, 3.0f, got);
    expect_close("scale_by_scalar " + name, got, want, kExact);
    cpu_kernels().fill_from_scalar(want, seed, 0.7f, 3.0f);
    gpu().fill_from_scalar(got, on_gpu(seed), 0.7f, 3.0f);
    expect_close("fill_from_scalar " + name, got, want, kExact);
    cpu_kernels().fill(want, 1.01f);
    gpu().fill(got, 1.01f);
    cpu_kernels().fill_range(want, 100, 50, -2.5f);
    gpu().fill_range(got, 100, 50, -2.5f);
    gpu().fill_range(got, 777, 0, 9.0f);
    expect_close("fill and fill_range " + name, got, want, kExact);
    Tensor accumulator = host_tensor({777}, dout, 7);
    Tensor got_accumulator = on_gpu(accumulator);
    cpu_kernels().add_into(accumulator, in);
    gpu().add_into(got_accumulator, on_gpu(in));
    expect_close("add_into " + name, got_accumulator, accumulator, kExact);
  }
}

TEST_F(CudaKernelsTest, CopiesCastAndMoveSegmentsLikeTheReference) {
  Tensor bf16_source = host_tensor({40}, DType::bf16, 8, 2.0f, true);
  bf16_source.bf16_data()[39] = 0x7f81;  // a signalling NaN, which a segment copy keeps as it is
  for (DType din : kDtypes) for (DType dout : kDtypes) {
    const std::string name = dtypes_name({din, dout});
    const Tensor in = din == DType::bf16 ? bf16_source : host_tensor({40}, din, 9, 2.0f, true);
    Tensor want = Tensor::zeros({40}, dout), got = gpu_zeros({40}, dout);
    cpu_kernels().copy(in, want);
    gpu().copy(on_gpu(in), got);
    expect_close("copy " + name, got, want, kExact);
    if (din == DType::bf16 && dout == DType::bf16) {
      EXPECT_EQ(gpu().to_host(got).bf16_data()[39], 0x7f81) << "bf16 copy changed a NaN's bits";
    }
    const std::vector<CopySegment> segments = {
        {.from = 0, .to = 30, .count = 5}, {.from = 20, .to = 0, .count = 20}, {.from = 3, .to = 25, .count = 0},
        {.from = 35, .to = 20, .count = 5}};
    Tensor want_segments = Tensor::zeros({40}, dout), got_segments = gpu_zeros({40}, dout);
    cpu_kernels().copy_segments(in, want_segments, segments);
    gpu().copy_segments(on_gpu(in), got_segments, segments);
    expect_close("copy_segments " + name, got_segments, want_segments, kExact);
  }
}

TEST_F(CudaKernelsTest, MatmulMatchesTheReferenceForTransposesSharingBetaAndDtypes) {
  const int64_t batch = 3, m = 5, n = 7, k = 9;
  for (bool trans_a : {false, true}) for (bool trans_b : {false, true}) for (bool shared : {false, true}) {
    for (float beta : {0.0f, 0.5f}) for (DType da : kDtypes) for (DType db : kDtypes) for (DType dout : kDtypes) {
      const Tensor a = host_tensor(trans_a ? Shape{batch, k, m} : Shape{batch, m, k}, da, 10);
      const Shape b_shape = trans_b ? Shape{n, k} : Shape{k, n};
      const Tensor b = host_tensor(shared ? b_shape : Shape{batch, b_shape[0], b_shape[1]}, db, 11);
      Tensor want = host_tensor({batch, m, n}, dout, 12);
      Tensor got = on_gpu(want);
      cpu_kernels().matmul(a, trans_a, b, trans_b, want, batch, m, n, k, shared, beta);
      gpu().matmul(on_gpu(a), trans_a, on_gpu(b), trans_b, got, batch, m, n, k, shared, beta);
      expect_close(std::string("matmul") + (trans_a ? " a^T" : "") + (trans_b ? " b^T" : "") +
                       (shared ? " shared" : "") + " beta=" + std::to_string(beta) + " " + dtypes_name({da, db, dout}),
                   got, want, for_output(dout, kGemm));
    }
  }
}

TEST_F(CudaKernelsTest, MatmulWithAnEmptyInnerDimOnlyScalesAndEmptyOutputsAreSkipped) {
  for (DType dout : kDtypes) for (float beta : {0.0f, 2.0f}) {
    Tensor want = host_tensor({2, 3}, dout, 13, 1.0f, true);
    Tensor got = on_gpu(want);
    cpu_kernels().matmul(Tensor::zeros({2, 0}), false, Tensor::zeros({0, 3}), false, want, 1, 2, 3, 0, true, beta);
    gpu().matmul(gpu_zeros({2, 0}, DType::f32), false, gpu_zeros({0, 3}, DType::f32), false, got, 1, 2, 3, 0, true,
                 beta);
    expect_close("matmul k=0 beta=" + std::to_string(beta) + " " + dtype_name(dout), got, want, kExact);
  }
  Tensor empty = gpu_zeros({0, 3}, DType::f32);
  gpu().matmul(gpu_zeros({0, 4}, DType::f32), false, gpu_zeros({4, 3}, DType::f32), false, empty, 1, 0, 3, 4, true,
               0.0f);
}

// The log `zero3 bench step --backend cuda` replays: every matmul, with its dtypes as called (before
// any widening) and whether beta reads out; then the logged GEMMs timed alone through the same kernels.
TEST_F(CudaKernelsTest, MatmulCallsReachTheGemmShapeLogOnlyWhileItRecordsAndTimeAlone) {
  GemmShapeLog log;
  struct Detach {
    ~Detach() { attach_gemm_shape_log(gpu(), nullptr); }  // later tests' matmuls must not reach this log
  } detach;
  attach_gemm_shape_log(gpu(), &log);
  const Tensor a = on_gpu(host_tensor({2, 3, 4}, DType::bf16, 14));
  const Tensor b = on_gpu(host_tensor({5, 4}, DType::f32, 15));
  Tensor out = gpu_zeros({2, 3, 5}, DType::f32);
  gpu().matmul(a, false, b, true, out, 2, 3, 5, 4, true, 0.0f);
  log.start();
  gpu().matmul(a, false, b, true, out, 2, 3, 5, 4, true, 0.5f);
  log.stop();
  gpu().matmul(a, false, b, true, out, 2, 3, 5, 4, true, 0.0f);
  const GemmShape want{.batch = 2, .m = 3, .n = 5, .k = 4, .trans_b = true, .b_shared = true, .a_dtype = DType::bf16,
                       .b_dtype = DType::f32, .out_dtype = DType::f32, .accumulates = true};
  ASSERT_EQ(log.shapes().size(), 1u);
  EXPECT_EQ(log.shapes()[0], want) << "logged " << log.shapes()[0].describe() << ", want " << want.describe();
  const double seconds = time_gemms_seconds(*context_, gpu(), {want, want}, 3);
  std::cout << "two logged GEMMs alone: " << seconds * 1e6 << " us a pass\n";
  EXPECT_GT(seconds, 0.0);
  EXPECT_LT(seconds, 1.0);
  EXPECT_EQ(log.shapes().size(), 1u) << "the timing's own matmuls were logged while not recording";
}

TEST_F(CudaKernelsTest, LayerNormForwardAndBackwardMatchTheReference) {
  const std::vector<std::pair<int64_t, int64_t>> sizes = {{5, 7}, {3, 1}, {2, 0}, {0, 4}, {33, 300}, {1100, 8}};
  for (const auto& [rows, cols] : sizes) {
    for (DType data : kDtypes) for (DType parameters : kDtypes) {
      const std::string name = "layer_norm [" + std::to_string(rows) + "," + std::to_string(cols) + "] " +
                               dtypes_name({data, parameters});
      const Tensor x = host_tensor({rows, cols}, data, 14, 3.0f), gamma = host_tensor({cols}, parameters, 15);
      const Tensor beta = host_tensor({cols}, parameters, 16), grad_out = host_tensor({rows, cols}, data, 17);
      Tensor out = Tensor::zeros({rows, cols}, data), mean = Tensor::zeros({rows}, parameters);
      Tensor rstd = Tensor::zeros({rows}, parameters);
      cpu_kernels().layer_norm_forward(x, gamma, beta, 1e-5f, out, mean, rstd);
      Tensor got_out = gpu_zeros({rows, cols}, data), got_mean = gpu_zeros({rows}, parameters);
      Tensor got_rstd = gpu_zeros({rows}, parameters);
      gpu().layer_norm_forward(on_gpu(x), on_gpu(gamma), on_gpu(beta), 1e-5f, got_out, got_mean, got_rstd);
      expect_close(name + " out", got_out, out, for_output(data, kReordered));
      expect_close(name + " mean", got_mean, mean, for_output(parameters, kReordered));
      expect_close(name + " rstd", got_rstd, rstd, for_output(parameters, kReordered));
      // The backward takes the reference's statistics, so both sides start from the same inputs.
      Tensor grad_x = Tensor::zeros({rows, cols}, data), grad_gamma = Tensor::zeros({cols}, parameters);
      Tensor grad_beta = Tensor::zeros({cols}, parameters);
      cpu_kernels().layer_norm_backward(x, gamma, mean, rstd, grad_out, grad_x, grad_gamma, grad_beta);
      Tensor got_grad_x = gpu_zeros({rows, cols}, data), got_grad_gamma = gpu_zeros({cols}, parameters);
      Tensor got_grad_beta = gpu_zeros({cols}, parameters);
      gpu().layer_norm_backward(on_gpu(x), on_gpu(gamma), on_gpu(mean), on_gpu(rstd), on_gpu(grad_out), got_grad_x,
                                got_grad_gamma, got_grad_beta);
      expect_close(name + " grad_x", got_grad_x, grad_x, for_output(data, kReordered));
      expect_close(name + " grad_gamma", got_grad_gamma, grad_gamma, for_output(parameters, kReordered));
      expect_close(name + " grad_beta", got_grad_beta, grad_beta, for_output(parameters, kReordered));
    }
  }
}

TEST_F(CudaKernelsTest, RmsNormForwardAndBackwardMatchTheReference) {
  const std::vector<std::pair<int64_t, int64_t>> sizes = {{5, 7}, {3, 1}, {2, 0}, {0, 4}, {33, 300}, {1100, 8}};
  for (const auto& [rows, cols] : sizes) {
    for (DType data : kDtypes) for (DType parameters : kDtypes) {
      const std::string name = "rms_norm [" + std::to_string(rows) + "," + std::to_string(cols) + "] " +
                               dtypes_name({data, parameters});
      const Tensor x = host_tensor({rows, cols}, data, 24, 3.0f), gamma = host_tensor({cols}, parameters, 25);
      const Tensor grad_out = host_tensor({rows, cols}, data, 26);
      Tensor out = Tensor::zeros({rows, cols}, data), rstd = Tensor::zeros({rows}, parameters);
      cpu_kernels().rms_norm_forward(x, gamma, 1e-5f, out, rstd);
      Tensor got_out = gpu_zeros({rows, cols}, data), got_rstd = gpu_zeros({rows}, parameters);
      gpu().rms_norm_forward(on_gpu(x), on_gpu(gamma), 1e-5f, got_out, got_rstd);
      expect_close(name + " out", got_out, out, for_output(data, kReordered));
      expect_close(name + " rstd", got_rstd, rstd, for_output(parameters, kReordered));
      // The backward takes the reference's rstd, so both sides start from the same inputs.
      Tensor grad_x = Tensor::zeros({rows, cols}, data), grad_gamma = Tensor::zeros({cols}, parameters);
      cpu_kernels().rms_norm_backward(x, gamma, rstd, grad_out, grad_x, grad_gamma);
      Tensor got_grad_x = gpu_zeros({rows, cols}, data), got_grad_gamma = gpu_zeros({cols}, parameters);
      gpu().rms_norm_backward(on_gpu(x), on_gpu(gamma), on_gpu(rstd), on_gpu(grad_out), got_grad_x, got_grad_gamma);
      expect_close(name + " grad_x", got_grad_x, grad_x, for_output(data, kReordered));
      expect_close(name + " grad_gamma", got_grad_gamma, grad_gamma, for_output(parameters, kReordered));
    }
  }
}

TEST_F(CudaKernelsTest, CausalSoftmaxForwardAndBackwardMatchTheReference) {
  for (const Shape& shape : {Shape{2, 5, 5}, Shape{1, 1}, Shape{3, 40, 40}, Shape{0, 4, 4}}) {
    for (DType din : kDtypes) for (DType dout : kDtypes) {
      const std::string name = "causal_softmax " + shape_str(shape) + " " + dtypes_name({din, dout});
      const Tensor scores = host_tensor(shape, din, 18, 30.0f), grad = host_tensor(shape, din, 19);
      Tensor probs = Tensor::zeros(shape, dout), got_probs = gpu_zeros(shape, dout);
      cpu_kernels().causal_softmax_forward(scores, probs);
      gpu().causal_softmax_forward(on_gpu(scores), got_probs);
      expect_close(name, got_probs, probs, for_output(dout, kReordered));
      Tensor grad_scores = Tensor::zeros(shape, dout), got_grad_scores = gpu_zeros(shape, dout);
      cpu_kernels().causal_softmax_backward(probs, grad, grad_scores);
      gpu().causal_softmax_backward(on_gpu(probs), on_gpu(grad), got_grad_scores);
      expect_close(name + " backward", got_grad_scores, grad_scores, for_output(dout, kReordered));
    }
  }
}

TEST_F(CudaKernelsTest, CrossEntropyForwardAndBackwardMatchTheReference) {
  for (const auto& [rows, vocab] : std::vector<std::pair<int64_t, int64_t>>{{6, 9}, {300, 1000}, {1, 1}}) {
    for (DType dlogits : kDtypes) for (DType dtargets : kDtypes) for (DType dout : kDtypes) {
      const std::string name = "cross_entropy [" + std::to_string(rows) + "," + std::to_string(vocab) + "] " +
                               dtypes_name({dlogits, dtargets, dout});
      const Tensor logits = host_tensor({rows, vocab}, dlogits, 20, 8.0f);
      const Tensor targets = host_indices(rows, std::min<int64_t>(vocab, 256), dtargets, 21);
      Tensor loss = Tensor::zeros({}, dout), probs = Tensor::zeros({rows, vocab}, dout);
      cpu_kernels().cross_entropy_forward(logits, targets, loss, probs);
      Tensor got_loss = gpu_zeros({}, dout), got_probs = gpu_zeros({rows, vocab}, dout);
      gpu().cross_entropy_forward(on_gpu(logits), on_gpu(targets), got_loss, got_probs);
      expect_close(name + " probs", got_probs, probs, for_output(dout, kReordered));
      expect_close(name + " loss", got_loss, loss, for_output(dout, kReordered));
      const Tensor seed = Tensor::scalar(1.5f, dout);
      Tensor grad = Tensor::zeros({rows, vocab}, dout), got_grad = gpu_zeros({rows, vocab}, dout);
      cpu_kernels().cross_entropy_backward(probs, targets, seed, grad);
      gpu().cross_entropy_backward(on_gpu(probs), on_gpu(targets), on_gpu(seed), got_grad);
      expect_close(name + " backward", got_grad, grad, for_output(dout, kFormula));
    }
  }
}

// The scatter sums add in index order from the table's value, as the reference does: same bits.
TEST_F(CudaKernelsTest, EmbeddingLookupAndScatterMatchTheReferenceBitForBit) {
  const int64_t table_rows = 11, cols = 6, count = 40;
  for (DType dtable : kDtypes) for (DType dids : kDtypes) for (DType dout : kDtypes) {
    const std::string name = "embedding " + dtypes_name({dtable, dids, dout});
    const Tensor table = host_tensor({table_rows, cols}, dtable, 22), ids = host_indices(count, table_rows, dids, 23);
    Tensor out = Tensor::zeros({count, cols}, dout), got_out = gpu_zeros({count, cols}, dout);
    cpu_kernels().embedding_forward(table, ids, out);
    gpu().embedding_forward(on_gpu(table), on_gpu(ids), got_out);
    expect_close(name + " forward", got_out, out, kExact);
    const Tensor grad_out = host_tensor({count, cols}, dout, 24);
    Tensor grad_table = host_tensor({table_rows, cols}, dtable, 25);
    Tensor got_grad_table = on_gpu(grad_table), again = on_gpu(grad_table);
    cpu_kernels().embedding_backward_into(grad_out, ids, grad_table);
    gpu().embedding_backward_into(on_gpu(grad_out), on_gpu(ids), got_grad_table);
    gpu().embedding_backward_into(on_gpu(grad_out), on_gpu(ids), again);
    expect_close(name + " backward", got_grad_table, grad_table, kExact);
    expect_close(name + " backward run twice", again, gpu().to_host(got_grad_table), kExact);
  }
}

TEST_F(CudaKernelsTest, PermuteSliceAndSelectRowsMatchTheReference) {
  for (DType din : kDtypes) for (DType dout : kDtypes) {
    const std::string name = dtypes_name({din, dout});
    const Tensor in = host_tensor({2, 3, 4, 5}, din, 26, 2.0f, true);
    Tensor permuted = Tensor::zeros({2, 4, 3, 5}, dout), got_permuted = gpu_zeros({2, 4, 3, 5}, dout);
    cpu_kernels().permute(in, {0, 2, 1, 3}, permuted);
    gpu().permute(on_gpu(in), {0, 2, 1, 3}, got_permuted);
    expect_close("permute " + name, got_permuted, permuted, kExact);
    Tensor part = Tensor::zeros({2, 3, 2, 5}, dout), got_part = gpu_zeros({2, 3, 2, 5}, dout);
    cpu_kernels().slice(in, 2, 1, part);
    gpu().slice(on_gpu(in), 2, 1, got_part);
    expect_close("slice " + name, got_part, part, kExact);
    const Tensor grad_part = host_tensor({2, 3, 2, 5}, din, 27);
    Tensor grad_in = host_tensor({2, 3, 4, 5}, dout, 28);
    Tensor got_grad_in = on_gpu(grad_in);
    cpu_kernels().slice_backward_into(grad_part, 2, 1, grad_in);
    gpu().slice_backward_into(on_gpu(grad_part), 2, 1, got_grad_in);
    expect_close("slice_backward_into " + name, got_grad_in, grad_in, kExact);
    const Tensor x = host_tensor({6, 4}, din, 29);
    const std::vector<int64_t> rows = {5, 0, 5, 2, 5, 1};
    Tensor selected = Tensor::zeros({6, 4}, dout), got_selected = gpu_zeros({6, 4}, dout);
    cpu_kernels().select_rows(x, rows, selected);
    gpu().select_rows(on_gpu(x), rows, got_selected);
    expect_close("select_rows " + name, got_selected, selected, kExact);
    Tensor grad_x = host_tensor({6, 4}, dout, 30);
    Tensor got_grad_x = on_gpu(grad_x);
    cpu_kernels().select_rows_backward_into(selected, rows, grad_x);
    gpu().select_rows_backward_into(on_gpu(selected), rows, got_grad_x);
    expect_close("select_rows_backward_into " + name, got_grad_x, grad_x, kExact);
  }
  Tensor empty = gpu_zeros({0, 4}, DType::f32);
  gpu().select_rows(on_gpu(host_tensor({6, 4}, DType::f32, 31)), {}, empty);
}

TEST_F(CudaKernelsTest, RowArgmaxTakesTheLowestIndexOnTiesLikeTheReference) {
  const std::vector<float> values = {1, 5, 5, 2, 0, NAN, 1, 2, 3, 4, 1, NAN, 3, 3, 2, -1, -1, -1, -1, -1};
  for (DType din : kDtypes) for (DType dout : kDtypes) {
    for (const Tensor& x : {Tensor::from_values({4, 5}, values, din), host_tensor({1000, 8}, din, 32)}) {
      Tensor want = Tensor::zeros({x.dim(0)}, dout), got = gpu_zeros({x.dim(0)}, dout);
      cpu_kernels().row_argmax(x, want);
      gpu().row_argmax(on_gpu(x), got);
      expect_close("row_argmax " + shape_str(x.shape()) + " " + dtypes_name({din, dout}), got, want, kExact);
    }
  }
}

TEST_F(CudaKernelsTest, WholeTensorSumsMatchTheReferenceAndRepeatBitForBit) {
  for (int64_t count : {0, 1, 1000, 3000000}) {
    for (DType din : kDtypes) for (DType dout : kDtypes) {
      const std::string name = "[" + std::to_string(count) + "] " + dtypes_name({din, dout});
      const Tensor in = host_tensor({count}, din, 33, 3.0f);
      const Tensor device_in = on_gpu(in);
      Tensor want = Tensor::zeros({}, dout), got = gpu_zeros({}, dout), again = gpu_zeros({}, dout);
      cpu_kernels().sum_all(in, want);
      gpu().sum_all(device_in, got);
      gpu().sum_all(device_in, again);
      expect_close("sum_all " + name, got, want, for_output(dout, kReordered));
      expect_close("sum_all run twice " + name, again, gpu().to_host(got), kExact);
      if (count == 0) continue;
      cpu_kernels().average(in, want);
      gpu().average(device_in, got);
      expect_close("average " + name, got, want, for_output(dout, kReordered));
    }
  }
  for (DType din : kDtypes) {
    const Tensor a = host_tensor({5000}, din, 34), b = host_tensor({700000}, din, 35), empty = Tensor::zeros({0}, din);
    const Tensor device_a = on_gpu(a), device_b = on_gpu(b), device_empty = on_gpu(empty);
    Tensor want = Tensor::zeros({3}), got = on_gpu(want);
    cpu_kernels().sum_of_squares_into({{&a, 10, 4000}, {&empty, 0, 0}, {&b, 0, 700000}}, want, 1, 1.0);
    gpu().sum_of_squares_into({{&device_a, 10, 4000}, {&device_empty, 0, 0}, {&device_b, 0, 700000}}, got, 1, 1.0);
    cpu_kernels().sum_of_squares_into({{&b, 5, 6}}, want, 2, 4.0);
    gpu().sum_of_squares_into({{&device_b, 5, 6}}, got, 2, 4.0);
    gpu().sum_of_squares_into({}, got, 0, 1.0);
    expect_close(std::string("sum_of_squares_into ") + dtype_name(din), got, want, kReordered);
  }
}

TEST_F(CudaKernelsTest, AdamWStepMatchesTheReference) {
  const AdamWCoefficients coefficients{.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .decay = 1.0f - 1e-3f * 0.1f,
                                       .step_size = 1e-3f / (1.0f - 0.729f),
                                       .bias_correction2_sqrt = std::sqrt(1.0f - 0.857375f)};
  for (DType dstate : kDtypes) for (DType dgrad : kDtypes) {
    const Tensor grad = host_tensor({5000}, dgrad, 36, 1.0f, true);
    Tensor param = host_tensor({5000}, dstate, 37), exp_avg = host_tensor({5000}, dstate, 38, 0.1f);
    Tensor exp_avg_sq = Tensor::from_values({5000}, std::vector<float>(5000, 0.02f), dstate);
    Tensor got_param = on_gpu(param), got_avg = on_gpu(exp_avg), got_avg_sq = on_gpu(exp_avg_sq);
    cpu_kernels().adamw(param, grad, exp_avg, exp_avg_sq, coefficients);
    gpu().adamw(got_param, on_gpu(grad), got_avg, got_avg_sq, coefficients);
    const std::string name = dtypes_name({dstate, dgrad});
    expect_close("adamw param " + name, got_param, param, for_output(dstate, kFormula));
    expect_close("adamw exp_avg " + name, got_avg, exp_avg, for_output(dstate, kFormula));
    expect_close("adamw exp_avg_sq " + name, got_avg_sq, exp_avg_sq, for_output(dstate, kFormula));
  }
}

TEST_F(CudaKernelsTest, UploadsAndDownloadsKeepBitsAndCountTheHostSyncs) {
  for (DType dtype : kDtypes) {
    for (int64_t count : {0, 1, 100000}) {
      const Tensor host = host_tensor({count}, dtype, 39, 2.0f, true);
      const int64_t syncs = gpu().host_syncs();
      const Tensor back = gpu().to_host(on_gpu(host));
      EXPECT_EQ(gpu().host_syncs(), syncs + 1);
      EXPECT_TRUE(host.bytes() == 0 ||
                  std::memcmp(back.device_bytes(), host.device_bytes(), static_cast<size_t>(host.bytes())) == 0)
          << "round trip of " << describe(host);
    }
  }
}

}  // namespace
}  // namespace zero3
