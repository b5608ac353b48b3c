// The CPU reference kernels: plain loops in float (double where a sum must not drift), GEMM
// through cblas. Every kernel accepts zero-sized dims and rounds its result to bf16 when the
// output tensor is bf16, so CPU bf16 is an exact emulation of bf16 storage.
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

#include "core/errors.h"
#include "core/kernels.h"

namespace zero3 {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

void round_if_bf16(Tensor& tensor) {
  if (tensor.dtype() != DType::bf16) return;
  for (float& value : tensor.values()) value = round_to_bf16(value);
}

// Strides of `shape` seen from the rank of `target`: leading missing dims and size-1 dims get
// stride 0, so one index walk over `target` reads the broadcast operand.
std::vector<int64_t> aligned_strides(const Shape& shape, const Shape& target) {
  const size_t offset = target.size() - shape.size();
  std::vector<int64_t> strides(target.size(), 0);
  const std::vector<int64_t> own = contiguous_strides(shape);
  for (size_t i = 0; i < shape.size(); ++i) strides[offset + i] = shape[i] == 1 ? 0 : own[i];
  return strides;
}

// Walks `shape` in row-major order one innermost row at a time. `row` receives the contiguous
// offset of the row in `shape`, the offsets into two strided operands, the row length and the
// operands' innermost strides.
template <class Row>
void for_each_row(const Shape& shape, const std::vector<int64_t>& strides_a, const std::vector<int64_t>& strides_b,
                  Row row) {
  if (shape_numel(shape) == 0) return;
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (rank == 0) {
    row(0, 0, 0, 1, 0, 0);
    return;
  }
  const int64_t inner = shape[rank - 1];
  std::vector<int64_t> index(rank - 1, 0);
  int64_t offset = 0, offset_a = 0, offset_b = 0;
  while (true) {
    row(offset, offset_a, offset_b, inner, strides_a[rank - 1], strides_b[rank - 1]);
    offset += inner;
    int64_t d = rank - 2;
    for (; d >= 0; --d) {
      ++index[d];
      offset_a += strides_a[d];
      offset_b += strides_b[d];
      if (index[d] < shape[d]) break;
      offset_a -= strides_a[d] * shape[d];
      offset_b -= strides_b[d] * shape[d];
      index[d] = 0;
    }
    if (d < 0) return;
  }
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
void binary_loop(F f, const Tensor& a, const Tensor& b, Tensor& out) {
  const float* pa = a.data();
  const float* pb = b.data();
  float* po = out.data();
  const int64_t n = out.numel();
  const Shape& shape = out.shape();
  if (a.shape() == shape && b.shape() == shape) {
    for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], pb[i]);
  } else if (a.shape() == shape && b.numel() == 1) {
    const float vb = pb[0];
    for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], vb);
  } else if (b.shape() == shape && a.numel() == 1) {
    const float va = pa[0];
    for (int64_t i = 0; i < n; ++i) po[i] = f(va, pb[i]);
  } else if (a.shape() == shape && is_trailing_block(b.shape(), shape)) {
    const int64_t inner = b.numel();
    for (int64_t row = 0; row < n; row += inner) {
      for (int64_t i = 0; i < inner; ++i) po[row + i] = f(pa[row + i], pb[i]);
    }
  } else if (b.shape() == shape && is_trailing_block(a.shape(), shape)) {
    const int64_t inner = a.numel();
    for (int64_t row = 0; row < n; row += inner) {
      for (int64_t i = 0; i < inner; ++i) po[row + i] = f(pa[i], pb[row + i]);
    }
  } else {
    for_each_row(shape, aligned_strides(a.shape(), shape), aligned_strides(b.shape(), shape),
                 [&](int64_t offset, int64_t oa, int64_t ob, int64_t count, int64_t sa, int64_t sb) {
                   for (int64_t i = 0; i < count; ++i) po[offset + i] = f(pa[oa + i * sa], pb[ob + i * sb]);
                 });
  }
}

float gelu_value(float x) {
  const float inner = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
  return 0.5f * x * (1.0f + std::tanh(inner));
}

float gelu_derivative(float x) {
  const float inner = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
  const float t = std::tanh(inner);
  const float d_inner = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * d_inner;
}

