// The per-element and per-row math of the CUDA kernels, written once for host and device
// (ZERO3_HOST_DEVICE): cuda_element_functions_test.cc runs exactly the code the GPU runs against
// the CPU reference kernels, with g++ on machines that have no GPU.
//
// Every formula copies the reference's operation order (cpu_kernels_*.cc): float where it
// computes in float, double where it sums in double, one rounding to bf16 per output element. The
// row functions take a Team: SerialTeam (here) walks a row on one thread in the reference's
// order; the GPU's BlockTeam (cuda_kernels_internal.h) spreads the same row over a thread block.
//
//   ElementsIn x{bytes, /*bf16=*/true};
//   float widened = x[3];                                 // bf16 bits widened exactly
//   layer_norm_forward_row(SerialTeam{}, x, ..., row, cols);
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/base/errors.h"
#include "core/tensor/element_math.h"
#include "core/tensor/kernels.h"
#include "core/tensor/shape.h"

#ifdef __CUDACC__
#define ZERO3_HOST_DEVICE __host__ __device__
#else
#define ZERO3_HOST_DEVICE
#endif

namespace zero3::cuda_math {

// ---- Bits, bf16 and operand views ----

ZERO3_HOST_DEVICE inline uint32_t bits_of(float value) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(value);
#else
  return std::bit_cast<uint32_t>(value);
#endif
}

ZERO3_HOST_DEVICE inline float float_of(uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  return std::bit_cast<float>(bits);
#endif
}

ZERO3_HOST_DEVICE inline bool is_nan(float value) { return (bits_of(value) & 0x7fffffffu) > 0x7f800000u; }
ZERO3_HOST_DEVICE inline float quiet_nan() { return float_of(0x7fc00000u); }

// dtype.cc's bf16_bits: add half a bf16 ulp, plus one when the kept lowest bit is odd (ties to
// even), and keep a NaN quiet (truncation could leave only payload bits below the cut).
ZERO3_HOST_DEVICE inline uint16_t bf16_from_float(float value) {
  const uint32_t bits = bits_of(value);
  if (is_nan(value)) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  const uint32_t rounding_bias = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding_bias) >> 16);
}

ZERO3_HOST_DEVICE inline float float_from_bf16(uint16_t bits) { return float_of(static_cast<uint32_t>(bits) << 16); }

// A kernel operand read as floats whatever its storage: f32 as is, bf16 widened exactly. The
// dtype is a runtime flag, the same for every element of a launch, so the branch costs a warp
// nothing and one kernel serves every mix of dtypes the reference kernels accept.
struct ElementsIn {
  const void* data = nullptr;
  bool bf16 = false;
  ZERO3_HOST_DEVICE float operator[](int64_t index) const {
    return bf16 ? float_from_bf16(static_cast<const uint16_t*>(data)[index]) : static_cast<const float*>(data)[index];
  }
};

// An operand that is written: a store rounds a float to the storage dtype once.
struct ElementsOut {
  void* data = nullptr;
  bool bf16 = false;
  ZERO3_HOST_DEVICE float operator[](int64_t index) const { return ElementsIn{data, bf16}[index]; }
  ZERO3_HOST_DEVICE void store(int64_t index, float value) const {
    if (bf16) {
      static_cast<uint16_t*>(data)[index] = bf16_from_float(value);
    } else {
      static_cast<float*>(data)[index] = value;
    }
  }
};

// One element of a copy: the bits unchanged between equal dtypes (the reference memmoves them),
// widened or rounded between different ones.
ZERO3_HOST_DEVICE inline void copy_element(ElementsIn in, int64_t from, ElementsOut out, int64_t to) {
  if (in.bf16 && out.bf16) {
    static_cast<uint16_t*>(out.data)[to] = static_cast<const uint16_t*>(in.data)[from];
  } else if (!in.bf16 && !out.bf16) {
    static_cast<float*>(out.data)[to] = static_cast<const float*>(in.data)[from];
  } else {
    out.store(to, in[from]);
  }
}

// ---- Elementwise math ----

