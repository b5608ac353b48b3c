// Moe: a mixture-of-experts layer whose expert choice depends on the data. A gate Linear scores
// each row; the row goes to its top-1 expert (argmax of the gate logits, read from the values),
// and the expert's output is scaled by the gate's softmax probability so the gate trains. Each
// expert runs only on its own rows, and an expert with no rows is not invoked at all: ranks with
// different data run different experts, the rank-divergent execution of failure class 7, README.md "Design".
#pragma once
#include <vector>

#include "core/nn/linear.h"
#include "core/nn/mlp.h"
#include "core/nn/sequential.h"

namespace zero3 {

class Moe : public Layer {
 public:
  Moe(int64_t width, int64_t experts, int64_t hidden, float init_std);

  Linear& gate() const { return gate_; }
  Mlp& expert(int64_t index) const { return static_cast<Mlp&>(experts_.at(index)); }
  int64_t expert_count() const { return experts_.size(); }
  // x [N, width] -> [N, width]. Throws InputError on meta tensors: routing needs values.
  Var forward(Context& ctx, const Var& x) override;

 private:
  // The rows of `gate_logits` [N, experts] routed to each expert.
  std::vector<std::vector<int64_t>> route(Context& ctx, const Tensor& gate_logits) const;
  // Softmax over the last dim of logits [N, E].
  Var softmax_rows(Context& ctx, const Var& logits) const;

  Linear& gate_;
  Sequential& experts_;  // a container: its forward is never called, each expert is run alone
};

}  // namespace zero3
