// Elementwise kernels (binary with broadcasting, unary, scale, copy), whole-tensor sums and AdamW.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/base/math_bugs.h"
#include "core/tensor/cpu_kernels_internal.h"
#include "core/tensor/element_math.h"
#include "core/tensor/kernel_preconditions.h"

namespace zero3 {
namespace {

// Strides of `shape` seen from the rank of `target`: leading missing dims and size-1 dims get
// stride 0, so one index walk over `target` reads the broadcast operand.
std::vector<int64_t> aligned_strides(const Shape& shape, const Shape& target) {
  const size_t offset = target.size() - shape.size();
  std::vector<int64_t> strides(target.size(), 0);
  const std::vector<int64_t> own = contiguous_strides(shape);
  for (size_t i = 0; i < shape.size(); ++i) strides[offset + i] = shape[i] == 1 ? 0 : own[i];
  return strides;
}

// True when `small`, leading 1s dropped, equals the trailing dims of `big`: a row vector (or a
// block of trailing dims) repeated over the leading dims of `big`.
bool is_trailing_block(const Shape& small, const Shape& big) {
  size_t first = 0;
  while (first < small.size() && small[first] == 1) ++first;
  const size_t kept = small.size() - first;
  if (kept > big.size()) return false;
  return std::equal(small.begin() + first, small.end(), big.end() - kept);
}

template <class F>
void binary_loop(F f, const Tensor& a, const float* pa, const Tensor& b, const float* pb, const Tensor& out,
                 float* po) {
  const int64_t n = out.numel();
  const Shape& shape = out.shape();
  if (a.shape() == shape && b.shape() == shape) {
    parallel_blocks(n, kElementBlock, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) po[i] = f(pa[i], pb[i]);
    });
  } else if (a.shape() == shape && b.numel() == 1) {
    const float vb = pb[0];
    parallel_blocks(n, kElementBlock, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) po[i] = f(pa[i], vb);
    });
  } else if (b.shape() == shape && a.numel() == 1) {
    const float va = pa[0];
    parallel_blocks(n, kElementBlock, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) po[i] = f(va, pb[i]);
    });
  } else if (a.shape() == shape && is_trailing_block(b.shape(), shape)) {
    const int64_t inner = b.numel();
    parallel_blocks(n / inner, rows_per_block(inner), [&](int64_t first, int64_t last) {
      for (int64_t row = first * inner; row < last * inner; row += inner) {
        for (int64_t i = 0; i < inner; ++i) po[row + i] = f(pa[row + i], pb[i]);
      }
    });
  } else if (b.shape() == shape && is_trailing_block(a.shape(), shape)) {
    const int64_t inner = a.numel();
    parallel_blocks(n / inner, rows_per_block(inner), [&](int64_t first, int64_t last) {
      for (int64_t row = first * inner; row < last * inner; row += inner) {
        for (int64_t i = 0; i < inner; ++i) po[row + i] = f(pa[i], pb[row + i]);
      }
    });
  } else {
    for_each_row(shape, aligned_strides(a.shape(), shape), aligned_strides(b.shape(), shape),
                 [&](int64_t offset, int64_t oa, int64_t ob, int64_t count, int64_t sa, int64_t sb) {
                   for (int64_t i = 0; i < count; ++i) po[offset + i] = f(pa[oa + i * sa], pb[ob + i * sb]);
                 });
  }
}

ZERO3_AVX2_CLONES void gelu_loop(const float* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = element_math::gelu(in[i]);
}

ZERO3_AVX2_CLONES void gelu_backward_loop(const float* in, const float* grad_out, float* grad_in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) grad_in[i] = element_math::gelu_derivative(in[i]) * grad_out[i];
}

// SiLU, x sigmoid(x), and its derivative s (1 + x (1 - s)), in double from libm's exp and then
// rounded (as the softmax kernels use exp): backend_cuda's cuda_element_functions.h computes the same.
void silu_loop(const float* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double x = in[i];
    out[i] = static_cast<float>(x / (1.0 + std::exp(-x)));
  }
}

