// Judging a differential runner's answer to a target case (tools/zero3py/runners/PROTOCOL.md):
// the framework's run against the runner's own unsharded reference, and that reference against
// zero3's DDP reference of the same case. Verdicts: agree, crash, hang, silent_divergence,
// memory_growth (memory_verdict.h, when the case measured memory) and
// reference_disagreement (the two references differ: a bug in zero3 or in the runner's model
// builder, found by the same fuzz).
//
// Tolerances (f32), as zero3py/runners/compare.py has them: per step, loss 1e-5 and gradient norm
// 1e-3 relative; final weights 1e-3 of how far training moved each tensor. The torch control
// against its reference differs by <= 3e-7 and 1e-6 of the update, zero3's reference against the
// runner's by <= 4.5e-6 of the update (tools/e2e/runner_test.py prints both).
//
//   const RunSummary zero3 = zero3_reference_run(target_case);
//   const TargetVerdict verdict = judge_answer(answer, zero3, initial_weights);
//   if (verdict.finding()) std::puts(verdict.message.c_str());
#pragma once
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tensor/tensor.h"
#include "props/target/target_case.h"

namespace zero3 {

struct RunSummary {
  std::vector<double> losses;      // per step
  std::vector<double> grad_norms;  // per step, before clipping
  std::map<std::string, Tensor> weights;
  // zero3's reference only: each element's gradient size, at least the largest it saw (from
  // AdamW's second moment and the case's beta2). AdamW divides every element's gradient by its own size, so rounding
  // noise of up to ~1e-7 in a gradient of size g moves that weight by ~1e-7/g of its update:
  // elements whose gradient never rose above the noise (1e-5) are not compared (frozen tensors,
  // which must not move, have no entry: all of them is),
  // and a tensor's tolerance widens to 1e-7 over its smallest compared gradient when that exceeds
  // 1e-3. Their steps still count in the losses and gradient norms.
  std::map<std::string, std::vector<float>> gradient_size;
  // zero3's reference only: how far this case's training moves when its rounding does. AdamW
  // steps a gradient that is rounding noise (a parameter whose true gradient is ~0) by up to lr
  // in the noise's direction, and later steps carry that on: an ill-conditioned case may spread
  // 1e-3 where a well-conditioned one spreads 1e-7. Measured by training again, with the same
  // global batch summed in other orders (on one rank, and one row per rank) and from initial
  // weights moved by 2 ulps (zeros by 2^-30; frozen ones kept): per step the loss and gradient-norm differences,
  // per tensor the weight error as first_breach measures it; the largest over the probes.
  // A breach must exceed kSpreadMargin times it.
  struct Spread {
    std::vector<double> losses, grad_norms;
    std::map<std::string, double> weights;
  } rounding_spread;
};

// How many times a case's rounding spread a difference must exceed to count: noise that moved
// one probe by x may move another run by a few x.
constexpr double kSpreadMargin = 10.0;

struct TargetTolerance {
  double loss = 1e-5;
  double grad_norm = 1e-3;  // 2.2e-4 measured on an ill-conditioned control case (a layer_norm over two nearly equal features)
  double weights = 1e-3;
};

// A case's tolerances: f32's above; a bf16 case's at bf16's resolution. Both sides round every
// bf16 activation and gradient to 8 bits, not at the same points (fused kernels, where a sum is
// widened), so two correct runs part by about one bf16 ulp of the loss and a tenth of the update
// (the outside oracle's bf16 class, tools/e2e/torch_oracle_test.py: loss 1e-2, grad norm 5e-2,
// weights 0.3 of the update, torch's own spread when only the row order changes 0.12). Each is
// widened further, as in f32, by ten times the case's measured rounding spread.
TargetTolerance target_tolerance(const TargetCase& target_case);

enum class TargetVerdictKind { agree, crash, hang, silent_divergence, memory_growth, reference_disagreement, unsupported };
const char* target_verdict_name(TargetVerdictKind kind);

struct TargetVerdict {
  TargetVerdictKind kind = TargetVerdictKind::agree;
  std::string message;
  // What makes two findings the same bug: the verdict, and for a crash the exception's type and
  // the stable part of its message (numbers, paths and names left out), and where it was raised.
  std::string signature;
  bool finding() const { return kind != TargetVerdictKind::agree && kind != TargetVerdictKind::unsupported; }
};

// zero3's DDP reference of the case (stage 0, the case's init weights and data): CorrectnessError
// when it fails (the reference must train every generated case).
RunSummary zero3_reference_run(const TargetCase& target_case);
// The case's init weights by name, as write_target_case writes them.
std::map<std::string, Tensor> initial_weights(const TargetCase& target_case);

// Where `ours` first leaves `reference`'s tolerance. The quantity tells divergences apart in a
// finding's signature: a wrong forward shows in the loss, a wrong backward first in the gradient
// norm (its loss in tolerance), a wrong step only in the final weights.
struct Breach {
  std::string quantity;  // "" (within tolerance), "step count", "loss", "gradient norm", "final weights"
  std::string detail;    // the step and the values, or the tensor and its error
  bool found() const { return !quantity.empty(); }
};

// `zero3` (zero3's reference: its gradient_size and rounding_spread) selects and weighs the
// weights compared and widens each tolerance to kSpreadMargin times the case's rounding spread.
Breach first_breach(const RunSummary& ours, const RunSummary& reference,
                    const std::map<std::string, Tensor>& initial, const RunSummary& zero3 = {},
                    const TargetTolerance& tolerance = {});

// BackendError (exit 4) when the answer is the runner's `error` or not the protocol's shape: a
// broken runner is never a finding. `runner` names it in that error.
TargetVerdict judge_answer(const nlohmann::json& answer, const RunSummary& zero3_reference,
                           const std::map<std::string, Tensor>& initial, const std::string& runner,
                           const TargetTolerance& tolerance = {});

// The part of an exception message that names the failure and not this run's numbers: its first
// upper-case identifier of 8 or more characters (NOT_AVAILABLE), else its longest run of words.
std::string stable_fragment(const std::string& message);

}  // namespace zero3
