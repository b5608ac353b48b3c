// SwiGLU: LLaMA's feed-forward block, down(silu(gate(x)) * up(x)) with gate and up [C -> hidden]
// and down [hidden -> C]. A zero hidden width (or C = 0) gives zero-sized weights.
#pragma once
#include "core/nn/linear.h"

namespace zero3 {

class SwiGlu : public Layer {
 public:
  SwiGlu(int64_t width, int64_t hidden, bool has_bias, float init_std, float down_init_std);

  Linear& gate() const { return gate_; }
  Linear& up() const { return up_; }
  Linear& down() const { return down_; }
  Var forward(Context& ctx, const Var& x) override;

 private:
  Linear& gate_;
  Linear& up_;
  Linear& down_;
};

}  // namespace zero3