void silu_backward_loop(const float* in, const float* grad_out, float* grad_in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double x = in[i];
    const double s = 1.0 / (1.0 + std::exp(-x));
    grad_in[i] = static_cast<float>(s * (1.0 + x * (1.0 - s))) * grad_out[i];
  }
}

// Math bug gelu_exact_instead_of_tanh (core/base/math_bugs.h): the erf GELU, x Phi(x), and its
// exact derivative Phi(x) + x phi(x), so that forward and backward stay consistent (gradient
// checks hold with the bug on). In double, then rounded: a planted bug, not a hot path.
// Only these CPU kernels read the switch: `fuzz --target` trains zero3's side on the CPU.
constexpr double kInvSqrt2 = 0.7071067811865476;

void gelu_exact_loop(const float* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double x = in[i];
    out[i] = static_cast<float>(0.5 * x * (1.0 + std::erf(x * kInvSqrt2)));
  }
}

void gelu_exact_backward_loop(const float* in, const float* grad_out, float* grad_in, int64_t n) {
  constexpr double kInvSqrt2Pi = 0.3989422804014327;  // 1 / sqrt(2 pi), the normal density's scale
  for (int64_t i = 0; i < n; ++i) {
    const double x = in[i];
    const double derivative = 0.5 * (1.0 + std::erf(x * kInvSqrt2)) + x * kInvSqrt2Pi * std::exp(-0.5 * x * x);
    grad_in[i] = static_cast<float>(derivative) * grad_out[i];
  }
}

ZERO3_AVX2_CLONES void adamw_loop(float* p, const float* g, float* m, float* v, int64_t n, AdamWCoefficients c) {
  // `c` by value: through a reference its floats could alias p, m or v, and the loop would not vectorise.
  for (int64_t i = 0; i < n; ++i) {
    p[i] *= c.decay;
    m[i] = c.beta1 * m[i] + (1.0f - c.beta1) * g[i];
    v[i] = c.beta2 * v[i] + (1.0f - c.beta2) * g[i] * g[i];
    const float denominator = std::sqrt(v[i]) / c.bias_correction2_sqrt + c.eps;
    p[i] -= c.step_size * m[i] / denominator;
  }
}

// Each column summed over the rows in row order; threads take blocks of columns, so every
// column's order, and its bits, stay those of one thread.
void column_sums(const float* in, int64_t in_numel, int64_t cols, float* out) {
  const int64_t rows = in_numel / cols;
  parallel_blocks(cols, rows_per_block(rows), [&](int64_t first, int64_t last) {
    std::vector<double> totals(static_cast<size_t>(last - first), 0.0);
    for (int64_t row = 0; row < in_numel; row += cols) {
      for (int64_t c = first; c < last; ++c) totals[c - first] += in[row + c];
    }
    for (int64_t c = first; c < last; ++c) out[c] = static_cast<float>(totals[c - first]);
  });
}

}  // namespace

void CpuKernels::binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  check_binary_sizes(a, b, out);
  if (out.numel() == 0) return;
  const FloatsIn pa = read(a), pb = read(b);
  FloatsOut po = write(out);
  switch (op) {
    case BinaryOp::add: binary_loop([](float x, float y) { return x + y; }, a, pa.get(), b, pb.get(), out, po.get()); break;
    case BinaryOp::sub: binary_loop([](float x, float y) { return x - y; }, a, pa.get(), b, pb.get(), out, po.get()); break;
    case BinaryOp::mul: binary_loop([](float x, float y) { return x * y; }, a, pa.get(), b, pb.get(), out, po.get()); break;
  }
}

void CpuKernels::sum_to_shape(const Tensor& in, Tensor& out) {
  check_sum_to_shape_sizes(in, out);
  if (out.numel() == 0) return;
  const FloatsIn input = read(in);
  const float* pi = input.get();
  FloatsOut output = write(out);
  float* po = output.get();
  if (in.numel() == out.numel()) {
    std::copy(pi, pi + in.numel(), po);
  } else if (out.numel() == 1) {
    double total = 0.0;
    for (int64_t i = 0; i < in.numel(); ++i) total += pi[i];
    po[0] = static_cast<float>(total);
  } else if (is_trailing_block(out.shape(), in.shape())) {
    column_sums(pi, in.numel(), out.numel(), po);
  } else {
    std::vector<double> totals(static_cast<size_t>(out.numel()), 0.0);
    const std::vector<int64_t> unused(in.shape().size(), 0);
    for_each_row(in.shape(), unused, aligned_strides(out.shape(), in.shape()),
                 [&](int64_t offset, int64_t, int64_t ob, int64_t count, int64_t, int64_t sb) {
                   for (int64_t i = 0; i < count; ++i) totals[ob + i * sb] += pi[offset + i];
                 });
    for (int64_t i = 0; i < out.numel(); ++i) po[i] = static_cast<float>(totals[i]);
  }
}

