// A block called several times in one forward.
#include "core/nn/repeat.h"

#include "core/base/errors.h"

namespace zero3 {

Repeat::Repeat(std::unique_ptr<Sequential> body, int64_t times)
    : Layer("repeat"), body_(add_child("layers", std::move(body))), times_(times) {
  ZERO3_CHECK(times >= 1, "repeat needs times >= 1, got " + std::to_string(times));
}

Var Repeat::forward(Context& ctx, const Var& x) {
  return ctx.invoke(*this, [&] {
    Var h = x;
    for (int64_t call = 0; call < times_; ++call) h = body_.forward(ctx, h);
    return h;
  });
}

}  // namespace zero3
