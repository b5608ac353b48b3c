// The CUDA kernels' per-element and per-row math (cuda_element_functions.h), run on the host
// against the CPU reference kernels: no GPU needed, so CI checks most of the CUDA kernels' logic.
// Each check prints its max difference and #wrong. On the host these functions run the
// reference's IEEE operations in its order, so the tolerance (abs + |ref| * eps) is 0 throughout:
// a difference means a formula drifted from the reference. The GPU's own run, whose sums are
// ordered differently, has looser bounds (cuda_kernels_test.cc).
#include "backend_cuda/cuda/cuda_element_functions.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "backend_cuda/cuda/kernel_test_data.h"
#include "core/base/rng.h"
#include "core/tensor/dtype.h"
#include "core/tensor/element_math.h"
#include "core/tensor/kernels.h"

namespace zero3 {
namespace {

namespace math = cuda_math;

constexpr uint64_t kSeed = 1729;
const std::vector<DType> kDtypes = {DType::f32, DType::bf16};

// Edge values first when asked, then uniform in [-spread, spread] from (kSeed, stream, index).
Tensor test_tensor(const Shape& shape, DType dtype, uint64_t stream, float spread = 2.0f, bool edges = false) {
  return seeded_test_tensor(kSeed, shape, dtype, stream, spread, edges);
}

math::ElementsIn in_view(const Tensor& tensor) { return {tensor.device_bytes(), tensor.dtype() == DType::bf16}; }
math::ElementsOut out_view(Tensor& tensor) { return {tensor.device_bytes(), tensor.dtype() == DType::bf16}; }

const char* op_name(BinaryOp op) { return op == BinaryOp::add ? "add" : op == BinaryOp::sub ? "sub" : "mul"; }

std::string dtypes_name(std::initializer_list<DType> dtypes) {
  std::string name;
  for (DType dtype : dtypes) name += std::string(name.empty() ? "" : "/") + dtype_name(dtype);
  return name;
}

// Equal values (NaN matching NaN) differ by 0; otherwise by |got - want| against abs + |want| * eps.
void expect_close(const std::string& name, const Tensor& got, const Tensor& want, float abs = 0.0f, float eps = 0.0f) {
  const std::vector<float> g = got.to_floats(), w = want.to_floats();
  ASSERT_EQ(g.size(), w.size()) << name;
  float max_diff = 0.0f;
  int wrong = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const bool same = g[i] == w[i] || (std::isnan(g[i]) && std::isnan(w[i]));
    const float diff = same ? 0.0f : std::abs(g[i] - w[i]);
    if (!same && !(diff <= abs + std::abs(w[i]) * eps)) {
      if (wrong++ < 4) ADD_FAILURE() << name << " element " << i << ": got " << g[i] << " want " << w[i];
    }
    max_diff = std::isnan(diff) ? diff : std::max(max_diff, diff);
  }
  std::cout << name << ": max_diff=" << max_diff << " #wrong=" << wrong << " (tolerance " << abs << " + |ref|*" << eps
            << ")\n";
  EXPECT_EQ(wrong, 0) << name;
}

TEST(CudaElementFunctions, Bf16WideningAndRoundTripMatchTheReferenceOnEveryBitPattern) {
  int wrong = 0;
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const auto pattern = static_cast<uint16_t>(bits);
    const float widened = math::float_from_bf16(pattern);
    if (std::bit_cast<uint32_t>(widened) != std::bit_cast<uint32_t>(bf16_value(pattern))) ++wrong;
    if (math::bf16_from_float(widened) != bf16_bits(bf16_value(pattern))) ++wrong;
  }
  std::cout << "bf16 widening and round trip, 65536 patterns: #wrong=" << wrong << " (bitwise)\n";
  EXPECT_EQ(wrong, 0);
}

