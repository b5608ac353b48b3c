// Kernels that normalise rows: layer norm, RMSNorm, causal softmax, and cross-entropy with its softmax. One
// thread block per row runs the row functions of cuda_element_functions.h on a BlockTeam; sums
// across rows (layer norm's parameter gradients, the mean loss) use fixed-shape reductions.
#include <string>

#include "backend_cuda/cuda/cuda_kernels_internal.h"
#include "core/tensor/kernel_preconditions.h"

namespace zero3 {
namespace {

unsigned row_blocks(int64_t rows) { return static_cast<unsigned>(std::min<int64_t>(rows, kMaxBlocks)); }

// Rows are spread over the blocks; the loop bound is the same for every thread of a block, so
// all of them reach the team's block-wide sums together.
__global__ void layer_norm_forward_kernel(ElementsIn x, ElementsIn gamma, ElementsIn beta, float eps, ElementsOut out,
                                          ElementsOut mean, ElementsOut rstd, int64_t rows, int64_t cols) {
  const BlockTeam team{};
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    cuda_math::layer_norm_forward_row(team, x, gamma, beta, eps, out, mean, rstd, row, cols);
  }
}

__global__ void layer_norm_backward_kernel(ElementsIn x, ElementsIn gamma, ElementsIn mean, ElementsIn rstd,
                                           ElementsIn grad_out, ElementsOut grad_x, int64_t rows, int64_t cols) {
  const BlockTeam team{};
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    cuda_math::layer_norm_backward_row(team, x, gamma, mean, rstd, grad_out, grad_x, row, cols);
  }
}

__global__ void rms_norm_forward_kernel(ElementsIn x, ElementsIn gamma, float eps, ElementsOut out, ElementsOut rstd,
                                        int64_t rows, int64_t cols) {
  const BlockTeam team{};
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    cuda_math::rms_norm_forward_row(team, x, gamma, eps, out, rstd, row, cols);
  }
}

__global__ void rms_norm_backward_kernel(ElementsIn x, ElementsIn gamma, ElementsIn rstd, ElementsIn grad_out,
                                         ElementsOut grad_x, int64_t rows, int64_t cols) {
  const BlockTeam team{};
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    cuda_math::rms_norm_backward_row(team, x, gamma, rstd, grad_out, grad_x, row, cols);
  }
}

// Output c < cols of the parameter-gradient sums is grad_gamma[c], output cols + c grad_beta[c].
struct StoreParameterGradients {
  ElementsOut grad_gamma, grad_beta;
  int64_t cols = 0;
  __device__ void operator()(int64_t output, double total) const {
    if (output < cols) {
      grad_gamma.store(output, static_cast<float>(total));
    } else {
      grad_beta.store(output - cols, static_cast<float>(total));
    }
  }
};

__global__ void causal_softmax_forward_kernel(ElementsIn scores, ElementsOut out, int64_t rows, int64_t steps) {
  const BlockTeam team{};
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    cuda_math::causal_softmax_forward_row(team, scores, out, row, steps);
  }
}

__global__ void causal_softmax_backward_kernel(ElementsIn probs, ElementsIn grad_out, ElementsOut grad_scores,
                                               int64_t rows, int64_t steps) {
  const BlockTeam team{};
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    cuda_math::causal_softmax_backward_row(team, probs, grad_out, grad_scores, row, steps);
  }
}

__global__ void cross_entropy_rows_kernel(ElementsIn logits, ElementsIn targets, ElementsOut probs, double* row_loss,
                                          int64_t rows, int64_t vocab) {
  const BlockTeam team{};
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const double loss = cuda_math::cross_entropy_forward_row(team, logits, targets, probs, row, vocab);
    if (team.leader()) row_loss[row] = loss;
  }
}

