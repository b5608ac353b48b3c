// HazardCheckingKernels: a Kernels decorator that catches a rank touching a buffer still in flight
// in one of its collectives, then forwards to the inner kernels. Reading the output of an
// in-flight collective (a missing wait) and writing any buffer an in-flight collective reads or
// writes both throw CorrectnessError naming the kernel, the collective, its sequence number and
// CallSite. The simulator completes collectives when its seeded schedule says so, so a missing
// wait is found deterministically for a given seed.
//
//   HazardCheckingKernels kernels(cpu_kernels(), in_flight, rank);
//   auto work = comm.all_gather_async(shard, full, site);
//   kernels.scale(full, 2.0f, out);   // throws: full is the output of all_gather #0, in flight
//   work->wait();
//   kernels.scale(full, 2.0f, out);   // fine
#pragma once
#include <initializer_list>

#include "core/tensor/kernels.h"
#include "sim/in_flight_buffers.h"

namespace zero3 {

class HazardCheckingKernels : public Kernels {
 public:
  HazardCheckingKernels(Kernels& inner, const InFlightBuffers& in_flight, int rank)
      : inner_(inner), in_flight_(in_flight), rank_(rank) {}

  const char* name() const override { return inner_.name(); }
  Device device() const override { return inner_.device(); }
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) override;
  void sum_to_shape(const Tensor& in, Tensor& out) override;
  void unary(UnaryOp op, const Tensor& in, Tensor& out) override;
  void unary_backward(UnaryOp op, const Tensor& in, const Tensor& grad_out, Tensor& grad_in) override;
  void scale(const Tensor& in, float factor, Tensor& out) override;
  void add_into(Tensor& accumulator, const Tensor& addend) override;
  void fill(Tensor& out, float value) override;
  void copy(const Tensor& in, Tensor& out) override;
  void copy_segments(const Tensor& in, Tensor& out, const std::vector<CopySegment>& segments) override;
  void fill_range(Tensor& out, int64_t begin, int64_t count, float value) override;
  void fill_from_scalar(Tensor& out, const Tensor& scalar, float multiplier, float divisor) override;
  void scale_by_scalar(const Tensor& in, const Tensor& scalar, float multiplier, float divisor, Tensor& out) override;
  void row_argmax(const Tensor& x, Tensor& out) override;
  void matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& out, int64_t batch, int64_t m,
              int64_t n, int64_t k, bool b_shared, float beta) override;
  void layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& out,
                          Tensor& mean, Tensor& rstd) override;
  void layer_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                           const Tensor& grad_out, Tensor& grad_x, Tensor& grad_gamma, Tensor& grad_beta) override;
  void rms_norm_forward(const Tensor& x, const Tensor& gamma, float eps, Tensor& out, Tensor& rstd) override;
  void rms_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& rstd, const Tensor& grad_out,
                         Tensor& grad_x, Tensor& grad_gamma) override;
  void embedding_forward(const Tensor& table, const Tensor& ids, Tensor& out) override;
  void embedding_backward_into(const Tensor& grad_out, const Tensor& ids, Tensor& grad_table) override;
  void cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& loss, Tensor& probs) override;
  void cross_entropy_backward(const Tensor& probs, const Tensor& targets, const Tensor& grad_loss,
                              Tensor& grad_logits) override;
  void causal_softmax_forward(const Tensor& scores, Tensor& out) override;
  void causal_softmax_backward(const Tensor& out, const Tensor& grad_out, Tensor& grad_scores) override;
  void permute(const Tensor& in, const std::vector<int64_t>& perm, Tensor& out) override;
  void slice(const Tensor& in, int64_t dim, int64_t start, Tensor& out) override;
  void slice_backward_into(const Tensor& grad_part, int64_t dim, int64_t start, Tensor& grad_in) override;
  void select_rows(const Tensor& x, const std::vector<int64_t>& rows, Tensor& out) override;
  void select_rows_backward_into(const Tensor& grad_out, const std::vector<int64_t>& rows, Tensor& grad_x) override;
  void sum_all(const Tensor& in, Tensor& out_scalar) override;
  void average(const Tensor& in, Tensor& out_scalar) override;
  void sum_of_squares_into(const std::vector<TensorRange>& parts, Tensor& out, int64_t index,
                           double divisor) override;
  void adamw(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamWCoefficients& coefficients) override;

 protected:
  // A download reads the device tensor (a missing wait before a host read is a hazard too).
  void download(const Tensor& device_tensor, Tensor& host) override;
  void upload(const Tensor& host, Tensor& device_tensor) override;

 private:
  // Throws CorrectnessError when a read tensor is written by an in-flight collective, or a written
  // tensor is read or written by one.
  void check(const char* kernel, std::initializer_list<const Tensor*> reads,
             std::initializer_list<const Tensor*> writes) const;

  Kernels& inner_;
  const InFlightBuffers& in_flight_;
  int rank_;
};

}  // namespace zero3