TEST(CudaElementFunctions, Bf16RoundingMatchesTheReferenceOnTiesEdgesAndRandomFloats) {
  std::vector<uint32_t> patterns = {0x3f808000u, 0x3f818000u, 0x3f807fffu, 0x3f808001u, 0x7f7fffffu, 0xff7fffffu,
                                    0x7f800000u, 0x7f800001u, 0xff800001u, 0x7fc00000u, 0xffc00001u, 0x00008000u,
                                    0x00000001u, 0x80018000u, 0x00000000u, 0x80000000u};
  for (uint64_t i = 0; i < (1u << 20); ++i) patterns.push_back(static_cast<uint32_t>(mix64(kSeed, 1, i)));
  int wrong = 0;
  for (uint32_t pattern : patterns) {
    const float value = std::bit_cast<float>(pattern);
    if (math::bf16_from_float(value) != bf16_bits(value)) {
      if (wrong++ < 4) ADD_FAILURE() << "bf16 rounding of bits " << std::hex << pattern;
    }
  }
  std::cout << "bf16 rounding, " << patterns.size() << " floats: #wrong=" << wrong << " (bitwise)\n";
  EXPECT_EQ(wrong, 0);
}

TEST(CudaElementFunctions, BinaryBroadcastWalkMatchesTheReference) {
  // The last pair walks 8 dims, none of them mergeable: the most a walk takes.
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{4, 1, 3}, {2, 1}}, {{2, 3}, {}}, {{}, {2, 3}}, {{0, 3}, {3}}, {{3, 1}, {0}},
      {{2, 3, 4, 5}, {3, 1, 5}}, {{5, 1, 1, 2}, {1, 4, 3, 1}}, {{1, 2, 1, 2, 1, 2, 1, 2}, {2, 1, 2, 1, 2, 1, 2, 1}}};
  for (const auto& [shape_a, shape_b] : shapes) {
    const Shape out_shape = broadcast_shapes(shape_a, shape_b);
    const math::StridedWalk walk = math::make_broadcast_walk(shape_a, shape_b, out_shape);
    for (BinaryOp op : {BinaryOp::add, BinaryOp::sub, BinaryOp::mul}) {
      for (DType da : kDtypes) for (DType db : kDtypes) for (DType dout : kDtypes) {
        const Tensor a = test_tensor(shape_a, da, 3, 2.0f, true), b = test_tensor(shape_b, db, 4);
        Tensor want = Tensor::zeros(out_shape, dout), got = Tensor::zeros(out_shape, dout);
        cpu_kernels().binary(op, a, b, want);
        for (int64_t i = 0; i < got.numel(); ++i) {
          int64_t offset_a = 0, offset_b = 0;
          walk.offsets(i, offset_a, offset_b);
          out_view(got).store(i, math::binary_value(op, in_view(a)[offset_a], in_view(b)[offset_b]));
        }
        expect_close(std::string("binary ") + op_name(op) + " " + shape_str(shape_a) + " " +
                         shape_str(shape_b) + " " + dtypes_name({da, db, dout}),
                     got, want);
      }
    }
  }
}

TEST(CudaElementFunctions, WalksMergeContiguousDimsAndRefuseMoreThanEightOthers) {
  EXPECT_EQ(math::make_broadcast_walk({4, 5, 6}, {4, 5, 6}, {4, 5, 6}).rank, 1);
  EXPECT_EQ(math::make_broadcast_walk({4, 5, 6}, {6}, {4, 5, 6}).rank, 2);
  EXPECT_EQ(math::make_broadcast_walk({4, 5, 6}, {}, {4, 5, 6}).rank, 1);
  const Shape alternating = {2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1};
  Shape other(alternating.size());
  for (size_t i = 0; i < other.size(); ++i) other[i] = 3 - alternating[i];
  EXPECT_THROW(math::make_broadcast_walk(alternating, other, broadcast_shapes(alternating, other)), BackendError);
}

