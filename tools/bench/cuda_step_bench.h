// `zero3 bench step --backend cuda`: `zero3 train --backend cuda`'s step timed on this machine's
// GPUs (ms/step, tokens/s, MFU), and in the same run the ceiling its GEMMs set: the GEMMs rank 0
// ran in one step, replayed alone through the same cuBLAS calls (backend_cuda/cuda/cuda_gemm_timing.h).
// The report states the step's throughput as a fraction of that GEMM-only throughput, so a slow
// step is told apart from slow GEMMs: whatever the fraction lacks of 1 is spent outside the GEMMs
// (elementwise kernels, collectives not hidden behind compute, host waits, launch gaps).
//
//   run_cuda_step_bench({.model = "gpt-19m", .warmup_steps = 3, .timed_steps = 20, .bf16 = true});
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace zero3 {

struct CudaStepBenchOptions {
  std::string model = "gpt-tiny";
  uint64_t seed = 1;
  int64_t warmup_steps = 3;  // at least 1: the GEMMs are recorded in the last warm-up step
  int64_t timed_steps = 20;
  std::optional<int64_t> micro_batch_size;  // examples per rank per micro-step; default the train config's
  bool bf16 = false;
  std::optional<int> gpus;  // local GPUs driven by this process; default every visible one (or the launcher's world)
  std::string report_path;  // "" for none
};

// Rank 0 prints the table and writes the report. BackendError (exit 4) without a usable GPU,
// InputError (exit 1) for a model whose step runs no GEMM (there is no ceiling to compare with).
void run_cuda_step_bench(const CudaStepBenchOptions& options);

}  // namespace zero3
