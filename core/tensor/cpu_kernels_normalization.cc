// Kernels that normalise rows: layer norm, RMSNorm, causal softmax, and cross-entropy with its softmax.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/base/math_bugs.h"
#include "core/tensor/cpu_kernels_internal.h"
#include "core/tensor/kernel_preconditions.h"

namespace zero3 {
namespace {

// p = softmax(x) over one row of n >= 1 values, in double from the row's max, each exponential
// computed once (into `exps`, n doubles of scratch). Returns the max and the denominator, which
// cross-entropy's loss needs.
struct SoftmaxRow {
  float max = 0.0f;
  double denominator = 0.0;
};
SoftmaxRow softmax_row(const float* x, int64_t n, double* exps, float* p) {
  SoftmaxRow row{.max = *std::max_element(x, x + n), .denominator = 0.0};
  for (int64_t j = 0; j < n; ++j) row.denominator += exps[j] = std::exp(static_cast<double>(x[j]) - row.max);
  for (int64_t j = 0; j < n; ++j) p[j] = static_cast<float>(exps[j] / row.denominator);
  return row;
}

// Every target as a row index of a `vocab`-wide row, checked before any parallel loop reads it
// (a parallel body must not throw).
std::vector<int64_t> checked_targets(const FloatsIn& targets, int64_t rows, int64_t vocab) {
  std::vector<int64_t> target_of(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) target_of[r] = checked_row(targets[r], vocab);
  return target_of;
}

}  // namespace

void CpuKernels::layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& out,
                                    Tensor& mean, Tensor& rstd) {
  check_layer_norm_forward_sizes(x, gamma, beta, out, mean, rstd);
  const int64_t cols = gamma.numel();
  const int64_t rows = mean.numel();
  const FloatsIn px = read(x), pg = read(gamma), pb = read(beta);
  FloatsOut po = write(out), pm = write(mean), pr = write(rstd);
  parallel_blocks(rows, rows_per_block(cols), [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) {
      const float* row = px.get() + r * cols;
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
  });
}

void CpuKernels::layer_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                                     const Tensor& grad_out, Tensor& grad_x, Tensor& grad_gamma, Tensor& grad_beta) {
  check_layer_norm_backward_sizes(x, gamma, mean, grad_out, grad_x, grad_gamma, grad_beta);
  const int64_t cols = gamma.numel();
  const int64_t rows = mean.numel();
  const FloatsIn px = read(x), pg = read(gamma), pm = read(mean), pr = read(rstd), pdy = read(grad_out);
  FloatsOut pdx = write(grad_x), pdgamma = write(grad_gamma), pdbeta = write(grad_beta);
  // Rows (dx) in blocks of rows, then the parameter gradients in blocks of columns, each column
  // summed over the rows in row order: any thread count gives the bits of one.
  parallel_blocks(rows, rows_per_block(cols), [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) {
      const float* row = px.get() + r * cols;
      const float* dy = pdy.get() + r * cols;
      // dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), with dxhat = dy * gamma.
      double sum_dxhat = 0.0, sum_dxhat_xhat = 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        const double xhat = (row[c] - pm[r]) * static_cast<double>(pr[r]);
        const double dxhat = static_cast<double>(dy[c]) * pg[c];
        sum_dxhat += dxhat;
        sum_dxhat_xhat += dxhat * xhat;
      }
      const double mean_dxhat = sum_dxhat / static_cast<double>(cols);
      const double mean_dxhat_xhat = sum_dxhat_xhat / static_cast<double>(cols);
      for (int64_t c = 0; c < cols; ++c) {
        const double xhat = (row[c] - pm[r]) * static_cast<double>(pr[r]);
        const double dxhat = static_cast<double>(dy[c]) * pg[c];
        pdx[r * cols + c] = static_cast<float>(pr[r] * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat));
      }
    }
  });
  parallel_blocks(cols, rows_per_block(rows), [&](int64_t first, int64_t last) {
    std::vector<double> dgamma(static_cast<size_t>(last - first), 0.0), dbeta(static_cast<size_t>(last - first), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = px.get() + r * cols;
      const float* dy = pdy.get() + r * cols;
      for (int64_t c = first; c < last; ++c) {
        const double xhat = (row[c] - pm[r]) * static_cast<double>(pr[r]);
        dgamma[c - first] += dy[c] * xhat;
        dbeta[c - first] += dy[c];
      }
    }
    for (int64_t c = first; c < last; ++c) {
      pdgamma[c] = static_cast<float>(dgamma[c - first]);
      pdbeta[c] = static_cast<float>(dbeta[c - first]);
    }
  });
}