blasint blas_dim(int64_t value) {
  ZERO3_CHECK(value >= 0 && value <= INT_MAX,
              "GEMM dimension " + std::to_string(value) + " exceeds the BLAS int range");
  return static_cast<blasint>(value);
}

class CpuKernels final : public Kernels {
 public:
  const char* name() const override { return "cpu"; }

  void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) override {
    ZERO3_CHECK(out.shape() == broadcast_shapes(a.shape(), b.shape()), "binary out " + describe(out));
    if (out.numel() == 0) return;
    switch (op) {
      case BinaryOp::add: binary_loop([](float x, float y) { return x + y; }, a, b, out); break;
      case BinaryOp::sub: binary_loop([](float x, float y) { return x - y; }, a, b, out); break;
      case BinaryOp::mul: binary_loop([](float x, float y) { return x * y; }, a, b, out); break;
    }
    round_if_bf16(out);
  }

  void sum_to_shape(const Tensor& in, Tensor& out) override {
    ZERO3_CHECK(broadcast_shapes(out.shape(), in.shape()) == in.shape(),
                "sum_to_shape " + describe(in) + " -> " + describe(out));
    if (out.numel() == 0) return;
    const float* pi = in.data();
    float* po = out.data();
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
    round_if_bf16(out);
  }

  void unary(UnaryOp op, const Tensor& in, Tensor& out) override {
    ZERO3_CHECK(in.numel() == out.numel(), "unary " + describe(in) + " -> " + describe(out));
    const float* pi = in.data();
    float* po = out.data();
    for (int64_t i = 0; i < in.numel(); ++i) {
      po[i] = op == UnaryOp::gelu ? gelu_value(pi[i]) : std::max(pi[i], 0.0f);
    }
    round_if_bf16(out);
  }

  void unary_backward(UnaryOp op, const Tensor& in, const Tensor& grad_out, Tensor& grad_in) override {
    ZERO3_CHECK(in.numel() == grad_out.numel() && in.numel() == grad_in.numel(), "unary_backward sizes");
    const float* pi = in.data();
    const float* pg = grad_out.data();
    float* po = grad_in.data();
    for (int64_t i = 0; i < in.numel(); ++i) {
      const float slope = op == UnaryOp::gelu ? gelu_derivative(pi[i]) : (pi[i] > 0.0f ? 1.0f : 0.0f);
      po[i] = slope * pg[i];
    }
    round_if_bf16(grad_in);
  }

  void scale(const Tensor& in, float factor, Tensor& out) override {
    ZERO3_CHECK(in.numel() == out.numel(), "scale " + describe(in) + " -> " + describe(out));
    const float* pi = in.data();
    float* po = out.data();
    for (int64_t i = 0; i < in.numel(); ++i) po[i] = pi[i] * factor;
    round_if_bf16(out);
  }

  void add_into(Tensor& accumulator, const Tensor& addend) override {
    ZERO3_CHECK(accumulator.shape() == addend.shape(), "add_into " + describe(accumulator) + " += " + describe(addend));
    float* pa = accumulator.data();
    const float* pb = addend.data();
    for (int64_t i = 0; i < accumulator.numel(); ++i) pa[i] += pb[i];
    round_if_bf16(accumulator);
  }

  void fill(Tensor& out, float value) override {
    const float stored = out.dtype() == DType::bf16 ? round_to_bf16(value) : value;
    std::fill(out.data(), out.data() + out.numel(), stored);
  }

  void copy(const Tensor& in, Tensor& out) override {
    ZERO3_CHECK(in.numel() == out.numel(), "copy " + describe(in) + " -> " + describe(out));
    std::copy(in.data(), in.data() + in.numel(), out.data());
    round_if_bf16(out);
  }

  void round_to_dtype(Tensor& tensor) override { round_if_bf16(tensor); }

  void matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& out, int64_t batch, int64_t m,
              int64_t n, int64_t k, bool b_shared, float beta) override {
    ZERO3_CHECK(a.numel() == batch * m * k && out.numel() == batch * m * n &&
                    b.numel() == (b_shared ? 1 : batch) * k * n,
                "matmul sizes: a " + describe(a) + " b " + describe(b) + " out " + describe(out));
    if (out.numel() == 0) return;
    float* po = out.data();
    if (k == 0) {
      // An empty inner dim contributes nothing; BLAS rejects lda = 0, so scale here instead.
      for (int64_t i = 0; i < out.numel(); ++i) po[i] = beta == 0.0f ? 0.0f : beta * po[i];
      round_if_bf16(out);
      return;
    }
    const blasint lda = blas_dim(trans_a ? m : k), ldb = blas_dim(trans_b ? k : n);
    for (int64_t i = 0; i < batch; ++i) {
      const float* pa = a.data() + i * m * k;
      const float* pb = b.data() + (b_shared ? 0 : i * k * n);
      cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                  blas_dim(m), blas_dim(n), blas_dim(k), 1.0f, pa, lda, pb, ldb, beta, po + i * m * n, blas_dim(n));
    }
    round_if_bf16(out);
  }

  void layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& out,
                          Tensor& mean, Tensor& rstd) override {
    const int64_t cols = gamma.numel();
    const int64_t rows = mean.numel();
    ZERO3_CHECK(x.numel() == rows * cols && out.numel() == x.numel() && beta.numel() == cols && rstd.numel() == rows,
                "layer_norm sizes: x " + describe(x) + " gamma " + describe(gamma));
    const float *px = x.data(), *pg = gamma.data(), *pb = beta.data();
    float *po = out.data(), *pm = mean.data(), *pr = rstd.data();
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = px + r * cols;
      double total = 0.0;
      for (int64_t c = 0; c < cols; ++c) total += row[c];
      const double mu = cols > 0 ? total / static_cast<double>(cols) : 0.0;
      double squares = 0.0;
      for (int64_t c = 0; c < cols; ++c) squares += (row[c] - mu) * (row[c] - mu);
      const double variance = cols > 0 ? squares / static_cast<double>(cols) : 0.0;
      const double inv = 1.0 / std::sqrt(variance + static_cast<double>(eps));
      pm[r] = static_cast<float>(mu);
      pr[r] = static_cast<float>(inv);
      for (int64_t c = 0; c < cols; ++c) {
        po[r * cols + c] = static_cast<float>((row[c] - mu) * inv) * pg[c] + pb[c];
      }
    }
    round_if_bf16(out);
  }

  void layer_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                           const Tensor& grad_out, Tensor& grad_x, Tensor& grad_gamma, Tensor& grad_beta) override {
    const int64_t cols = gamma.numel();
    const int64_t rows = mean.numel();
    ZERO3_CHECK(x.numel() == rows * cols && grad_out.numel() == x.numel() && grad_x.numel() == x.numel() &&
                    grad_gamma.numel() == cols && grad_beta.numel() == cols,
                "layer_norm_backward sizes: x " + describe(x) + " gamma " + describe(gamma));
    const float *px = x.data(), *pg = gamma.data(), *pm = mean.data(), *pr = rstd.data(), *pdy = grad_out.data();
    float* pdx = grad_x.data();
    std::vector<double> dgamma(static_cast<size_t>(cols), 0.0), dbeta(static_cast<size_t>(cols), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = px + r * cols;
      const float* dy = pdy + r * cols;
      // dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), with dxhat = dy * gamma.
      double sum_dxhat = 0.0, sum_dxhat_xhat = 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        const double xhat = (row[c] - pm[r]) * static_cast<double>(pr[r]);
        const double dxhat = static_cast<double>(dy[c]) * pg[c];
        sum_dxhat += dxhat;
        sum_dxhat_xhat += dxhat * xhat;
        dgamma[c] += dy[c] * xhat;
        dbeta[c] += dy[c];
      }
      const double mean_dxhat = sum_dxhat / static_cast<double>(cols);
      const double mean_dxhat_xhat = sum_dxhat_xhat / static_cast<double>(cols);
      for (int64_t c = 0; c < cols; ++c) {
        const double xhat = (row[c] - pm[r]) * static_cast<double>(pr[r]);
        const double dxhat = static_cast<double>(dy[c]) * pg[c];
        pdx[r * cols + c] = static_cast<float>(pr[r] * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat));
      }
    }
    for (int64_t c = 0; c < cols; ++c) {
      grad_gamma.data()[c] = static_cast<float>(dgamma[c]);
      grad_beta.data()[c] = static_cast<float>(dbeta[c]);
    }
    round_if_bf16(grad_x);
    round_if_bf16(grad_gamma);
    round_if_bf16(grad_beta);
  }

  void embedding_forward(const Tensor& table, const Tensor& ids, Tensor& out) override {
    const int64_t cols = table.dim(1);
    ZERO3_CHECK(out.numel() == ids.numel() * cols, "embedding out " + describe(out));
    for (int64_t i = 0; i < ids.numel(); ++i) {
      const int64_t id = checked_row(ids.data()[i], table.dim(0));
      std::copy_n(table.data() + id * cols, cols, out.data() + i * cols);
    }
    round_if_bf16(out);
  }

  void embedding_backward_into(const Tensor& grad_out, const Tensor& ids, Tensor& grad_table) override {
    const int64_t cols = grad_table.dim(1);
    ZERO3_CHECK(grad_out.numel() == ids.numel() * cols, "embedding grad " + describe(grad_out));
    for (int64_t i = 0; i < ids.numel(); ++i) {
      float* row = grad_table.data() + checked_row(ids.data()[i], grad_table.dim(0)) * cols;
      const float* grad = grad_out.data() + i * cols;
      for (int64_t c = 0; c < cols; ++c) row[c] += grad[c];
    }
    round_if_bf16(grad_table);
  }

  void cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& loss, Tensor& probs) override {
    const int64_t rows = logits.dim(0), vocab = logits.dim(1);
    ZERO3_CHECK(rows > 0 && vocab > 0 && targets.numel() == rows && probs.numel() == logits.numel() &&
                    loss.numel() == 1,
                "cross_entropy sizes: logits " + describe(logits) + " targets " + describe(targets));
    double total = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = logits.data() + r * vocab;
      float* p = probs.data() + r * vocab;
      const float row_max = *std::max_element(row, row + vocab);
      double denominator = 0.0;
      for (int64_t v = 0; v < vocab; ++v) denominator += std::exp(static_cast<double>(row[v]) - row_max);
      for (int64_t v = 0; v < vocab; ++v) {
        p[v] = static_cast<float>(std::exp(static_cast<double>(row[v]) - row_max) / denominator);
      }
      const int64_t target = checked_row(targets.data()[r], vocab);
      total += std::log(denominator) + row_max - row[target];
    }
    loss.data()[0] = static_cast<float>(total / static_cast<double>(rows));
    round_if_bf16(loss);
    round_if_bf16(probs);
  }

  void cross_entropy_backward(const Tensor& probs, const Tensor& targets, float grad_loss,
                              Tensor& grad_logits) override {
    const int64_t rows = probs.dim(0), vocab = probs.dim(1);
    ZERO3_CHECK(rows > 0 && grad_logits.numel() == probs.numel() && targets.numel() == rows,
                "cross_entropy_backward sizes: probs " + describe(probs));
    const float factor = grad_loss / static_cast<float>(rows);
    for (int64_t r = 0; r < rows; ++r) {
      const float* p = probs.data() + r * vocab;
      float* g = grad_logits.data() + r * vocab;
      for (int64_t v = 0; v < vocab; ++v) g[v] = p[v] * factor;
      g[checked_row(targets.data()[r], vocab)] -= factor;
    }
    round_if_bf16(grad_logits);
  }

  void causal_softmax_forward(const Tensor& scores, Tensor& out) override {
    const int64_t steps = scores.rank() >= 2 ? scores.dim(-1) : 0;
    ZERO3_CHECK(out.numel() == scores.numel(), "causal_softmax out " + describe(out));
    const int64_t rows = steps == 0 ? 0 : scores.numel() / steps;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t visible = r % steps + 1;  // query position i sees keys 0..i
      const float* s = scores.data() + r * steps;
      float* p = out.data() + r * steps;
      const float row_max = *std::max_element(s, s + visible);
      double denominator = 0.0;
      for (int64_t j = 0; j < visible; ++j) denominator += std::exp(static_cast<double>(s[j]) - row_max);
      for (int64_t j = 0; j < visible; ++j) {
        p[j] = static_cast<float>(std::exp(static_cast<double>(s[j]) - row_max) / denominator);
      }
      std::fill(p + visible, p + steps, 0.0f);
    }
    round_if_bf16(out);
  }

  void causal_softmax_backward(const Tensor& out, const Tensor& grad_out, Tensor& grad_scores) override {
    const int64_t steps = out.rank() >= 2 ? out.dim(-1) : 0;
    ZERO3_CHECK(grad_out.numel() == out.numel() && grad_scores.numel() == out.numel(), "causal_softmax_backward sizes");
    const int64_t rows = steps == 0 ? 0 : out.numel() / steps;
    for (int64_t r = 0; r < rows; ++r) {
      const float* p = out.data() + r * steps;
      const float* g = grad_out.data() + r * steps;
      float* d = grad_scores.data() + r * steps;
      double dot = 0.0;
      for (int64_t j = 0; j < steps; ++j) dot += static_cast<double>(p[j]) * g[j];
      // Masked positions have p = 0, so their gradient is 0 without a separate mask.
      for (int64_t j = 0; j < steps; ++j) d[j] = static_cast<float>(p[j] * (g[j] - dot));
    }
    round_if_bf16(grad_scores);
  }

  void permute(const Tensor& in, const std::vector<int64_t>& perm, Tensor& out) override {
    ZERO3_CHECK(perm.size() == in.shape().size() && out.numel() == in.numel(), "permute of " + describe(in));
    const std::vector<int64_t> in_strides = contiguous_strides(in.shape());
    std::vector<int64_t> strides(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) strides[i] = in_strides[perm[i]];
    const float* pi = in.data();
    float* po = out.data();
    const std::vector<int64_t> unused(perm.size(), 0);
    for_each_row(out.shape(), strides, unused,
                 [&](int64_t offset, int64_t oa, int64_t, int64_t count, int64_t sa, int64_t) {
                   for (int64_t i = 0; i < count; ++i) po[offset + i] = pi[oa + i * sa];
                 });
    round_if_bf16(out);
  }

  void slice(const Tensor& in, int64_t dim, int64_t start, Tensor& out) override {
    const SliceLayout layout = slice_layout(in.shape(), out.shape(), dim, start);
    for (int64_t o = 0; o < layout.outer; ++o) {
      std::copy_n(in.data() + (o * layout.dim_full + start) * layout.inner, layout.dim_part * layout.inner,
                  out.data() + o * layout.dim_part * layout.inner);
    }
    round_if_bf16(out);
  }

  void slice_backward_into(const Tensor& grad_part, int64_t dim, int64_t start, Tensor& grad_in) override {
    const SliceLayout layout = slice_layout(grad_in.shape(), grad_part.shape(), dim, start);
    const int64_t block = layout.dim_part * layout.inner;
    for (int64_t o = 0; o < layout.outer; ++o) {
      float* dst = grad_in.data() + (o * layout.dim_full + start) * layout.inner;
      const float* src = grad_part.data() + o * block;
      for (int64_t i = 0; i < block; ++i) dst[i] += src[i];
    }
    round_if_bf16(grad_in);
  }

  void select_rows(const Tensor& x, const std::vector<int64_t>& rows, Tensor& out) override {
    const int64_t cols = x.dim(1);
    ZERO3_CHECK(out.numel() == static_cast<int64_t>(rows.size()) * cols, "select_rows out " + describe(out));
    for (size_t r = 0; r < rows.size(); ++r) {
      ZERO3_CHECK(rows[r] >= 0 && rows[r] < x.dim(0), "select_rows row " + std::to_string(rows[r]));
      std::copy_n(x.data() + rows[r] * cols, cols, out.data() + static_cast<int64_t>(r) * cols);
    }
    round_if_bf16(out);
  }

  void select_rows_backward_into(const Tensor& grad_out, const std::vector<int64_t>& rows, Tensor& grad_x) override {
    const int64_t cols = grad_x.dim(1);
    ZERO3_CHECK(grad_out.numel() == static_cast<int64_t>(rows.size()) * cols, "select_rows grad " + describe(grad_out));
    for (size_t r = 0; r < rows.size(); ++r) {
      ZERO3_CHECK(rows[r] >= 0 && rows[r] < grad_x.dim(0), "select_rows row " + std::to_string(rows[r]));
      float* dst = grad_x.data() + rows[r] * cols;
      const float* src = grad_out.data() + static_cast<int64_t>(r) * cols;
      for (int64_t c = 0; c < cols; ++c) dst[c] += src[c];
    }
    round_if_bf16(grad_x);
  }

  void sum_all(const Tensor& in, Tensor& out_scalar) override {
    double total = 0.0;
    for (float value : in.values()) total += value;
    out_scalar.data()[0] = static_cast<float>(total);
    round_if_bf16(out_scalar);
  }

  double sum_of_squares(const Tensor& in) override {
    double total = 0.0;
    for (float value : in.values()) total += static_cast<double>(value) * value;
    return total;
  }

  void adamw(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamWHyper& hyper) override;

 private:
  struct SliceLayout {
    int64_t outer = 1, dim_full = 0, dim_part = 0, inner = 1;
  };

  static SliceLayout slice_layout(const Shape& full, const Shape& part, int64_t dim, int64_t start) {
    ZERO3_CHECK(dim >= 0 && dim < static_cast<int64_t>(full.size()) && full.size() == part.size(),
                "slice dim " + std::to_string(dim) + " of " + shape_str(full) + " / " + shape_str(part));
    SliceLayout layout;
    layout.dim_full = full[dim];
    layout.dim_part = part[dim];
    ZERO3_CHECK(start >= 0 && start + layout.dim_part <= layout.dim_full, "slice start " + std::to_string(start));
    for (int64_t d = 0; d < dim; ++d) layout.outer *= full[d];
    for (size_t d = dim + 1; d < full.size(); ++d) layout.inner *= full[d];
    return layout;
  }

  // Ops validate ids and targets with a ShapeError; here a bad one is a programmer error.
  static int64_t checked_row(float value, int64_t rows) {
    const auto row = static_cast<int64_t>(value);
    ZERO3_CHECK(static_cast<float>(row) == value && row >= 0 && row < rows,
                "row index " + std::to_string(value) + " outside [0, " + std::to_string(rows) + ")");
    return row;
  }

  static void column_sums(const float* in, int64_t in_numel, int64_t cols, float* out) {
    std::vector<double> totals(static_cast<size_t>(cols), 0.0);
    for (int64_t row = 0; row < in_numel; row += cols) {
      for (int64_t c = 0; c < cols; ++c) totals[c] += in[row + c];
    }
    for (int64_t c = 0; c < cols; ++c) out[c] = static_cast<float>(totals[c]);
  }
};