TEST(CudaElementFunctions, UnaryAndItsBackwardMatchTheReference) {
  for (UnaryOp op : {UnaryOp::gelu, UnaryOp::relu, UnaryOp::silu}) {
    for (DType din : kDtypes) for (DType dout : kDtypes) {
      const Tensor in = test_tensor({64}, din, 5, 6.0f, true), grad = test_tensor({64}, din, 6, 1.0f, true);
      Tensor want = Tensor::zeros({64}, dout), got = Tensor::zeros({64}, dout);
      Tensor want_grad = Tensor::zeros({64}, dout), got_grad = Tensor::zeros({64}, dout);
      cpu_kernels().unary(op, in, want);
      cpu_kernels().unary_backward(op, in, grad, want_grad);
      for (int64_t i = 0; i < 64; ++i) {
        out_view(got).store(i, math::unary_value(op, in_view(in)[i]));
        out_view(got_grad).store(i, math::unary_gradient(op, in_view(in)[i], in_view(grad)[i]));
      }
      const char* op_name = op == UnaryOp::gelu ? "gelu " : op == UnaryOp::relu ? "relu " : "silu ";
      const std::string name = std::string(op_name) + dtypes_name({din, dout});
      expect_close(name, got, want);
      expect_close(name + " backward", got_grad, want_grad);
    }
  }
}

TEST(CudaElementFunctions, ScalarFactorsAndTheEmptyInnerProductMatchTheReference) {
  for (DType dtype : kDtypes) {
    const Tensor in = test_tensor({16}, dtype, 7, 3.0f, true), seed = Tensor::scalar(3.3f, dtype);
    Tensor want_scaled = Tensor::zeros({16}, dtype), got_scaled = Tensor::zeros({16}, dtype);
    Tensor want_filled = Tensor::zeros({16}, dtype), got_filled = Tensor::zeros({16}, dtype);
    cpu_kernels().scale_by_scalar(in, seed, 0.7f, 3.0f, want_scaled);
    cpu_kernels().fill_from_scalar(want_filled, seed, 0.7f, 3.0f);
    const float factor = math::scalar_factor(in_view(seed)[0], 0.7f, 3.0f);
    for (int64_t i = 0; i < 16; ++i) {
      out_view(got_scaled).store(i, in_view(in)[i] * factor);
      out_view(got_filled).store(i, factor);
    }
    expect_close(std::string("scale_by_scalar ") + dtype_name(dtype), got_scaled, want_scaled);
    expect_close(std::string("fill_from_scalar ") + dtype_name(dtype), got_filled, want_filled);
    for (float beta : {0.0f, 2.0f}) {
      Tensor want = test_tensor({2, 3}, dtype, 8, 1.0f, true), got = want.clone();
      cpu_kernels().matmul(Tensor::zeros({2, 0}), false, Tensor::zeros({0, 3}), false, want, 1, 2, 3, 0, true, beta);
      for (int64_t i = 0; i < 6; ++i) out_view(got).store(i, math::empty_inner_product(in_view(got)[i], beta));
      expect_close("matmul k=0 beta=" + std::to_string(beta) + " " + dtype_name(dtype), got, want);
    }
  }
}

TEST(CudaElementFunctions, AdamWUpdateMatchesTheReference) {
  const AdamWCoefficients coefficients{.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .decay = 1.0f - 1e-3f * 0.1f,
                                       .step_size = 1e-3f / (1.0f - 0.729f),
                                       .bias_correction2_sqrt = std::sqrt(1.0f - 0.857375f)};
  for (DType dtype : kDtypes) {
    const Tensor grad = test_tensor({100}, dtype, 9, 1.0f, true);
    Tensor param = test_tensor({100}, dtype, 10), exp_avg = test_tensor({100}, dtype, 11, 0.1f);
    Tensor exp_avg_sq = Tensor::from_values({100}, std::vector<float>(100, 0.02f), dtype);
    Tensor got_param = param.clone(), got_avg = exp_avg.clone(), got_avg_sq = exp_avg_sq.clone();
    cpu_kernels().adamw(param, grad, exp_avg, exp_avg_sq, coefficients);
    for (int64_t i = 0; i < 100; ++i) {
      const math::AdamWState state = math::adamw_update(
          {.param = in_view(got_param)[i], .exp_avg = in_view(got_avg)[i], .exp_avg_sq = in_view(got_avg_sq)[i]},
          in_view(grad)[i], coefficients);
      out_view(got_param).store(i, state.param);
      out_view(got_avg).store(i, state.exp_avg);
      out_view(got_avg_sq).store(i, state.exp_avg_sq);
    }
    expect_close(std::string("adamw param ") + dtype_name(dtype), got_param, param);
    expect_close(std::string("adamw exp_avg ") + dtype_name(dtype), got_avg, exp_avg);
    expect_close(std::string("adamw exp_avg_sq ") + dtype_name(dtype), got_avg_sq, exp_avg_sq);
  }
}