ZERO3_HOST_DEVICE inline float binary_value(BinaryOp op, float a, float b) {
  if (op == BinaryOp::add) return a + b;
  if (op == BinaryOp::sub) return a - b;
  return a * b;
}

// GELU and its derivative are element_math.h's own functions, host and device alike.
ZERO3_HOST_DEVICE inline float gelu(float x) { return element_math::gelu(x); }
ZERO3_HOST_DEVICE inline float gelu_derivative(float x) { return element_math::gelu_derivative(x); }

// std::max(x, 0) as the reference writes it: NaN and -0 pass through.
ZERO3_HOST_DEVICE inline float relu(float x) { return x < 0.0f ? 0.0f : x; }

// SiLU, x sigmoid(x), and its derivative s (1 + x (1 - s)), in double then rounded, as the
// reference's silu_loop computes them (core/tensor/cpu_kernels_elementwise.cc).
ZERO3_HOST_DEVICE inline float silu(float x) {
  const double xd = x;
  return static_cast<float>(xd / (1.0 + ::exp(-xd)));
}
ZERO3_HOST_DEVICE inline float silu_derivative(float x) {
  const double xd = x;
  const double s = 1.0 / (1.0 + ::exp(-xd));
  return static_cast<float>(s * (1.0 + xd * (1.0 - s)));
}

ZERO3_HOST_DEVICE inline float unary_value(UnaryOp op, float x) {
  if (op == UnaryOp::gelu) return gelu(x);
  if (op == UnaryOp::silu) return silu(x);
  return relu(x);
}

// d op(x) / dx * grad; relu's derivative multiplies, so a NaN gradient stays NaN where x <= 0.
ZERO3_HOST_DEVICE inline float unary_gradient(UnaryOp op, float x, float grad) {
  if (op == UnaryOp::gelu) return gelu_derivative(x) * grad;
  if (op == UnaryOp::silu) return silu_derivative(x) * grad;
  return (x > 0.0f ? 1.0f : 0.0f) * grad;
}

// fill_from_scalar's and scale_by_scalar's factor, in float, multiplied before divided.
ZERO3_HOST_DEVICE inline float scalar_factor(float scalar, float multiplier, float divisor) {
  return scalar * multiplier / divisor;
}

// A GEMM with an empty inner dim: out = beta * out, and beta 0 overwrites (a NaN in out included).
ZERO3_HOST_DEVICE inline float empty_inner_product(float out, float beta) { return beta == 0.0f ? 0.0f : beta * out; }

struct AdamWState {
  float param = 0.0f;
  float exp_avg = 0.0f;
  float exp_avg_sq = 0.0f;
};

// PyTorch's AdamW in the reference's order: decoupled decay, moments, bias-corrected step.
ZERO3_HOST_DEVICE inline AdamWState adamw_update(AdamWState state, float grad, const AdamWCoefficients& c) {
  state.param *= c.decay;
  state.exp_avg = c.beta1 * state.exp_avg + (1.0f - c.beta1) * grad;
  state.exp_avg_sq = c.beta2 * state.exp_avg_sq + (1.0f - c.beta2) * grad * grad;
  const float denominator = sqrtf(state.exp_avg_sq) / c.bias_correction2_sqrt + c.eps;
  state.param -= c.step_size * state.exp_avg / denominator;
  return state;
}

// An id or target stored as a float: its row when it is an integer in [0, rows), else -1. The
// ops validate them before a kernel runs (a ShapeError); a kernel cannot throw, so a bad one that
// still arrives poisons its output with NaN instead of reading out of bounds.
ZERO3_HOST_DEVICE inline int64_t row_index(float value, int64_t rows) {
  if (!(value >= 0.0f && value < static_cast<float>(rows))) return -1;
  const auto row = static_cast<int64_t>(value);
  return static_cast<float>(row) == value && row < rows ? row : -1;
}

// A whole-tensor sum in double made a float: sum_all (divisor 1), average (numel) and the sums
// of squares (their divisor). Dividing by 1.0 changes no bits.
ZERO3_HOST_DEVICE inline float finished_sum(double total, double divisor) {
  return static_cast<float>(total / divisor);
}