// One loop per op, the op chosen outside it, so each loop vectorises (element_math.h).
void CpuKernels::unary(UnaryOp op, const Tensor& in, Tensor& out) {
  check_same_numel("unary", in, out);
  const FloatsIn input = read(in);
  FloatsOut output = write(out);
  const float* pi = input.get();
  float* po = output.get();
  const int64_t n = in.numel();
  const bool exact_gelu = math_bug_on(MathBug::gelu_exact_instead_of_tanh);  // read once per call
  parallel_blocks(n, kElementBlock, [&](int64_t begin, int64_t end) {
    if (op == UnaryOp::gelu) {
      if (exact_gelu) {
        gelu_exact_loop(pi + begin, po + begin, end - begin);
      } else {
        gelu_loop(pi + begin, po + begin, end - begin);
      }
    } else if (op == UnaryOp::silu) {
      silu_loop(pi + begin, po + begin, end - begin);
    } else {
      for (int64_t i = begin; i < end; ++i) po[i] = pi[i] < 0.0f ? 0.0f : pi[i];  // std::max(x, 0): NaN and -0 pass through
    }
  });
}

void CpuKernels::unary_backward(UnaryOp op, const Tensor& in, const Tensor& grad_out, Tensor& grad_in) {
  check_unary_backward_sizes(in, grad_out, grad_in);
  const FloatsIn input = read(in), upstream = read(grad_out);
  FloatsOut output = write(grad_in);
  const float* pi = input.get();
  const float* pg = upstream.get();
  float* po = output.get();
  const int64_t n = in.numel();
  const bool exact_gelu = math_bug_on(MathBug::gelu_exact_instead_of_tanh);  // as the forward read it
  parallel_blocks(n, kElementBlock, [&](int64_t begin, int64_t end) {
    if (op == UnaryOp::gelu) {
      if (exact_gelu) {
        gelu_exact_backward_loop(pi + begin, pg + begin, po + begin, end - begin);
      } else {
        gelu_backward_loop(pi + begin, pg + begin, po + begin, end - begin);
      }
    } else if (op == UnaryOp::silu) {
      silu_backward_loop(pi + begin, pg + begin, po + begin, end - begin);
    } else {
      for (int64_t i = begin; i < end; ++i) po[i] = (pi[i] > 0.0f ? 1.0f : 0.0f) * pg[i];
    }
  });
}

void CpuKernels::scale(const Tensor& in, float factor, Tensor& out) {
  check_same_numel("scale", in, out);
  const FloatsIn input = read(in);
  FloatsOut output = write(out);
  const float* pi = input.get();
  float* po = output.get();
  parallel_blocks(in.numel(), kElementBlock, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) po[i] = pi[i] * factor;
  });
}

void CpuKernels::add_into(Tensor& accumulator, const Tensor& addend) {
  check_add_into_sizes(accumulator, addend);
  const FloatsIn addend_floats = read(addend);
  FloatsOut accumulator_floats = write(accumulator);
  const float* pb = addend_floats.get();
  float* pa = accumulator_floats.get();
  parallel_blocks(accumulator.numel(), kElementBlock, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) pa[i] += pb[i];
  });
}

void CpuKernels::fill(Tensor& out, float value) { fill_range(out, 0, out.numel(), value); }

void CpuKernels::fill_range(Tensor& out, int64_t begin, int64_t count, float value) {
  check_fill_range_sizes(out, begin, count);
  FloatsOut po = write(out);
  std::fill_n(po.get() + begin, count, value);
}

