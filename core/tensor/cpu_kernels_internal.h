// The CpuKernels class and the helpers its files (cpu_kernels*.cc) share; private to those files.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/tensor/kernels.h"

namespace zero3 {

// A kernel's read of one operand as floats: f32 in place, bf16 widened (exactly) into a scratch
// copy. The reference kernels compute in float whatever the storage dtype.
class FloatsIn {
 public:
  FloatsIn(const Tensor& tensor, Device device);
  const float* get() const { return data_; }
  float operator[](int64_t index) const { return data_[index]; }

 private:
  std::vector<float> widened_;
  const float* data_ = nullptr;
};

// A kernel's write of one operand as floats. For bf16 the scratch starts as the tensor's values
// (kernels that accumulate read them) and is rounded to nearest even into the storage when the
// scope ends: each kernel rounds its outputs once, as a bf16 GPU kernel storing its result does.
class FloatsOut {
 public:
  FloatsOut(Tensor& tensor, Device device);
  ~FloatsOut();
  FloatsOut(const FloatsOut&) = delete;
  FloatsOut& operator=(const FloatsOut&) = delete;
  float* get() { return data_; }
  float& operator[](int64_t index) { return data_[index]; }

 private:
  Tensor& tensor_;
  std::vector<float> scratch_;
  float* data_ = nullptr;
};

// On a function holding a hot elementwise loop: compiled for AVX2 and for baseline x86-64, the
// one the CPU has chosen when the program loads. Both run the same IEEE operations (AVX2 brings
// no FMA, and contraction is off), so the bits are the same at twice the vector width.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define ZERO3_AVX2_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define ZERO3_AVX2_CLONES
#endif

// body(begin, end) over [0, count) in fixed blocks of `block` items, the blocks shared among
// OpenMP's threads (OMP_NUM_THREADS, as OpenBLAS takes OPENBLAS_NUM_THREADS) when there are at
// least two blocks' worth of work. Only for loops whose items are independent (an element, or a
// row, computed from its own inputs in its own order): then the split changes nothing but which
// thread computes what, and the bits are the same at every thread count. Bodies must not throw.
// Small tensors stay on the calling thread: a parallel region costs microseconds.
template <class Body>
void parallel_blocks(int64_t count, int64_t block, Body body) {
  const int64_t blocks = block > 0 ? (count + block - 1) / block : 0;
#ifdef _OPENMP
  if (blocks >= 2 && omp_get_max_threads() > 1) {
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) body(b * block, std::min(count, (b + 1) * block));
    return;
  }
#endif
  if (count > 0) body(0, count);
}

// Items per block for elementwise loops (a block is a few microseconds of work), and the rows of
// a row-wise kernel that make about as much.
inline constexpr int64_t kElementBlock = 16384;
inline int64_t rows_per_block(int64_t columns) { return std::max<int64_t>(1, kElementBlock / std::max<int64_t>(1, columns)); }

// Every operand of a kernel lives on the kernels' device; anything else is a programmer error.
// Inline: it guards every operand of every kernel, and the call alone was measurable.
[[noreturn]] void operand_not_resident(const Tensor& tensor, Device device);
inline void require_resident(const Tensor& tensor, Device device) {
  if (!tensor.defined() || tensor.device() != device) [[unlikely]] operand_not_resident(tensor, device);
}

// Ops validate ids and targets with a ShapeError; here a bad one is a programmer error.
int64_t checked_row(float value, int64_t rows);

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

// The reference kernels over host-addressable bytes. `device` is where operands must live: cpu
// for cpu_kernels(); the simulator's opaque device runs the same code over its own memory.
class CpuKernels final : public Kernels {
 public:
  explicit CpuKernels(Device device, const char* name) : device_(device), name_(name) {}
  const char* name() const override { return name_; }
  Device device() const override { return device_; }

  // cpu_kernels_elementwise.cc
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
  void sum_all(const Tensor& in, Tensor& out_scalar) override;
  void average(const Tensor& in, Tensor& out_scalar) override;
  void sum_of_squares_into(const std::vector<TensorRange>& parts, Tensor& out, int64_t index,
                           double divisor) override;
  void adamw(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamWCoefficients& coefficients) override;

  // cpu_kernels_matmul.cc
  void matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& out, int64_t batch, int64_t m,
              int64_t n, int64_t k, bool b_shared, float beta) override;

  // cpu_kernels_normalization.cc
  void layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& out,
                          Tensor& mean, Tensor& rstd) override;
  void layer_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                           const Tensor& grad_out, Tensor& grad_x, Tensor& grad_gamma, Tensor& grad_beta) override;
  void rms_norm_forward(const Tensor& x, const Tensor& gamma, float eps, Tensor& out, Tensor& rstd) override;
  void rms_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& rstd, const Tensor& grad_out,
                         Tensor& grad_x, Tensor& grad_gamma) override;
  void causal_softmax_forward(const Tensor& scores, Tensor& out) override;
  void causal_softmax_backward(const Tensor& out, const Tensor& grad_out, Tensor& grad_scores) override;
  void cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& loss, Tensor& probs) override;
  void cross_entropy_backward(const Tensor& probs, const Tensor& targets, const Tensor& grad_loss,
                              Tensor& grad_logits) override;

  // cpu_kernels_indexing.cc
  void permute(const Tensor& in, const std::vector<int64_t>& perm, Tensor& out) override;
  void slice(const Tensor& in, int64_t dim, int64_t start, Tensor& out) override;
  void slice_backward_into(const Tensor& grad_part, int64_t dim, int64_t start, Tensor& grad_in) override;
  void select_rows(const Tensor& x, const std::vector<int64_t>& rows, Tensor& out) override;
  void select_rows_backward_into(const Tensor& grad_out, const std::vector<int64_t>& rows, Tensor& grad_x) override;
  void embedding_forward(const Tensor& table, const Tensor& ids, Tensor& out) override;
  void embedding_backward_into(const Tensor& grad_out, const Tensor& ids, Tensor& grad_table) override;

 protected:
  void download(const Tensor& device_tensor, Tensor& host) override;
  void upload(const Tensor& host, Tensor& device_tensor) override;

 private:
  // Operand access, checked to be resident on this device.
  FloatsIn read(const Tensor& tensor) const { return FloatsIn(tensor, device_); }
  FloatsOut write(Tensor& tensor) const { return FloatsOut(tensor, device_); }

  Device device_;
  const char* name_;
};

}  // namespace zero3
