// Process-wide switches that plant a known bug in the arithmetic the engine and its DDP reference
// share (AdamW, clipping, GELU, LayerNorm, RMSNorm, attention, embeddings). zero3's own properties cannot see these — both sides of
// every comparison run the same wrong math — so they show what only an outside oracle catches:
// `zero3 fuzz --target torch --math-bug NAME` must report a reference_disagreement for each.
//
//   const ScopedMathBug planted(MathBug::gelu_exact_instead_of_tanh);   // on until scope exit
//   if (math_bug_on(MathBug::gelu_exact_instead_of_tanh)) { ... }       // one relaxed load
//
// Off by default. They are kept apart from core/zero3/bug_injection.h (the engine's bugs, which the
// property harness must catch) because no property of zero3's can catch these. Each switch is read
// once per kernel call, layer call or parameter step, never per element: off, it costs one relaxed load.
// They act on the CPU reference kernels and the optimizer arithmetic only: `fuzz --target` trains
// zero3's side on the CPU, and the CUDA kernels (backend_cuda/) do not read them.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace zero3 {

enum class MathBug : uint8_t {
  // AdamW's bias corrections raised to step + 1 instead of step: the off-by-one of a step counter
  // incremented before the update reads it (or a resumed run's step restored one too far).
  adamw_bias_correction_off_by_one,
  // Weight decay added to the gradient (Adam's L2 penalty, torch.optim.Adam's weight_decay) instead
  // of decoupled from it as AdamW does: the class of "AdamW" implementations that are really Adam+L2.
  adamw_decay_in_gradient,
  // The clip coefficient max_norm / (norm + eps) applied even when it exceeds 1, so small gradients
  // are scaled up to the max norm: a clamp(max=1) lost from clip_grad_norm_-style code.
  clip_coefficient_unclamped,
  // Clipping decided and scaled by the sum of squares instead of its square root (a norm that was
  // never square-rooted), while the reported norm stays right.
  clip_norm_squared,
  // GELU computed exactly, 0.5 x (1 + erf(x / sqrt 2)), where the tanh approximation is the model's
  // (GPT-2's gelu_new, approximate="tanh"): the activation-variant mix-up when porting a model.
  gelu_exact_instead_of_tanh,
  // LayerNorm's eps 1e-3 instead of 1e-5: a default taken from another framework (Keras uses 1e-3).
  layer_norm_eps_1e3,
  // RMSNorm's eps 1e-3 instead of 1e-5: the same slip in LLaMA's norm.
  rms_norm_eps_1e3,
  // The causal mask lets each query see the next token too (a mask built with diagonal=1 where 0
  // was meant, or an off-by-one in a fused kernel's bound): the model reads the token it predicts.
  causal_mask_leaks_next_token,
  // Attention's backward reads the values at the keys' offset in the packed qkv (a stride or
  // offset slip in a hand-written backward): the value gradient is computed against the keys.
  attention_backward_value_at_key,
  // The embedding's backward counts a repeated id once (an index_copy / scatter without
  // accumulation where index_add was meant): a token seen twice in a batch gets half its gradient.
  embedding_backward_repeated_id_once,
  count_,
};

const char* math_bug_name(MathBug bug);  // e.g. "gelu-exact-instead-of-tanh"
const char* math_bug_description(MathBug bug);
std::vector<MathBug> all_math_bugs();
// Throws InputError listing the known names when `name` is not one.
MathBug parse_math_bug(const std::string& name);

namespace math_bugs_detail {
// One bit per MathBug. A relaxed atomic: the simulated ranks are threads that read it concurrently,
// and a plain load (no fence) is all the hot kernels can afford.
inline std::atomic<uint32_t> active_bits{0};
static_assert(static_cast<int>(MathBug::count_) <= 32);
}  // namespace math_bugs_detail

inline bool math_bug_on(MathBug bug) {
  return (math_bugs_detail::active_bits.load(std::memory_order_relaxed) >> static_cast<uint32_t>(bug)) & 1u;
}

// Switches one bug on for its lifetime and restores the switches as they were before it; scopes
// nest. Meant for a whole run (a fuzz campaign, a test), set before any rank thread starts.
class ScopedMathBug {
 public:
  explicit ScopedMathBug(MathBug bug);
  ~ScopedMathBug();
  ScopedMathBug(const ScopedMathBug&) = delete;
  ScopedMathBug& operator=(const ScopedMathBug&) = delete;

 private:
  uint32_t previous_bits_;
};

}  // namespace zero3