// ---- Strided index walks (broadcasting, permute, sums over broadcast dims) ----

inline constexpr int kMaxWalkDims = 8;

// A row-major index space of up to kMaxWalkDims dims and, for each of two operands, a stride per
// dim: linear index -> element offsets. Dims merged where both operands allow it, so the common
// shapes ([B*T, C] + [C], same shapes, a scalar) walk one or two dims.
struct StridedWalk {
  int rank = 0;
  int64_t sizes[kMaxWalkDims] = {};
  int64_t strides[2][kMaxWalkDims] = {};

  // Both operands' offsets from one pass over the dims.
  ZERO3_HOST_DEVICE void offsets(int64_t linear, int64_t& first, int64_t& second) const {
    first = 0;
    second = 0;
    for (int d = rank - 1; d > 0; --d) {
      const int64_t coordinate = linear % sizes[d];
      linear /= sizes[d];
      first += coordinate * strides[0][d];
      second += coordinate * strides[1][d];
    }
    if (rank > 0) {
      first += linear * strides[0][0];
      second += linear * strides[1][0];
    }
  }
  ZERO3_HOST_DEVICE int64_t offset(int64_t linear, int operand) const {
    int64_t first = 0, second = 0;
    offsets(linear, first, second);
    return operand == 0 ? first : second;
  }
};

// The walk over dims `sizes` with the two operands' strides, size-1 dims dropped and neighbours
// merged where both strides are contiguous across them. BackendError beyond kMaxWalkDims dims.
inline StridedWalk make_walk(const Shape& sizes, const std::vector<int64_t>& first,
                             const std::vector<int64_t>& second) {
  std::vector<int64_t> kept_sizes, kept_first, kept_second;  // outermost first
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    if (!kept_sizes.empty() && kept_first.back() == first[d] * sizes[d] && kept_second.back() == second[d] * sizes[d]) {
      kept_sizes.back() *= sizes[d];
      kept_first.back() = first[d];
      kept_second.back() = second[d];
      continue;
    }
    kept_sizes.push_back(sizes[d]);
    kept_first.push_back(first[d]);
    kept_second.push_back(second[d]);
  }
  if (kept_sizes.size() > static_cast<size_t>(kMaxWalkDims)) {
    throw BackendError("CUDA kernels walk at most " + std::to_string(kMaxWalkDims) +
                       " dims after merging contiguous ones; got shape " + shape_str(sizes));
  }
  StridedWalk walk;
  walk.rank = static_cast<int>(kept_sizes.size());
  for (int d = 0; d < walk.rank; ++d) {
    walk.sizes[d] = kept_sizes[d];
    walk.strides[0][d] = kept_first[d];
    walk.strides[1][d] = kept_second[d];
  }
  return walk;
}

// Strides of `shape` seen from the rank of `target`: missing and size-1 dims get stride 0.
inline std::vector<int64_t> broadcast_strides(const Shape& shape, const Shape& target) {
  const size_t offset = target.size() - shape.size();
  std::vector<int64_t> strides(target.size(), 0);
  const std::vector<int64_t> own = contiguous_strides(shape);
  for (size_t i = 0; i < shape.size(); ++i) strides[offset + i] = shape[i] == 1 ? 0 : own[i];
  return strides;
}

// binary: out's index space, a's offsets as operand 0 and b's as operand 1.
inline StridedWalk make_broadcast_walk(const Shape& a, const Shape& b, const Shape& out) {
  return make_walk(out, broadcast_strides(a, out), broadcast_strides(b, out));
}

// permute: out's index space, the input offset as operand 0.
inline StridedWalk make_permute_walk(const Shape& in, const std::vector<int64_t>& perm) {
  const std::vector<int64_t> in_strides = contiguous_strides(in);
  Shape out_shape(perm.size());
  std::vector<int64_t> strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    out_shape[i] = in[perm[i]];
    strides[i] = in_strides[perm[i]];
  }
  return make_walk(out_shape, strides, contiguous_strides(out_shape));
}

