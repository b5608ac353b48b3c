// ReplayDriver: runs one rank's recorded events through the ZeRO-3 engine's hooks, as the model's
// own forward and backward would: module enters and exits go through the Context (so the engine
// fetches and releases), checked accesses through ctx.param, and backward through autograd over a
// tape of module markers. Between the markers the driver records tiny tape ops that charge the
// module's compute to the simulated clock and account activations and full gradients, so that
// backward costs and frees what forward saved, in autograd's order.
//
//   ReplayDriver driver(trace, config, hardware, kernel_rates, model, engine, ctx, clock, memory, result);
//   for (int64_t s = 0; s < steps; ++s) driver.run_step(trace.steps[0], s);
#pragma once
#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/zero3/zero3_engine.h"
#include "traces/replay/kernel_rates.h"
#include "traces/replay/stream_clock.h"
#include "traces/format/trace.h"
#include "traces/format/trace_model.h"
#include "traces/replay/tracking_allocator.h"

namespace zero3 {

inline constexpr double kOpenSpan = -1.0;  // the end of a span that has not ended yet

struct TimelineSpan {
  std::string name{};
  std::string category{};  // "step", "phase", "forward", "recompute", "backward", "optimizer", "offload"
  double start_s = 0.0;
  double end_s = kOpenSpan;
};

// Something the replay found that a user should know (FORMAT.md, "Checks").
struct Finding {
  std::string kind{};  // raw_placeholder, trace_invalidation, backward_order, silent_divergence
  int rank = 0;
  int64_t step = 0;
  std::string module{};
  std::string param{};
  std::string detail{};
};

// What one replayed rank leaves behind: its timeline, memory and findings.
struct RankReplay {
  int rank = 0;
  // The rank whose simulation this one shares (ranks with identical event streams run once, as
  // the lowest of them; traces/replay/replay.h), else its own. A sharing rank holds the same results under
  // its own number, but not the timeline (compute, memory): ShapeReplayResult::simulated has it.
  int simulated_rank = 0;
  std::vector<TimelineSpan> compute{};  // spans on the compute stream; they nest
  std::vector<double> step_start_s{};
  std::vector<double> step_end_s{};
  double compute_busy_s = 0.0;        // time spent on flops, excluding waits for collectives
  std::vector<double> step_compute_s{}; // compute_busy_s of each step
  // Flops of each step: the model's (forward and backward, what MFU counts) and a checkpointed
  // module's forward run again in backward (which hardware flops utilisation counts as well).
  std::vector<double> step_model_flops{};
  std::vector<double> step_recompute_flops{};
  std::vector<double> step_offload_s{}; // ZeRO-Offload's copies and host AdamW in each step
  int64_t device_to_host_bytes = 0;     // offload copies over the whole replay
  int64_t host_to_device_bytes = 0;
  std::array<PeakMoment, kMemoryCategoryCount> peaks{};
  PeakMoment peak_total{};
  std::vector<MemorySample> memory{};
  std::vector<Finding> findings{};
  EngineCounters counters{};
  bool finished = false;               // false when a collective failure ended the rank early
};

class ReplayDriver {
 public:
  // `kernel_rates`: what prices the trace's recorded kernel work (kernel_rates.h); without them, or
  // without recorded work, a module's compute is its flops and its backward twice its forward.
  ReplayDriver(const Trace& trace, const TrainConfig& config, const HardwareProfile& hardware,
               const KernelRates& kernel_rates, TraceModel& model, Zero3Engine& engine, Context& ctx,
               ReplayClock& clock, TrackingAllocator& memory, RankReplay& out);

  void run_step(const TraceStep& step, int64_t step_index);
  // Ends the spans a failure left open at the current time, so the timeline still nests.
  void close_open_spans();
  // Called by the ObservedCommunicator as each collective is issued.
  void on_collective(CollectiveOp op, const CallSite& site);