TEST(CudaElementFunctions, SumToShapePlansSumInTheReferenceOrder) {
  const std::vector<std::pair<Shape, Shape>> cases = {{{4, 2, 5, 3}, {2, 1, 3}}, {{6, 4}, {4}}, {{6, 4}, {6, 1}},
                                                      {{3, 4}, {1, 1}},          {{0, 3}, {3}}, {{5, 3, 2}, {3, 1}},
                                                      {{7}, {1}},                {{2, 1, 3}, {1, 3}}};
  for (const auto& [in_shape, out_shape] : cases) {
    for (DType din : kDtypes) for (DType dout : kDtypes) {
      const Tensor in = test_tensor(in_shape, din, 12, 4.0f);
      Tensor want = Tensor::zeros(out_shape, dout), got = Tensor::zeros(out_shape, dout);
      cpu_kernels().sum_to_shape(in, want);
      const math::ReductionPlan plan = math::make_reduction_plan(in_shape, out_shape);
      ASSERT_EQ(plan.outputs, shape_numel(out_shape));
      const math::SumToShapeTerm term{.in = in_view(in), .kept = plan.kept, .reduced = plan.reduced};
      for (int64_t output = 0; output < plan.outputs; ++output) {
        const double total = math::SerialTeam{}.sum(plan.reduced_count, [&](int64_t r) { return term(output, r); });
        out_view(got).store(output, static_cast<float>(total));
      }
      expect_close("sum_to_shape " + shape_str(in_shape) + " -> " + shape_str(out_shape) + " " +
                       dtypes_name({din, dout}),
                   got, want);
    }
  }
}

TEST(CudaElementFunctions, PermuteWalkMatchesTheReference) {
  const std::vector<std::pair<Shape, std::vector<int64_t>>> cases = {
      {{2, 3, 4}, {2, 0, 1}}, {{2, 3, 4, 5}, {0, 2, 1, 3}}, {{1, 3, 1, 2}, {3, 2, 1, 0}}, {{0, 3}, {1, 0}}, {{5}, {0}}};
  for (const auto& [shape, perm] : cases) {
    for (DType din : kDtypes) for (DType dout : kDtypes) {
      const Tensor in = test_tensor(shape, din, 13);
      Shape out_shape(perm.size());
      for (size_t i = 0; i < perm.size(); ++i) out_shape[i] = shape[perm[i]];
      Tensor want = Tensor::zeros(out_shape, dout), got = Tensor::zeros(out_shape, dout);
      cpu_kernels().permute(in, perm, want);
      const math::StridedWalk walk = math::make_permute_walk(shape, perm);
      for (int64_t i = 0; i < got.numel(); ++i) out_view(got).store(i, in_view(in)[walk.offset(i, 0)]);
      expect_close("permute " + shape_str(shape) + " " + dtypes_name({din, dout}), got, want);
    }
  }
}

