// Skip connections around a body of layers, for x [N, width]:
//   residual:     x + body(x)              (the body keeps the width)
//   concat:       [x, body(x)]             (width + body width; a zero-width body still counts)
//   sum_residual: x + rowsum(body(x))      (any body width, summed per row and broadcast)
// The last two let a layer of any width, 0 included, take part in the loss.
#pragma once
#include <memory>

#include "core/nn/sequential.h"

namespace zero3 {

enum class SkipKind : uint8_t { residual, concat, sum_residual };
const char* skip_kind_name(SkipKind kind);

class Skip : public Layer {
 public:
  Skip(SkipKind kind, std::unique_ptr<Sequential> body);

  SkipKind kind() const { return kind_; }
  Sequential& body() const { return body_; }
  Var forward(Context& ctx, const Var& x) override;

 private:
  SkipKind kind_;
  Sequential& body_;
};

}  // namespace zero3
