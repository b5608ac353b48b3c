// Op-tape autograd. Every op run in forward appends a TapeOp to its Context's tape; module calls
// append enter/exit markers around their ops. Backward walks the tape in reverse: an exit marker
// opens a module's backward (pre-backward hook), the matching enter marker closes it
// (post-backward hook), so the engine sees module backward exactly as it sees module forward,
// once per invocation even when a module runs several times in one forward.
//
// Rule for op authors: a backward closure reads its inputs through their Vars at backward time
// (`input.value()`), never through a Tensor captured in forward. A parameter released after
// forward must be fetched again before its module's backward, exactly as in a real ZeRO-3 engine;
// reading it through the Var makes a missing fetch visible instead of silently using a stale copy.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor/tensor.h"

namespace zero3 {

class Allocator;
class Context;
class Module;

struct VarNode {
  Tensor value;
  Tensor grad;  // undefined until some gradient flows in
  bool requires_grad = false;
  // The first gradient is taken as it is, not copied; it may be shared (an add hands one tensor
  // to both operands), so while borrowed it is never added into in place.
  bool grad_borrowed = false;
};

// A handle to a value in the autograd graph. Copies share the node.
class Var {
 public:
  Var() = default;
  explicit Var(Tensor value, bool requires_grad = false);

  bool defined() const { return node_ != nullptr; }
  const Tensor& value() const;
  Tensor& mutable_value();
  const Tensor& grad() const;
  bool requires_grad() const;
  const Shape& shape() const { return value().shape(); }
  bool same_node(const Var& other) const { return node_ == other.node_; }

  // Adds `gradient` (same shape as value) into grad, allocating it on first use.
  void accumulate_grad(Context& ctx, const Tensor& gradient);
  void clear_grad();

 private:
  std::shared_ptr<VarNode> node_;
};

struct TapeOp {
  std::string name;
  std::vector<Var> inputs;
  Var output;
  // Receives the gradient of `output`; accumulates into the inputs that require grad.
  std::function<void(Context&, const Tensor& grad_output)> backward;
  int64_t saved_bytes = 0;  // intermediates backward keeps besides the output
  // Runs the op again on its inputs' current values, recording a fresh op (with its own backward)
  // into the tape's capture slot: how a checkpointed module's forward is recomputed in backward.
  std::function<void(Context&)> recompute;
};

enum class MarkerKind : uint8_t { module_enter, module_exit };

struct ModuleMarker {
  MarkerKind kind;
  Module* module;
  int64_t invocation;  // 0 for the first call of this module in this forward, 1 for the second...
  // Bytes of the op outputs this invocation itself recorded (not its children's; views of an input
  // are free), on both of its markers: the activations it keeps alive until its backward ends.
  int64_t activation_bytes = 0;
  // Activation checkpointing (on both markers of a checkpointed module's invocation): forward kept
  // only its output (kept_bytes, on the exit marker) and dropped every other value and backward of
  // its range; backward runs the range again, forward hooks and all, before the module's backward.
  bool checkpointed = false;
  size_t enter_index = 0;  // exit marker: where the invocation's range begins
  int64_t kept_bytes = 0;
  // Exit marker, checkpointed or not: what keeping the invocation's output costs (the bytes of the
  // op in its range that made it; 0 for a view of a value from before the range, or an input
  // passed through), which is what checkpointing it keeps. A recorded trace carries it, so a replay that checkpoints the
  // module holds what the run holds.
  int64_t output_bytes = 0;
  std::string name;        // the module's name, for the allocator when a recompute acquires again
};

struct TapeEntry {
  bool is_marker = false;
  TapeOp op;
  ModuleMarker marker{};
};

// The tape also keeps the activation count: with an allocator set, each module invocation's
// outputs are acquired as `activation` when it exits and released when its backward ends (ops
// outside every module when they run); whatever is still held is released by clear().
class Tape {
 public:
  void record(TapeOp op);
  // `name` labels the module's activations in the allocator (the tape sees modules only by pointer).
  // `output`: what an exiting invocation returned (null: nothing), for the exit marker's output_bytes.
  void mark(MarkerKind kind, Module* module, int64_t invocation, const std::string& name,
            const Var* output = nullptr);
  // The exit of a checkpointed invocation: releases its range's activations but `output`'s (null:
  // keep nothing) and drops their values and backwards, to be recomputed in backward. An op in the
  // range that cannot run again is a CorrectnessError naming it.
  void mark_checkpointed_exit(Module* module, int64_t invocation, const std::string& name, const Var* output);
  const std::vector<TapeEntry>& entries() const { return entries_; }
  void clear();

  void count_activations(Allocator* allocator) { allocator_ = allocator; }
  // The bytes the module that just exited counted (0 unless the last entry is an exit marker):
  // read at its post-forward hook, which runs right after the exit is marked (a recorder writes them).
  int64_t exited_module_activation_bytes() const {
    const ModuleMarker* exit = exited_marker();
    return exit ? exit->activation_bytes : 0;
  }
  // The same module's output_bytes (ModuleMarker): what checkpointing it keeps.
  int64_t exited_module_output_bytes() const {
    const ModuleMarker* exit = exited_marker();
    return exit ? exit->output_bytes : 0;
  }
  // The bytes of ops recorded outside every module (a loss on the model's output) so far.
  int64_t outside_module_activation_bytes() const { return outside_module_bytes_; }
  // Called by backward() when the module whose markers carry `bytes` finished its backward.
  void release_activations(int64_t bytes);

 private:
  friend void backward(Context& ctx, const Var& loss);
  friend void recompute_checkpointed(Context& ctx, size_t exit_index);
  void acquire_activations(int64_t bytes, const std::string& what);
  // The last entry's marker when it is an exit, else null.
  const ModuleMarker* exited_marker() const {
    const bool exited = !entries_.empty() && entries_.back().is_marker && entries_.back().marker.kind == MarkerKind::module_exit;
    return exited ? &entries_.back().marker : nullptr;
  }
  // The output_bytes of the invocation whose range starts after entry `enter`.
  int64_t range_output_bytes(size_t enter, const Var* output) const;
  // Runs `op` again and returns the op its rerun recorded.
  TapeOp rerun(Context& ctx, const TapeOp& op);

  std::vector<TapeEntry> entries_;
  std::vector<size_t> open_enters_;  // entry index of each module enter not yet exited
  Allocator* allocator_ = nullptr;
  int64_t held_bytes_ = 0;
  int64_t outside_module_bytes_ = 0;
  bool capturing_ = false;              // record() goes to captured_, not the tape (a rerun)
  std::vector<TapeOp> captured_;
};

// Backpropagates from a scalar `loss` (gradient 1) through ctx's tape, firing the module backward
// hooks at the markers, then clears the tape.
void backward(Context& ctx, const Var& loss);

}  // namespace zero3