void CpuKernels::rms_norm_forward(const Tensor& x, const Tensor& gamma, float eps, Tensor& out, Tensor& rstd) {
  check_rms_norm_forward_sizes(x, gamma, out, rstd);
  const int64_t cols = gamma.numel();
  const int64_t rows = rstd.numel();
  const FloatsIn px = read(x), pg = read(gamma);
  FloatsOut po = write(out), pr = write(rstd);
  parallel_blocks(rows, rows_per_block(cols), [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) {
      const float* row = px.get() + r * cols;
      double squares = 0.0;
      for (int64_t c = 0; c < cols; ++c) squares += static_cast<double>(row[c]) * row[c];
      const double mean_square = cols > 0 ? squares / static_cast<double>(cols) : 0.0;
      const double inv = 1.0 / std::sqrt(mean_square + static_cast<double>(eps));
      pr[r] = static_cast<float>(inv);
      for (int64_t c = 0; c < cols; ++c) po[r * cols + c] = static_cast<float>(row[c] * inv) * pg[c];
    }
  });
}

void CpuKernels::rms_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& rstd, const Tensor& grad_out,
                                   Tensor& grad_x, Tensor& grad_gamma) {
  check_rms_norm_backward_sizes(x, gamma, rstd, grad_out, grad_x, grad_gamma);
  const int64_t cols = gamma.numel();
  const int64_t rows = rstd.numel();
  const FloatsIn px = read(x), pg = read(gamma), pr = read(rstd), pdy = read(grad_out);
  FloatsOut pdx = write(grad_x), pdgamma = write(grad_gamma);
  // As layer_norm_backward: rows in blocks of rows, then gamma's gradient in blocks of columns,
  // each column summed over the rows in row order (any thread count gives the bits of one).
  parallel_blocks(rows, rows_per_block(cols), [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) {
      const float* row = px.get() + r * cols;
      const float* dy = pdy.get() + r * cols;
      // dx = rstd * (dxhat - xhat * mean(dxhat * xhat)), with xhat = x * rstd and dxhat = dy * gamma.
      double sum_dxhat_xhat = 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        sum_dxhat_xhat += static_cast<double>(dy[c]) * pg[c] * (row[c] * static_cast<double>(pr[r]));
      }
      const double mean_dxhat_xhat = sum_dxhat_xhat / static_cast<double>(cols);
      for (int64_t c = 0; c < cols; ++c) {
        const double xhat = row[c] * static_cast<double>(pr[r]);
        const double dxhat = static_cast<double>(dy[c]) * pg[c];
        pdx[r * cols + c] = static_cast<float>(pr[r] * (dxhat - xhat * mean_dxhat_xhat));
      }
    }
  });
  parallel_blocks(cols, rows_per_block(rows), [&](int64_t first, int64_t last) {
    std::vector<double> dgamma(static_cast<size_t>(last - first), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = px.get() + r * cols;
      const float* dy = pdy.get() + r * cols;
      for (int64_t c = first; c < last; ++c) dgamma[c - first] += dy[c] * (row[c] * static_cast<double>(pr[r]));
    }
    for (int64_t c = first; c < last; ++c) pdgamma[c] = static_cast<float>(dgamma[c - first]);
  });
}

