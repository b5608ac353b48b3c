// Repeat: one body invoked `times` times in a single forward, parameters shared between the
// calls (failure class 6, README.md "Design"). The body must keep the width, since each call's output feeds the next.
#pragma once
#include <memory>

#include "core/nn/sequential.h"

namespace zero3 {

class Repeat : public Layer {
 public:
  Repeat(std::unique_ptr<Sequential> body, int64_t times);

  int64_t times() const { return times_; }
  Sequential& body() const { return body_; }
  Var forward(Context& ctx, const Var& x) override;

 private:
  Sequential& body_;
  int64_t times_;
};

}  // namespace zero3