// One dtype for x and its gradients, another for gamma, beta and the saved statistics.
TEST(CudaElementFunctions, LayerNormRowsAndParameterSumsMatchTheReference) {
  const std::vector<std::pair<int64_t, int64_t>> sizes = {{5, 7}, {3, 1}, {2, 0}, {0, 4}, {4, 96}};
  for (const auto& [rows, cols] : sizes) {
    for (DType data : kDtypes) for (DType parameters : kDtypes) {
      const Tensor x = test_tensor({rows, cols}, data, 14, 3.0f), gamma = test_tensor({cols}, parameters, 15);
      const Tensor beta = test_tensor({cols}, parameters, 16), grad_out = test_tensor({rows, cols}, data, 17);
      Tensor out = Tensor::zeros({rows, cols}, data), mean = Tensor::zeros({rows}, parameters);
      Tensor rstd = Tensor::zeros({rows}, parameters);
      cpu_kernels().layer_norm_forward(x, gamma, beta, 1e-5f, out, mean, rstd);
      Tensor got_out = Tensor::zeros({rows, cols}, data), got_mean = Tensor::zeros({rows}, parameters);
      Tensor got_rstd = Tensor::zeros({rows}, parameters);
      for (int64_t r = 0; r < rows; ++r) {
        math::layer_norm_forward_row(math::SerialTeam{}, in_view(x), in_view(gamma), in_view(beta), 1e-5f,
                                     out_view(got_out), out_view(got_mean), out_view(got_rstd), r, cols);
      }
      const std::string name = "layer_norm [" + std::to_string(rows) + "," + std::to_string(cols) + "] " +
                               dtypes_name({data, parameters});
      expect_close(name + " out", got_out, out);
      expect_close(name + " mean", got_mean, mean);
      expect_close(name + " rstd", got_rstd, rstd);
      Tensor grad_x = Tensor::zeros({rows, cols}, data), grad_gamma = Tensor::zeros({cols}, parameters);
      Tensor grad_beta = Tensor::zeros({cols}, parameters);
      cpu_kernels().layer_norm_backward(x, gamma, mean, rstd, grad_out, grad_x, grad_gamma, grad_beta);
      Tensor got_grad_x = Tensor::zeros({rows, cols}, data), got_grad_gamma = Tensor::zeros({cols}, parameters);
      Tensor got_grad_beta = Tensor::zeros({cols}, parameters);
      for (int64_t r = 0; r < rows; ++r) {
        math::layer_norm_backward_row(math::SerialTeam{}, in_view(x), in_view(gamma), in_view(mean), in_view(rstd),
                                      in_view(grad_out), out_view(got_grad_x), r, cols);
      }
      const math::LayerNormParameterTerm term{.x = in_view(x), .mean = in_view(mean), .rstd = in_view(rstd),
                                              .grad_out = in_view(grad_out), .cols = cols};
      for (int64_t output = 0; output < 2 * cols; ++output) {
        const double total = math::SerialTeam{}.sum(rows, [&](int64_t r) { return term(output, r); });
        Tensor& target = output < cols ? got_grad_gamma : got_grad_beta;
        out_view(target).store(output % std::max<int64_t>(cols, 1), static_cast<float>(total));
      }
      expect_close(name + " grad_x", got_grad_x, grad_x);
      expect_close(name + " grad_gamma", got_grad_gamma, grad_gamma);
      expect_close(name + " grad_beta", got_grad_beta, grad_beta);
    }
  }
}

