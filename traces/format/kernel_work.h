// KernelWork: what a stretch of kernel calls did, by the resource that bounds it, so that replay can
// price it with measured rates instead of flops alone (FORMAT.md, "Kernel work"). A CPU step (and a
// GPU's small ops) spends most of its time outside the GEMMs: elementwise ops, norms, softmax,
// copies are bound by the bytes they move, GELU's tanh and softmax's exp by their evaluations, and
// small kernels by their per-call overhead.
//
//   KernelWork work;   // filled by WorkCountingKernels (work_counting_kernels.h)
//   seconds = work.flops / peak_flops + work.bytes / memory_bytes_per_s
//           + work.transcendentals / transcendentals_per_s + work.calls * call_s;
#pragma once
#include <cstdint>

namespace zero3 {

struct KernelWork {
  double flops = 0.0;            // GEMM flops, 2 m n k per product (the matmul kernel only)
  double bytes = 0.0;            // read + written by the memory-bound kernels (every kernel but matmul)
  double transcendentals = 0.0;  // exp / tanh / log evaluations (GELU, softmax, cross-entropy)
  int64_t calls = 0;             // kernel calls of every kind
  // The parts of the three amounts that grow with batch x seq_len^2 rather than with tokens
  // (attention's per-head products and its causal softmax): what trace_scaling.h scales by the
  // sequence length once more. Each is at most its total.
  double flops_quadratic = 0.0;
  double bytes_quadratic = 0.0;
  double transcendentals_quadratic = 0.0;

  bool empty() const { return calls == 0 && flops == 0.0 && bytes == 0.0 && transcendentals == 0.0; }
  KernelWork& operator+=(const KernelWork& other) {
    flops += other.flops;
    bytes += other.bytes;
    transcendentals += other.transcendentals;
    calls += other.calls;
    flops_quadratic += other.flops_quadratic;
    bytes_quadratic += other.bytes_quadratic;
    transcendentals_quadratic += other.transcendentals_quadratic;
    return *this;
  }
  // What was done since `before` (a running total read earlier).
  KernelWork since(const KernelWork& before) const {
    KernelWork out = *this;
    out.flops -= before.flops;
    out.bytes -= before.bytes;
    out.transcendentals -= before.transcendentals;
    out.calls -= before.calls;
    out.flops_quadratic -= before.flops_quadratic;
    out.bytes_quadratic -= before.bytes_quadratic;
    out.transcendentals_quadratic -= before.transcendentals_quadratic;
    return out;
  }
  bool operator==(const KernelWork&) const = default;
};

}  // namespace zero3