// One block sums the rows' loss terms (a fixed tree: the same bits every run) into the mean.
__global__ void mean_loss_kernel(const double* row_loss, int64_t rows, ElementsOut loss) {
  double local = 0.0;
  for (int64_t row = threadIdx.x; row < rows; row += blockDim.x) local += row_loss[row];
  const double total = block_sum(local);
  if (threadIdx.x == 0) loss.store(0, cuda_math::mean_loss(total, rows));
}

// A row whose target lies outside the vocabulary (the ops reject those first) gets NaN gradients.
__global__ void cross_entropy_backward_kernel(ElementsIn probs, ElementsIn targets, ElementsIn grad_loss,
                                              ElementsOut grad_logits, int64_t rows, int64_t vocab) {
  const float factor = cuda_math::cross_entropy_factor(grad_loss[0], rows);
  for (int64_t i = first_index(); i < rows * vocab; i += index_stride()) {
    const int64_t target = cuda_math::row_index(targets[i / vocab], vocab);
    const float gradient = cuda_math::cross_entropy_gradient(probs[i], factor, i % vocab == target);
    grad_logits.store(i, target < 0 ? cuda_math::quiet_nan() : gradient);
  }
}

}  // namespace

void CudaKernels::layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps,
                                     Tensor& out, Tensor& mean, Tensor& rstd) {
  check_layer_norm_forward_sizes(x, gamma, beta, out, mean, rstd);
  const int64_t cols = gamma.numel();
  const int64_t rows = mean.numel();
  const ElementsIn px = read(x), pg = read(gamma), pb = read(beta);
  const ElementsOut po = write(out), pm = write(mean), pr = write(rstd);
  if (rows == 0) return;
  layer_norm_forward_kernel<<<row_blocks(rows), row_threads(cols), 0, stream()>>>(px, pg, pb, eps, po, pm, pr, rows,
                                                                                 cols);
  check_launch("layer_norm_forward_kernel");
}

void CudaKernels::layer_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                                      const Tensor& grad_out, Tensor& grad_x, Tensor& grad_gamma, Tensor& grad_beta) {
  check_layer_norm_backward_sizes(x, gamma, mean, grad_out, grad_x, grad_gamma, grad_beta);
  const int64_t cols = gamma.numel();
  const int64_t rows = mean.numel();
  const ElementsIn px = read(x), pg = read(gamma), pm = read(mean), pr = read(rstd), pdy = read(grad_out);
  const ElementsOut pdx = write(grad_x), pdgamma = write(grad_gamma), pdbeta = write(grad_beta);
  if (x.numel() > 0) {
    layer_norm_backward_kernel<<<row_blocks(rows), row_threads(cols), 0, stream()>>>(px, pg, pm, pr, pdy, pdx, rows,
                                                                                    cols);
    check_launch("layer_norm_backward_kernel");
  }
  // Each column summed over the rows, gamma's and beta's columns in one pair of launches.
  const cuda_math::LayerNormParameterTerm term{.x = px, .mean = pm, .rstd = pr, .grad_out = pdy, .cols = cols};
  split_sums(term, 2 * cols, rows, StoreParameterGradients{.grad_gamma = pdgamma, .grad_beta = pdbeta, .cols = cols});
}

void CudaKernels::rms_norm_forward(const Tensor& x, const Tensor& gamma, float eps, Tensor& out, Tensor& rstd) {
  check_rms_norm_forward_sizes(x, gamma, out, rstd);
  const int64_t cols = gamma.numel();
  const int64_t rows = rstd.numel();
  const ElementsIn px = read(x), pg = read(gamma);
  const ElementsOut po = write(out), pr = write(rstd);
  if (rows == 0) return;
  rms_norm_forward_kernel<<<row_blocks(rows), row_threads(cols), 0, stream()>>>(px, pg, eps, po, pr, rows, cols);
  check_launch("rms_norm_forward_kernel");
}