void CpuKernels::causal_softmax_forward(const Tensor& scores, Tensor& out) {
  const int64_t steps = scores.rank() >= 2 ? scores.dim(-1) : 0;
  check_causal_softmax_forward_sizes(scores, out);
  const int64_t rows = steps == 0 ? 0 : scores.numel() / steps;
  const FloatsIn ps = read(scores);
  FloatsOut po = write(out);
  const int64_t leak = math_bug_on(MathBug::causal_mask_leaks_next_token) ? 1 : 0;
  parallel_blocks(rows, rows_per_block(steps), [&](int64_t first, int64_t last) {
    std::vector<double> exps(static_cast<size_t>(steps));  // each exponential computed once
    for (int64_t r = first; r < last; ++r) {
      const int64_t visible = std::min(r % steps + 1 + leak, steps);  // query position i sees keys 0..i
      const float* s = ps.get() + r * steps;
      float* p = po.get() + r * steps;
      softmax_row(s, visible, exps.data(), p);
      std::fill(p + visible, p + steps, 0.0f);
    }
  });
}

void CpuKernels::causal_softmax_backward(const Tensor& out, const Tensor& grad_out, Tensor& grad_scores) {
  const int64_t steps = out.rank() >= 2 ? out.dim(-1) : 0;
  check_causal_softmax_backward_sizes(out, grad_out, grad_scores);
  const int64_t rows = steps == 0 ? 0 : out.numel() / steps;
  const FloatsIn pp = read(out), pg = read(grad_out);
  FloatsOut pd = write(grad_scores);
  parallel_blocks(rows, rows_per_block(steps), [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) {
      const float* p = pp.get() + r * steps;
      const float* g = pg.get() + r * steps;
      float* d = pd.get() + r * steps;
      double dot = 0.0;
      for (int64_t j = 0; j < steps; ++j) dot += static_cast<double>(p[j]) * g[j];
      // Masked positions have p = 0, so their gradient is 0 without a separate mask.
      for (int64_t j = 0; j < steps; ++j) d[j] = static_cast<float>(p[j] * (g[j] - dot));
    }
  });
}

void CpuKernels::cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& loss, Tensor& probs) {
  const int64_t rows = logits.dim(0), vocab = logits.dim(1);
  check_cross_entropy_forward_sizes(logits, targets, loss, probs);
  const FloatsIn pl = read(logits), pt = read(targets);
  FloatsOut pp = write(probs), ploss = write(loss);
  const std::vector<int64_t> target_of = checked_targets(pt, rows, vocab);
  // Each row's loss term in parallel, their sum in row order afterwards: the bits of one thread.
  std::vector<double> row_loss(static_cast<size_t>(rows));
  parallel_blocks(rows, rows_per_block(vocab), [&](int64_t first, int64_t last) {
    std::vector<double> exps(static_cast<size_t>(vocab));  // each exponential computed once
    for (int64_t r = first; r < last; ++r) {
      const float* row = pl.get() + r * vocab;
      float* p = pp.get() + r * vocab;
      const SoftmaxRow softmax = softmax_row(row, vocab, exps.data(), p);
      row_loss[r] = std::log(softmax.denominator) + softmax.max - row[target_of[r]];
    }
  });
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) total += row_loss[r];
  ploss[0] = static_cast<float>(total / static_cast<double>(rows));
}

void CpuKernels::cross_entropy_backward(const Tensor& probs, const Tensor& targets, const Tensor& grad_loss,
                                        Tensor& grad_logits) {
  const int64_t rows = probs.dim(0), vocab = probs.dim(1);
  check_cross_entropy_backward_sizes(probs, targets, grad_loss, grad_logits);
  const float factor = read(grad_loss)[0] / static_cast<float>(rows);
  const FloatsIn pp = read(probs), pt = read(targets);
  FloatsOut pg = write(grad_logits);
  const std::vector<int64_t> target_of = checked_targets(pt, rows, vocab);
  parallel_blocks(rows, rows_per_block(vocab), [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) {
      const float* p = pp.get() + r * vocab;
      float* g = pg.get() + r * vocab;
      for (int64_t v = 0; v < vocab; ++v) g[v] = p[v] * factor;
      g[target_of[r]] -= factor;
    }
  });
}

}  // namespace zero3