// As layer norm's: one dtype for x and its gradients, another for gamma and rstd.
TEST(CudaElementFunctions, RmsNormRowsAndGammaSumsMatchTheReference) {
  const std::vector<std::pair<int64_t, int64_t>> sizes = {{5, 7}, {3, 1}, {2, 0}, {0, 4}, {4, 96}};
  for (const auto& [rows, cols] : sizes) {
    for (DType data : kDtypes) for (DType parameters : kDtypes) {
      const Tensor x = test_tensor({rows, cols}, data, 24, 3.0f), gamma = test_tensor({cols}, parameters, 25);
      const Tensor grad_out = test_tensor({rows, cols}, data, 26);
      Tensor out = Tensor::zeros({rows, cols}, data), rstd = Tensor::zeros({rows}, parameters);
      cpu_kernels().rms_norm_forward(x, gamma, 1e-5f, out, rstd);
      Tensor got_out = Tensor::zeros({rows, cols}, data), got_rstd = Tensor::zeros({rows}, parameters);
      for (int64_t r = 0; r < rows; ++r) {
        math::rms_norm_forward_row(math::SerialTeam{}, in_view(x), in_view(gamma), 1e-5f, out_view(got_out),
                                   out_view(got_rstd), r, cols);
      }
      const std::string name = "rms_norm [" + std::to_string(rows) + "," + std::to_string(cols) + "] " +
                               dtypes_name({data, parameters});
      expect_close(name + " out", got_out, out);
      expect_close(name + " rstd", got_rstd, rstd);
      Tensor grad_x = Tensor::zeros({rows, cols}, data), grad_gamma = Tensor::zeros({cols}, parameters);
      cpu_kernels().rms_norm_backward(x, gamma, rstd, grad_out, grad_x, grad_gamma);
      Tensor got_grad_x = Tensor::zeros({rows, cols}, data), got_grad_gamma = Tensor::zeros({cols}, parameters);
      for (int64_t r = 0; r < rows; ++r) {
        math::rms_norm_backward_row(math::SerialTeam{}, in_view(x), in_view(gamma), in_view(rstd), in_view(grad_out),
                                    out_view(got_grad_x), r, cols);
      }
      const math::RmsNormParameterTerm term{.x = in_view(x), .rstd = in_view(rstd), .grad_out = in_view(grad_out),
                                            .cols = cols};
      for (int64_t c = 0; c < cols; ++c) {
        const double total = math::SerialTeam{}.sum(rows, [&](int64_t r) { return term(c, r); });
        out_view(got_grad_gamma).store(c, static_cast<float>(total));
      }
      expect_close(name + " grad_x", got_grad_x, grad_x);
      expect_close(name + " grad_gamma", got_grad_gamma, grad_gamma);
    }
  }
}

TEST(CudaElementFunctions, CausalSoftmaxRowsMatchTheReference) {
  for (const Shape& shape : {Shape{2, 5, 5}, Shape{1, 1}, Shape{3, 2, 2, 2}}) {
    for (DType din : kDtypes) for (DType dout : kDtypes) {
      const Tensor scores = test_tensor(shape, din, 18, 30.0f), grad = test_tensor(shape, din, 19);
      const int64_t steps = shape.back(), rows = shape_numel(shape) / steps;
      Tensor probs = Tensor::zeros(shape, dout), got_probs = Tensor::zeros(shape, dout);
      cpu_kernels().causal_softmax_forward(scores, probs);
      Tensor grad_scores = Tensor::zeros(shape, dout), got_grad_scores = Tensor::zeros(shape, dout);
      cpu_kernels().causal_softmax_backward(probs, grad, grad_scores);
      for (int64_t r = 0; r < rows; ++r) {
        math::causal_softmax_forward_row(math::SerialTeam{}, in_view(scores), out_view(got_probs), r, steps);
        math::causal_softmax_backward_row(math::SerialTeam{}, in_view(probs), in_view(grad), out_view(got_grad_scores),
                                          r, steps);
      }
      const std::string name = "causal_softmax " + shape_str(shape) + " " + dtypes_name({din, dout});
      expect_close(name, got_probs, probs);
      expect_close(name + " backward", got_grad_scores, grad_scores);
    }
  }
}