void CpuKernels::copy(const Tensor& in, Tensor& out) {
  check_same_numel("copy", in, out);
  copy_segments(in, out, {{.from = 0, .to = 0, .count = in.numel()}});
}

void CpuKernels::copy_segments(const Tensor& in, Tensor& out, const std::vector<CopySegment>& segments) {
  check_copy_segments_sizes(in, out, segments);
  if (in.dtype() == out.dtype()) {
    // Same storage type: the bytes move unchanged (no widening round trip).
    require_resident(in, device());
    require_resident(out, device());
    const int64_t element = dtype_bytes(in.dtype());
    const auto* source = static_cast<const char*>(in.device_bytes());
    auto* target = static_cast<char*>(out.device_bytes());
    for (const CopySegment& segment : segments) {
      if (segment.count > 0) {
        std::memmove(target + segment.to * element, source + segment.from * element,
                     static_cast<size_t>(segment.count * element));
      }
    }
    return;
  }
  const FloatsIn pi = read(in);
  FloatsOut po = write(out);
  for (const CopySegment& segment : segments) std::copy_n(pi.get() + segment.from, segment.count, po.get() + segment.to);
}

void CpuKernels::fill_from_scalar(Tensor& out, const Tensor& scalar, float multiplier, float divisor) {
  check_scalar_operand("fill_from_scalar", scalar);
  const float value = read(scalar)[0] * multiplier / divisor;
  fill(out, value);
}

void CpuKernels::scale_by_scalar(const Tensor& in, const Tensor& scalar, float multiplier, float divisor,
                                 Tensor& out) {
  check_scalar_operand("scale_by_scalar", scalar);
  scale(in, read(scalar)[0] * multiplier / divisor, out);  // which checks in against out
}

void CpuKernels::row_argmax(const Tensor& x, Tensor& out) {
  check_row_argmax_sizes(x, out);
  const int64_t rows = x.dim(0), cols = x.dim(1);
  const FloatsIn px = read(x);
  FloatsOut po = write(out);
  for (int64_t row = 0; row < rows; ++row) {
    int64_t best = 0;  // ties go to the lowest index, the same choice on every rank
    for (int64_t c = 1; c < cols; ++c) {
      if (px[row * cols + c] > px[row * cols + best]) best = c;
    }
    po[row] = static_cast<float>(best);
  }
}

void CpuKernels::sum_all(const Tensor& in, Tensor& out_scalar) {
  const FloatsIn pi = read(in);
  double total = 0.0;
  for (int64_t i = 0; i < in.numel(); ++i) total += pi[i];
  FloatsOut po = write(out_scalar);
  po[0] = static_cast<float>(total);
}

void CpuKernels::average(const Tensor& in, Tensor& out_scalar) {
  check_average_sizes(in);
  const FloatsIn pi = read(in);
  double total = 0.0;
  for (int64_t i = 0; i < in.numel(); ++i) total += pi[i];
  FloatsOut po = write(out_scalar);
  po[0] = static_cast<float>(total / static_cast<double>(in.numel()));
}

void CpuKernels::sum_of_squares_into(const std::vector<TensorRange>& parts, Tensor& out, int64_t index,
                                     double divisor) {
  check_sum_of_squares_sizes(parts, out, index);
  double partial = 0.0;
  for (const TensorRange& part : parts) {
    const FloatsIn values = read(*part.tensor);
    double total = 0.0;
    for (int64_t i = part.begin; i < part.end; ++i) total += static_cast<double>(values[i]) * static_cast<double>(values[i]);
    partial += total;
  }
  FloatsOut po = write(out);
  po[index] = static_cast<float>(partial / divisor);
}

// PyTorch's AdamW: decoupled decay first, then the bias-corrected Adam update.
void CpuKernels::adamw(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                       const AdamWCoefficients& c) {
  check_adamw_sizes(param, grad, exp_avg, exp_avg_sq);
  const FloatsIn g = read(grad);
  FloatsOut p = write(param), m = write(exp_avg), v = write(exp_avg_sq);
  parallel_blocks(param.numel(), kElementBlock, [&](int64_t begin, int64_t end) {
    adamw_loop(p.get() + begin, g.get() + begin, m.get() + begin, v.get() + begin, end - begin, c);
  });
}

}  // namespace zero3
