// Top-1 routed mixture of experts.
#include "core/nn/moe.h"

#include "core/base/errors.h"

namespace zero3 {

namespace {

std::unique_ptr<Sequential> make_experts(int64_t width, int64_t experts, int64_t hidden, float init_std) {
  auto list = std::make_unique<Sequential>();
  for (int64_t e = 0; e < experts; ++e) list->append(std::make_unique<Mlp>(width, hidden, init_std, init_std));
  return list;
}

}  // namespace

Moe::Moe(int64_t width, int64_t experts, int64_t hidden, float init_std)
    : Layer("moe"), gate_(add_child("gate", std::make_unique<Linear>(width, experts, /*has_bias=*/true, init_std))),
      experts_(add_child("experts", make_experts(width, experts, hidden, init_std))) {
  ZERO3_CHECK(experts > 0, "moe needs at least one expert");
}

std::vector<std::vector<int64_t>> Moe::route(Context& ctx, const Tensor& gate_logits) const {
  const int64_t rows = gate_logits.dim(0);
  const int64_t experts = gate_logits.dim(1);
  std::vector<std::vector<int64_t>> routed(static_cast<size_t>(experts));
  Tensor choice = device_zeros(ctx.kernels(), {rows});
  ctx.kernels().row_argmax(gate_logits, choice);
  // Which rows go where decides the next ops' shapes: the one host sync an MoE layer needs.
  const Tensor host_choice = ctx.kernels().to_host(choice);
  for (int64_t row = 0; row < rows; ++row) {
    routed[static_cast<size_t>(host_choice.data()[row])].push_back(row);
  }
  return routed;
}

Var Moe::softmax_rows(Context& ctx, const Var& logits) const {
  // The op set has only a causal softmax; the last row of a causal [E, E] softmax sees every
  // column, so stacking each row of logits E times and keeping the last row is a plain softmax.
  const int64_t rows = logits.shape()[0];
  const int64_t experts = logits.shape()[1];
  const Var one_row = reshape(ctx, logits, {rows, 1, experts});
  const Var stacked = concat(ctx, std::vector<Var>(static_cast<size_t>(experts), one_row), 1);
  const Var last = slice(ctx, causal_softmax(ctx, stacked), 1, experts - 1, 1);
  return reshape(ctx, last, {rows, experts});
}

Var Moe::forward(Context& ctx, const Var& x) {
  if (x.value().is_meta()) {
    throw InputError("moe layer '" + display_name() +
                     "': the expert choice depends on values, so a meta (shape-only) forward cannot route");
  }
  return ctx.invoke(*this, [&] {
    const Var logits = gate_.forward(ctx, x);
    const Var probs = softmax_rows(ctx, logits);
    const int64_t rows = x.shape()[0];
    const auto routed = route(ctx, logits.value());
    Var out;
    for (int64_t e = 0; e < expert_count(); ++e) {
      const std::vector<int64_t>& expert_rows = routed[static_cast<size_t>(e)];
      if (expert_rows.empty()) continue;  // not invoked: this is what makes ranks diverge
      const Var expert_out = expert(e).forward(ctx, select_rows(ctx, x, expert_rows));
      const Var weight = slice(ctx, select_rows(ctx, probs, expert_rows), 1, e, 1);
      const Var placed = scatter_rows(ctx, mul(ctx, expert_out, weight), expert_rows, rows);
      out = out.defined() ? add(ctx, out, placed) : placed;
    }
    // Only a batch without rows routes nowhere; its output is the empty [0, width].
    return out.defined() ? out : scale(ctx, x, 0.0f);
  });
}

}  // namespace zero3
