// KernelRates: what a hardware profile says the memory-bound kernels, transcendental evaluations
// and kernel calls cost (FORMAT.md, "Hardware profiles"), and the seconds of a stretch of recorded
// kernel work (kernel_work.h) at them. Replay prices a module's compute as
//   flops / peak_flops + bytes / memory_bytes_per_s + transcendentals / transcendentals_per_s
//   + calls * call_s
// when the trace records work and the profile has the memory bandwidth; a rate the profile leaves
// out prices its part at 0 s, and a profile without memory_bandwidth prices flops alone.
//
//   KernelRates rates{.memory_bytes_per_s = 10e9, .transcendentals_per_s = 1e8, .call_s = 2e-6};
//   double seconds = non_gemm_seconds(event.forward_work, rates);   // the GEMM part: flops / peak
#pragma once
#include "traces/format/kernel_work.h"

namespace zero3 {

struct KernelRates {
  double memory_bytes_per_s = 0.0;     // read + written bytes a second; 0: not in the profile
  double transcendentals_per_s = 0.0;  // 0: not priced
  double call_s = 0.0;                 // per kernel call, over its work
  // The optimizer step's passes besides AdamW (norm, refresh, zeroing) stream the rank's whole
  // shard, past the caches a model's activations fit in: their own bandwidth when the profile
  // measured it (`optimizer_passes`), else memory_bytes_per_s.
  double optimizer_passes_bytes_per_s = 0.0;
  bool prices_work() const { return memory_bytes_per_s > 0.0; }
};

// The seconds of everything but the GEMM flops (those go on the clock as flops).
inline double non_gemm_seconds(const KernelWork& work, const KernelRates& rates) {
  if (!rates.prices_work()) return 0.0;
  double seconds = work.bytes / rates.memory_bytes_per_s + static_cast<double>(work.calls) * rates.call_s;
  if (rates.transcendentals_per_s > 0.0) seconds += work.transcendentals / rates.transcendentals_per_s;
  return seconds;
}

}  // namespace zero3
