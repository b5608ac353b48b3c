// Helpers shared by the op files (ops*.cc), defined in ops.cc; not part of the public op set.
// Every op checks shapes, allocates its output (meta in, meta out), calls the kernel and records
// a backward closure. Backward closures read inputs through their Vars (autograd.h) and capture
// only saved intermediates such as layer-norm statistics.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/autograd/ops.h"

namespace zero3 {

using Backward = std::function<void(Context&, const Tensor& grad_output)>;
// Runs the op again on the same input Vars (activation checkpointing's recompute): the public op
// called with the arguments it was first given, so the same kernels compute the same bits.
using Rerun = std::function<void(Context&)>;

// PyTorch promotion for the two float types: bf16 only when every operand is bf16.
DType promote(DType a, DType b);

// An op's output on the context's device (meta when the op's inputs are meta), uninitialised:
// the op's kernel writes every element. An op whose kernel adds into its output (a name ending
// in `_into`) takes make_zeroed_output instead.
Tensor make_output(Context& ctx, const Shape& shape, DType dtype, bool meta);
Tensor make_zeroed_output(Context& ctx, const Shape& shape, DType dtype, bool meta);

void require_defined(const char* op, const Var& var, const char* what);

void add_grad(Context& ctx, Var var, const Tensor& gradient);

// Wraps `value` as the op's output and records `backward` (and `rerun`, for a checkpointed module's
// recompute) when any input takes a gradient. A meta
// output records a shape-only backward instead: each input gets a meta gradient of its shape.
// saved_bytes: what backward keeps besides the output (intermediates it captured), so that the
// tape's activation figures count it.
Var record(Context& ctx, const char* name, Rerun rerun, std::vector<Var> inputs, Tensor value, Backward backward,
           int64_t saved_bytes = 0);

// The gradient of an input from a gradient of the op's (possibly broadcast) output: summed over the
// broadcast dims and stored in the input's dtype.
Tensor reduce_to(Context& ctx, const Tensor& grad, const Tensor& input);

// Ids and targets are floats holding integers in [0, limit); anything else is a ShapeError that
// names the value, its position and what it indexes.
// Checked on the host, where the data source made them (a device tensor is a HostAccessError);
// the op then moves them to its device with Kernels::to_device (an upload).
void check_indices(const char* op, const char* what, const Tensor& indices, int64_t limit, const std::string& target);

}  // namespace zero3