TEST(CudaElementFunctions, CrossEntropyRowsLossAndGradientMatchTheReference) {
  const int64_t rows = 6, vocab = 9;
  std::vector<float> target_values(rows);
  for (int64_t r = 0; r < rows; ++r) target_values[r] = static_cast<float>(mix64(kSeed, 20, r) % vocab);
  for (DType dlogits : kDtypes) for (DType dtargets : kDtypes) for (DType dout : kDtypes) {
    const Tensor logits = test_tensor({rows, vocab}, dlogits, 21, 8.0f);
    const Tensor targets = Tensor::from_values({rows}, target_values, dtargets), seed = Tensor::scalar(1.5f, dout);
    Tensor loss = Tensor::zeros({}, dout), probs = Tensor::zeros({rows, vocab}, dout);
    cpu_kernels().cross_entropy_forward(logits, targets, loss, probs);
    Tensor grad = Tensor::zeros({rows, vocab}, dout);
    cpu_kernels().cross_entropy_backward(probs, targets, seed, grad);
    Tensor got_loss = Tensor::zeros({}, dout), got_probs = Tensor::zeros({rows, vocab}, dout);
    Tensor got_grad = Tensor::zeros({rows, vocab}, dout);
    double total = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      total += math::cross_entropy_forward_row(math::SerialTeam{}, in_view(logits), in_view(targets),
                                               out_view(got_probs), r, vocab);
    }
    out_view(got_loss).store(0, math::mean_loss(total, rows));
    const float factor = math::cross_entropy_factor(in_view(seed)[0], rows);
    for (int64_t i = 0; i < rows * vocab; ++i) {
      const bool is_target = i % vocab == math::row_index(in_view(targets)[i / vocab], vocab);
      out_view(got_grad).store(i, math::cross_entropy_gradient(in_view(probs)[i], factor, is_target));
    }
    const std::string name = "cross_entropy " + dtypes_name({dlogits, dtargets, dout});
    expect_close(name + " probs", got_probs, probs);
    expect_close(name + " loss", got_loss, loss);
    expect_close(name + " backward", got_grad, grad);
  }
}

TEST(CudaElementFunctions, RowArgmaxTakesTheLowestIndexOnTiesAndSkipsNaNsLikeTheReference) {
  const std::vector<float> values = {1, 5, 5, 2, 0, NAN, 1, 2, 3, 4, 1, NAN, 3, 3, 2, -1, -1, -1, -1, -1};
  for (DType dtype : kDtypes) {
    const Tensor x = Tensor::from_values({4, 5}, values, dtype);
    Tensor want = Tensor::zeros({4}), got = Tensor::zeros({4});
    cpu_kernels().row_argmax(x, want);
    for (int64_t r = 0; r < 4; ++r) got.data()[r] = static_cast<float>(math::row_argmax_of(in_view(x), r, 5));
    expect_close(std::string("row_argmax ") + dtype_name(dtype), got, want);
  }
}

TEST(CudaElementFunctions, RowIndexAcceptsOnlyIntegersInsideTheTable) {
  EXPECT_EQ(math::row_index(3.0f, 5), 3);
  EXPECT_EQ(math::row_index(0.0f, 5), 0);
  EXPECT_EQ(math::row_index(-0.0f, 5), 0);
  EXPECT_EQ(math::row_index(4.0f, 5), 4);
  EXPECT_EQ(math::row_index(5.0f, 5), -1);
  EXPECT_EQ(math::row_index(3.5f, 5), -1);
  EXPECT_EQ(math::row_index(-1.0f, 5), -1);
  EXPECT_EQ(math::row_index(NAN, 5), -1);
  EXPECT_EQ(math::row_index(INFINITY, 5), -1);
  EXPECT_EQ(math::row_index(0.0f, 0), -1);
}

TEST(CudaElementFunctions, CopyElementKeepsBitsBetweenEqualDtypesAndRoundsBetweenOthers) {
  Tensor in = test_tensor({12}, DType::bf16, 22, 2.0f, true);
  in.bf16_data()[11] = 0x7f81;  // a signalling NaN: a segment copy keeps it, a float round trip would quiet it
  for (DType dout : kDtypes) {
    for (DType din : kDtypes) {
      const Tensor source = din == DType::bf16 ? in : test_tensor({12}, din, 23, 2.0f, true);
      Tensor want = Tensor::zeros({12}, dout), got = Tensor::zeros({12}, dout);
      cpu_kernels().copy(source, want);
      for (int64_t i = 0; i < 12; ++i) math::copy_element(in_view(source), i, out_view(got), i);
      if (din == dout && dout == DType::bf16) {
        EXPECT_TRUE(std::equal(got.bf16_data(), got.bf16_data() + 12, want.bf16_data())) << "bf16 bits changed";
      }
      expect_close("copy " + dtypes_name({din, dout}), got, want);
    }
  }
}

}  // namespace
}  // namespace zero3