// sum_to_shape: output o sums input elements kept.offset(o, 0) + reduced.offset(r, 0) over
// r in [0, reduced_count), in increasing r, which is the reference's order (increasing input
// offset). Kept dims are the dims out shares with in; reduced ones are those it broadcast from 1.
struct ReductionPlan {
  StridedWalk kept;
  StridedWalk reduced;
  int64_t outputs = 0;
  int64_t reduced_count = 1;
};

inline ReductionPlan make_reduction_plan(const Shape& in, const Shape& out) {
  const std::vector<int64_t> in_strides = contiguous_strides(in);
  const std::vector<int64_t> out_strides = broadcast_strides(out, in);
  Shape kept_sizes, reduced_sizes;
  std::vector<int64_t> kept_strides, reduced_strides;
  for (size_t d = 0; d < in.size(); ++d) {
    const bool reduced = out_strides[d] == 0 && in[d] != 1;
    (reduced ? reduced_sizes : kept_sizes).push_back(in[d]);
    (reduced ? reduced_strides : kept_strides).push_back(in_strides[d]);
  }
  ReductionPlan plan;
  plan.kept = make_walk(kept_sizes, kept_strides, kept_strides);
  plan.reduced = make_walk(reduced_sizes, reduced_strides, reduced_strides);
  plan.outputs = shape_numel(kept_sizes);
  plan.reduced_count = shape_numel(reduced_sizes);
  return plan;
}

// One term of sum_to_shape's sums, in double as the reference sums.
struct SumToShapeTerm {
  ElementsIn in;
  StridedWalk kept;
  StridedWalk reduced;
  ZERO3_HOST_DEVICE double operator()(int64_t output, int64_t r) const {
    return static_cast<double>(in[kept.offset(output, 0) + reduced.offset(r, 0)]);
  }
};

// ---- Rows ----

// One thread doing a whole row in the reference's order: the host twin of BlockTeam.
struct SerialTeam {
  template <class Term>
  ZERO3_HOST_DEVICE double sum(int64_t count, Term term) const {
    double total = 0.0;
    for (int64_t i = 0; i < count; ++i) total += term(i);
    return total;
  }
  // std::max_element's choice: a later value replaces the best only when the best is below it.
  template <class Value>
  ZERO3_HOST_DEVICE float max(int64_t count, Value value) const {
    float best = value(0);
    for (int64_t i = 1; i < count; ++i) {
      const float candidate = value(i);
      if (best < candidate) best = candidate;
    }
    return best;
  }
  template <class Body>
  ZERO3_HOST_DEVICE void for_each(int64_t count, Body body) const {
    for (int64_t i = 0; i < count; ++i) body(i);
  }
  ZERO3_HOST_DEVICE bool leader() const { return true; }
};

template <class Team>
ZERO3_HOST_DEVICE void layer_norm_forward_row(const Team& team, ElementsIn x, ElementsIn gamma, ElementsIn beta,
                                              float eps, ElementsOut out, ElementsOut mean, ElementsOut rstd,
                                              int64_t row, int64_t cols) {
  const int64_t base = row * cols;
  const double total = team.sum(cols, [&](int64_t c) { return static_cast<double>(x[base + c]); });
  const double mu = cols > 0 ? total / static_cast<double>(cols) : 0.0;
  const double squares = team.sum(cols, [&](int64_t c) { return (x[base + c] - mu) * (x[base + c] - mu); });
  const double variance = cols > 0 ? squares / static_cast<double>(cols) : 0.0;
  const double inv = 1.0 / ::sqrt(variance + static_cast<double>(eps));
  if (team.leader()) {
    mean.store(row, static_cast<float>(mu));
    rstd.store(row, static_cast<float>(inv));
  }
  team.for_each(cols, [&](int64_t c) {
    out.store(base + c, static_cast<float>((x[base + c] - mu) * inv) * gamma[c] + beta[c]);
  });
}

// x normalised with the saved statistics, as the reference's backward recomputes it: the float
// difference first, then the double product.
ZERO3_HOST_DEVICE inline double layer_norm_xhat(float x, float mean, float rstd) {
  return (x - mean) * static_cast<double>(rstd);
}

// dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), with dxhat = dy * gamma.
template <class Team>
ZERO3_HOST_DEVICE void layer_norm_backward_row(const Team& team, ElementsIn x, ElementsIn gamma, ElementsIn mean,
                                               ElementsIn rstd, ElementsIn grad_out, ElementsOut grad_x, int64_t row,
                                               int64_t cols) {
  const int64_t base = row * cols;
  const float mu = mean[row], inv = rstd[row];
  const auto xhat = [&](int64_t c) { return layer_norm_xhat(x[base + c], mu, inv); };
  const auto dxhat = [&](int64_t c) { return static_cast<double>(grad_out[base + c]) * gamma[c]; };
  const double sum_dxhat = team.sum(cols, dxhat);
  const double sum_dxhat_xhat = team.sum(cols, [&](int64_t c) { return dxhat(c) * xhat(c); });
  const double mean_dxhat = sum_dxhat / static_cast<double>(cols);
  const double mean_dxhat_xhat = sum_dxhat_xhat / static_cast<double>(cols);
  team.for_each(cols, [&](int64_t c) {
    grad_x.store(base + c, static_cast<float>(inv * (dxhat(c) - mean_dxhat - xhat(c) * mean_dxhat_xhat)));
  });
}

// The terms of the parameter gradients, summed over rows per column: output c < cols is
// grad_gamma[c] (dy * xhat), output cols + c is grad_beta[c] (dy).
struct LayerNormParameterTerm {
  ElementsIn x, mean, rstd, grad_out;
  int64_t cols = 0;
  ZERO3_HOST_DEVICE double operator()(int64_t output, int64_t row) const {
    const bool is_gamma = output < cols;
    const int64_t c = is_gamma ? output : output - cols;
    const float dy = grad_out[row * cols + c];
    if (!is_gamma) return static_cast<double>(dy);
    return dy * layer_norm_xhat(x[row * cols + c], mean[row], rstd[row]);
  }
};

template <class Team>
ZERO3_HOST_DEVICE void rms_norm_forward_row(const Team& team, ElementsIn x, ElementsIn gamma, float eps,
                                            ElementsOut out, ElementsOut rstd, int64_t row, int64_t cols) {
  const int64_t base = row * cols;
  const double squares = team.sum(cols, [&](int64_t c) { return static_cast<double>(x[base + c]) * x[base + c]; });
  const double mean_square = cols > 0 ? squares / static_cast<double>(cols) : 0.0;
  const double inv = 1.0 / ::sqrt(mean_square + static_cast<double>(eps));
  if (team.leader()) rstd.store(row, static_cast<float>(inv));
  team.for_each(cols, [&](int64_t c) { out.store(base + c, static_cast<float>(x[base + c] * inv) * gamma[c]); });
}

// dx = rstd * (dxhat - xhat * mean(dxhat * xhat)), with xhat = x * rstd and dxhat = dy * gamma.
template <class Team>
ZERO3_HOST_DEVICE void rms_norm_backward_row(const Team& team, ElementsIn x, ElementsIn gamma, ElementsIn rstd,
                                             ElementsIn grad_out, ElementsOut grad_x, int64_t row, int64_t cols) {
  const int64_t base = row * cols;
  const float inv = rstd[row];
  const auto xhat = [&](int64_t c) { return x[base + c] * static_cast<double>(inv); };
  const auto dxhat = [&](int64_t c) { return static_cast<double>(grad_out[base + c]) * gamma[c]; };
  const double mean_dxhat_xhat = team.sum(cols, [&](int64_t c) { return dxhat(c) * xhat(c); }) / static_cast<double>(cols);
  team.for_each(cols, [&](int64_t c) {
    grad_x.store(base + c, static_cast<float>(inv * (dxhat(c) - xhat(c) * mean_dxhat_xhat)));
  });
}

// gamma's gradient term, summed over rows per column: dy * xhat.
struct RmsNormParameterTerm {
  ElementsIn x, rstd, grad_out;
  int64_t cols = 0;
  ZERO3_HOST_DEVICE double operator()(int64_t c, int64_t row) const {
    return grad_out[row * cols + c] * (x[row * cols + c] * static_cast<double>(rstd[row]));
  }
};