void CudaKernels::rms_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& rstd, const Tensor& grad_out,
                                    Tensor& grad_x, Tensor& grad_gamma) {
  check_rms_norm_backward_sizes(x, gamma, rstd, grad_out, grad_x, grad_gamma);
  const int64_t cols = gamma.numel();
  const int64_t rows = rstd.numel();
  const ElementsIn px = read(x), pg = read(gamma), pr = read(rstd), pdy = read(grad_out);
  const ElementsOut pdx = write(grad_x), pdgamma = write(grad_gamma);
  if (x.numel() > 0) {
    rms_norm_backward_kernel<<<row_blocks(rows), row_threads(cols), 0, stream()>>>(px, pg, pr, pdy, pdx, rows, cols);
    check_launch("rms_norm_backward_kernel");
  }
  const cuda_math::RmsNormParameterTerm term{.x = px, .rstd = pr, .grad_out = pdy, .cols = cols};
  split_sums(term, cols, rows, StoreSum{.out = pdgamma});
}

void CudaKernels::causal_softmax_forward(const Tensor& scores, Tensor& out) {
  const int64_t steps = scores.rank() >= 2 ? scores.dim(-1) : 0;
  check_causal_softmax_forward_sizes(scores, out);
  const int64_t rows = steps == 0 ? 0 : scores.numel() / steps;
  const ElementsIn ps = read(scores);
  const ElementsOut po = write(out);
  if (rows == 0) return;
  causal_softmax_forward_kernel<<<row_blocks(rows), row_threads(steps), 0, stream()>>>(ps, po, rows, steps);
  check_launch("causal_softmax_forward_kernel");
}

void CudaKernels::causal_softmax_backward(const Tensor& out, const Tensor& grad_out, Tensor& grad_scores) {
  const int64_t steps = out.rank() >= 2 ? out.dim(-1) : 0;
  check_causal_softmax_backward_sizes(out, grad_out, grad_scores);
  const int64_t rows = steps == 0 ? 0 : out.numel() / steps;
  const ElementsIn pp = read(out), pg = read(grad_out);
  const ElementsOut pd = write(grad_scores);
  if (rows == 0) return;
  causal_softmax_backward_kernel<<<row_blocks(rows), row_threads(steps), 0, stream()>>>(pp, pg, pd, rows, steps);
  check_launch("causal_softmax_backward_kernel");
}

void CudaKernels::cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& loss, Tensor& probs) {
  const int64_t rows = logits.dim(0), vocab = logits.dim(1);
  check_cross_entropy_forward_sizes(logits, targets, loss, probs);
  const ElementsIn pl = read(logits), pt = read(targets);
  const ElementsOut pp = write(probs), ploss = write(loss);
  Tensor row_loss = scratch(rows * static_cast<int64_t>(sizeof(double)));
  auto* row_losses = static_cast<double*>(row_loss.device_bytes());
  cross_entropy_rows_kernel<<<row_blocks(rows), row_threads(vocab), 0, stream()>>>(pl, pt, pp, row_losses, rows,
                                                                                  vocab);
  check_launch("cross_entropy_rows_kernel");
  mean_loss_kernel<<<1, kThreads, 0, stream()>>>(row_losses, rows, ploss);
  check_launch("mean_loss_kernel");
}

void CudaKernels::cross_entropy_backward(const Tensor& probs, const Tensor& targets, const Tensor& grad_loss,
                                         Tensor& grad_logits) {
  const int64_t rows = probs.dim(0), vocab = probs.dim(1);
  check_cross_entropy_backward_sizes(probs, targets, grad_loss, grad_logits);
  const ElementsIn pp = read(probs), pt = read(targets), pg = read(grad_loss);
  const ElementsOut pd = write(grad_logits);
  if (probs.numel() == 0) return;
  cross_entropy_backward_kernel<<<blocks_for(probs.numel()), kThreads, 0, stream()>>>(pp, pt, pg, pd, rows, vocab);
  check_launch("cross_entropy_backward_kernel");
}

}  // namespace zero3