 private:
  struct Invocation {
    int32_t module = -1;
    int64_t invocation = 0;
    double start_s = 0.0;
    double flops = 0.0;
    KernelWork forward_work{};   // recorded (FORMAT.md, "Kernel work"); priced when price_work_
    KernelWork backward_work{};
    int64_t activation_bytes = 0;
    std::vector<int32_t> used_params;  // checked accesses: they get gradients in backward
    // Activation checkpointing: the output bytes a checkpointed invocation keeps until its backward
    // ends, and the activations its nested invocations acquired at their exits (released at its
    // exit, acquired again as backward recomputes them).
    int64_t output_bytes = 0;
    int64_t kept_bytes = 0;
    int64_t nested_held_bytes = 0;
    // What a PyTorch recorder measured (FORMAT.md): the inputs non-reentrant checkpointing keeps,
    // and the transient peaks of the module's own ops in forward and in backward.
    int64_t input_bytes = 0;
    int64_t forward_transient = 0;
    int64_t backward_transient = 0;
    int64_t released_at_backward_begin = 0;  // of activation_bytes
  };

  void forward_event(const TraceEvent& event);
  void enter(const TraceEvent& event);
  void access(int32_t module, int32_t param);
  void raw_access(int32_t module, int32_t param);
  void exit(int32_t module);
  void backward_begin(const Invocation& invocation);
  void backward_end(Invocation& invocation);
  // `loss`: the backward event: the bytes the ops outside every module keep, held from backward's
  // start until it ends, and their transient peaks.
  void run_backward(const std::vector<int32_t>& recorded_order, const TraceEvent& loss);
  // A transient peak: `bytes` of activations held for an instant on top of what is held now.
  void transient(int64_t bytes, const std::string& what);
  // `recompute`: what running this op again in a checkpointed module's recompute does first.
  void record_on_tape(std::function<void()> action, std::function<void()> recompute = {});
  bool starts_checkpoint(int32_t module) const;  // checkpointed, and not inside a checkpointed one
  void recompute_exit(const std::shared_ptr<Invocation>& invocation);
  double own_flops(int32_t module, double recorded) const;
  // `kind`: what the flops are, for the step's counts.
  enum class FlopsKind { model, recompute };
  void compute(double flops, FlopsKind kind = FlopsKind::model);
  // Recorded kernel work: its GEMM flops as compute() does, the rest at the profile's rates.
  // At `rates` when given (the optimizer's passes), else the profile's kernel rates.
  void compute_work(const KernelWork& work, FlopsKind kind = FlopsKind::model,
                    const std::optional<KernelRates>& rates = std::nullopt);
  // ZeRO-Offload at the step's end: the copies counted since the last step over the host link and
  // host AdamW over the trained shard elements, on the compute stream (DeepSpeed waits for them).
  void optimizer_on_device();
  // What the engine's optimizer step moves besides AdamW, priced with the kernel work's rates.
  KernelWork optimizer_step_work(int64_t shard_elements, int64_t trained_params) const;
  void offload_at_step_end();
  void note_invalidations(const std::string& module);
  void add_finding(std::string kind, int32_t module, int32_t param, std::string detail);
  const std::string& module_name(int32_t module) const;

  const Trace& trace_;
  const TrainConfig& config_;
  const HardwareProfile& hardware_;
  const KernelRates kernel_rates_;
  const bool price_work_;  // the trace records kernel work and the profile has the rates
  TraceModel& model_;
  Zero3Engine& engine_;
  Context& ctx_;
  ReplayClock& clock_;
  TrackingAllocator& memory_;
  RankReplay& out_;
  int64_t step_ = 0;
  std::vector<std::shared_ptr<Invocation>> open_;
  std::vector<size_t> open_backward_spans_;
  std::vector<int32_t> backward_order_;
  std::unordered_map<std::string, int32_t> param_by_name_;
  std::unordered_map<int32_t, int64_t> grad_bytes_held_;  // by parameter trace index
  int64_t invalidations_seen_ = 0;
  int64_t down_seen_ = 0;  // the engine's offload counters at the last step's end
  int64_t up_seen_ = 0;
  double model_flops_ = 0.0;      // this step's so far
  double recompute_flops_ = 0.0;
};

}  // namespace zero3