// A softmax row's max and denominator (sum of exp(x - max) in double).
struct SoftmaxRow {
  float max = 0.0f;
  double denominator = 0.0;
};

template <class Team>
ZERO3_HOST_DEVICE SoftmaxRow softmax_statistics(const Team& team, ElementsIn x, int64_t base, int64_t count) {
  SoftmaxRow row;
  row.max = team.max(count, [&](int64_t j) { return x[base + j]; });
  row.denominator = team.sum(count, [&](int64_t j) { return ::exp(static_cast<double>(x[base + j]) - row.max); });
  return row;
}

// Each exponential is recomputed here rather than kept (the reference keeps them): the same
// function of the same input, so the same value.
ZERO3_HOST_DEVICE inline float softmax_probability(float value, const SoftmaxRow& row) {
  return static_cast<float>(::exp(static_cast<double>(value) - row.max) / row.denominator);
}

// Row `row` of scores [batch * steps, steps]: query position row % steps sees keys 0..itself.
template <class Team>
ZERO3_HOST_DEVICE void causal_softmax_forward_row(const Team& team, ElementsIn scores, ElementsOut out, int64_t row,
                                                  int64_t steps) {
  const int64_t base = row * steps;
  const int64_t visible = row % steps + 1;
  const SoftmaxRow softmax = softmax_statistics(team, scores, base, visible);
  team.for_each(steps, [&](int64_t j) {
    out.store(base + j, j < visible ? softmax_probability(scores[base + j], softmax) : 0.0f);
  });
}

// Masked positions have p = 0, so their gradient is 0 without a separate mask.
template <class Team>
ZERO3_HOST_DEVICE void causal_softmax_backward_row(const Team& team, ElementsIn probs, ElementsIn grad_out,
                                                   ElementsOut grad_scores, int64_t row, int64_t steps) {
  const int64_t base = row * steps;
  const double dot =
      team.sum(steps, [&](int64_t j) { return static_cast<double>(probs[base + j]) * grad_out[base + j]; });
  team.for_each(steps, [&](int64_t j) {
    grad_scores.store(base + j, static_cast<float>(probs[base + j] * (grad_out[base + j] - dot)));
  });
}

// Writes the row's probabilities and returns its loss term log(sum exp) + max - x[target] (NaN
// for a target outside the row).
template <class Team>
ZERO3_HOST_DEVICE double cross_entropy_forward_row(const Team& team, ElementsIn logits, ElementsIn targets,
                                                   ElementsOut probs, int64_t row, int64_t vocab) {
  const int64_t base = row * vocab;
  const SoftmaxRow softmax = softmax_statistics(team, logits, base, vocab);
  team.for_each(vocab, [&](int64_t v) { probs.store(base + v, softmax_probability(logits[base + v], softmax)); });
  const int64_t target = row_index(targets[row], vocab);
  if (target < 0) return static_cast<double>(quiet_nan());
  return ::log(softmax.denominator) + softmax.max - logits[base + target];
}

// The mean of the rows' loss terms (summed in double), as a float.
ZERO3_HOST_DEVICE inline float mean_loss(double total, int64_t rows) {
  return static_cast<float>(total / static_cast<double>(rows));
}

// d loss / d logit = (p - [v == target]) * grad_loss / rows, in the reference's two float steps.
ZERO3_HOST_DEVICE inline float cross_entropy_factor(float grad_loss, int64_t rows) {
  return grad_loss / static_cast<float>(rows);
}
ZERO3_HOST_DEVICE inline float cross_entropy_gradient(float prob, float factor, bool is_target) {
  const float scaled = prob * factor;
  return is_target ? scaled - factor : scaled;
}

// The index of the row's largest element, ties (and NaNs, which compare false) to the lowest.
ZERO3_HOST_DEVICE inline int64_t row_argmax_of(ElementsIn x, int64_t row, int64_t cols) {
  const int64_t base = row * cols;
  int64_t best = 0;
  for (int64_t c = 1; c < cols; ++c) {
    if (x[base + c] > x[base + best]) best = c;
  }
  return best;
}

}  // namespace zero3::cuda_math