// PyTorch's AdamW: decoupled decay first, then the bias-corrected Adam update.
void CpuKernels::adamw(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                       const AdamWHyper& hyper) {
  ZERO3_CHECK(param.numel() == grad.numel() && param.numel() == exp_avg.numel() &&
                  param.numel() == exp_avg_sq.numel() && hyper.step >= 1,
              "adamw on " + describe(param) + " step " + std::to_string(hyper.step));
  const double step = static_cast<double>(hyper.step);
  const float bias_correction1 = static_cast<float>(1.0 - std::pow(static_cast<double>(hyper.beta1), step));
  const float bias_correction2_sqrt =
      static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(hyper.beta2), step)));
  const float step_size = hyper.lr / bias_correction1;
  const float decay = 1.0f - hyper.lr * hyper.weight_decay;
  float *p = param.data(), *m = exp_avg.data(), *v = exp_avg_sq.data();
  const float* g = grad.data();
  for (int64_t i = 0; i < param.numel(); ++i) {
    p[i] *= decay;
    m[i] = hyper.beta1 * m[i] + (1.0f - hyper.beta1) * g[i];
    v[i] = hyper.beta2 * v[i] + (1.0f - hyper.beta2) * g[i] * g[i];
    const float denominator = std::sqrt(v[i]) / bias_correction2_sqrt + hyper.eps;
    p[i] -= step_size * m[i] / denominator;
  }
  round_if_bf16(param);
}

}  // namespace

Kernels& cpu_kernels() {
  static CpuKernels kernels;
  return kernels;
}

}  // namespace zero3
