// Vars, the tape, and reverse-mode backpropagation with module markers.
#include "core/autograd/autograd.h"

#include "core/tensor/allocator.h"

#include "core/autograd/context.h"
#include "core/base/errors.h"
#include "core/base/stopwatch.h"

namespace zero3 {

Var::Var(Tensor value, bool requires_grad) : node_(std::make_shared<VarNode>()) {
  node_->value = std::move(value);
  node_->requires_grad = requires_grad;
}

const Tensor& Var::value() const {
  ZERO3_CHECK(node_, "value() of an undefined Var");
  return node_->value;
}

Tensor& Var::mutable_value() {
  ZERO3_CHECK(node_, "mutable_value() of an undefined Var");
  return node_->value;
}

const Tensor& Var::grad() const {
  ZERO3_CHECK(node_, "grad() of an undefined Var");
  return node_->grad;
}

bool Var::requires_grad() const { return node_ && node_->requires_grad; }

void Var::accumulate_grad(Context& ctx, const Tensor& gradient) {
  ZERO3_CHECK(node_, "accumulate_grad on an undefined Var");
  if (!node_->requires_grad) return;
  if (gradient.shape() != node_->value.shape()) {
    throw ShapeError("gradient " + describe(gradient) + " does not match value " + describe(node_->value));
  }
  if (!node_->grad.defined()) {
    node_->grad = gradient;
    node_->grad_borrowed = true;
    return;
  }
  // Shape-only (meta) backward: a sum of gradients has the value's shape and no data to add, and
  // kernels never see meta tensors.
  if (node_->grad.is_meta() || gradient.is_meta()) {
    node_->grad = Tensor::meta(node_->value.shape(), node_->grad.dtype());
    return;
  }
  if (node_->grad_borrowed) {
    // Into a tensor of our own: the borrowed one may be another node's gradient too. The same
    // sum, element by element, as add_into computes.
    Tensor sum = device_uninitialized(ctx.kernels(), node_->grad.shape(), node_->grad.dtype());
    ctx.kernels().binary(BinaryOp::add, node_->grad, gradient, sum);
    node_->grad = sum;
    node_->grad_borrowed = false;
    return;
  }
  ctx.kernels().add_into(node_->grad, gradient);
}

void Var::clear_grad() {
  if (node_) node_->grad = Tensor();
}

namespace {

// What keeping `op`'s output costs (nothing for a view of one of its inputs), plus what its
// backward saved besides.
int64_t output_bytes(const TapeOp& op) {
  const Tensor& output = op.output.value();
  if (!output.defined()) return op.saved_bytes;
  for (const Var& input : op.inputs) {
    if (output.storage_id() != nullptr && input.defined() && input.value().storage_id() == output.storage_id()) {
      return op.saved_bytes;
    }
  }
  return output.bytes() + op.saved_bytes;
}

}  // namespace

void Tape::record(TapeOp op) {
  if (capturing_) {
    captured_.push_back(std::move(op));
    return;
  }
  const int64_t bytes = op.output.defined() ? output_bytes(op) : op.saved_bytes;
  if (open_enters_.empty()) {
    outside_module_bytes_ += bytes;
    acquire_activations(bytes, op.name);
  } else {
    entries_[open_enters_.back()].marker.activation_bytes += bytes;
  }
  TapeEntry entry;
  entry.op = std::move(op);
  entries_.push_back(std::move(entry));
}

int64_t Tape::range_output_bytes(size_t enter, const Var* output) const {
  if (output == nullptr || !output->defined()) return 0;
  const auto made_in_range = [&](size_t end, const Var& value) {
    for (size_t i = enter + 1; i < end; ++i) {
      if (!entries_[i].is_marker && entries_[i].op.output.same_node(value)) return true;
    }
    return false;
  };
  // Searched from the end: a module's output is most often its last op's.
  for (size_t i = entries_.size(); i-- > enter + 1;) {
    const TapeOp& op = entries_[i].op;
    if (entries_[i].is_marker || !op.output.same_node(*output)) continue;
    const Tensor& value = op.output.value();
    if (!value.defined()) return 0;
    // A view of a value made inside the range holds that value's storage once checkpointing drops
    // it; only a view of a value from before the range (the module's input) costs nothing.
    for (const Var& input : op.inputs) {
      const bool aliases = input.defined() && input.value().defined() && value.storage_id() != nullptr &&
                           input.value().storage_id() == value.storage_id();
      if (aliases && !made_in_range(i, input)) return 0;
    }
    return value.bytes();
  }
  return 0;  // made outside the range: an input passed through
}

void Tape::mark(MarkerKind kind, Module* module, int64_t invocation, const std::string& name, const Var* output) {
  TapeEntry entry;
  entry.is_marker = true;
  entry.marker = ModuleMarker{.kind = kind, .module = module, .invocation = invocation, .name = name};
  if (kind == MarkerKind::module_enter) {
    open_enters_.push_back(entries_.size());
  } else if (!open_enters_.empty()) {
    entry.marker.activation_bytes = entries_[open_enters_.back()].marker.activation_bytes;
    entry.marker.output_bytes = range_output_bytes(open_enters_.back(), output);
    open_enters_.pop_back();
    acquire_activations(entry.marker.activation_bytes, name);
  }
  entries_.push_back(std::move(entry));
}

void Tape::mark_checkpointed_exit(Module* module, int64_t invocation, const std::string& name, const Var* output) {
  ZERO3_CHECK(!open_enters_.empty(), "checkpointed exit of '" + name + "' without its enter");
  const size_t enter = open_enters_.back();
  open_enters_.pop_back();
  int64_t inner_held = 0;  // what the nested invocations acquired at their exits
  const int64_t kept = range_output_bytes(enter, output);
  for (size_t i = enter + 1; i < entries_.size(); ++i) {
    TapeEntry& inner = entries_[i];
    if (inner.is_marker) {
      if (inner.marker.kind == MarkerKind::module_exit) inner_held += inner.marker.activation_bytes;
      continue;
    }
    if (!inner.op.recompute) {
      throw CorrectnessError("activation checkpointing of '" + name + "': its op '" + inner.op.name +
                             "' cannot be run again in backward");
    }
    // The output stays (the next module's input); only what backward would read inside is dropped.
    if (output == nullptr || !inner.op.output.same_node(*output)) inner.op.output.mutable_value() = Tensor();
    inner.op.backward = nullptr;
  }
  entries_[enter].marker.checkpointed = true;
  TapeEntry entry;
  entry.is_marker = true;
  entry.marker = ModuleMarker{.kind = MarkerKind::module_exit, .module = module, .invocation = invocation,
                              .activation_bytes = entries_[enter].marker.activation_bytes, .checkpointed = true,
                              .enter_index = enter, .kept_bytes = kept, .output_bytes = kept, .name = name};
  entries_.push_back(std::move(entry));
  release_activations(inner_held);
  acquire_activations(kept, name);
}

TapeOp Tape::rerun(Context& ctx, const TapeOp& op) {
  capturing_ = true;
  captured_.clear();
  try {
    op.recompute(ctx);
  } catch (...) {
    capturing_ = false;
    throw;
  }
  capturing_ = false;
  if (captured_.size() != 1) {
    throw CorrectnessError("recomputing op '" + op.name + "' recorded " + std::to_string(captured_.size()) +
                           " ops, not one");
  }
  TapeOp fresh = std::move(captured_.front());
  captured_.clear();
  return fresh;
}

void Tape::clear() {
  release_activations(held_bytes_);
  entries_.clear();
  open_enters_.clear();
  outside_module_bytes_ = 0;
}

void Tape::acquire_activations(int64_t bytes, const std::string& what) {
  if (allocator_ == nullptr || bytes == 0) return;
  allocator_->acquire(MemoryCategory::activation, bytes, what);
  held_bytes_ += bytes;
}

void Tape::release_activations(int64_t bytes) {
  if (allocator_ == nullptr || bytes == 0) return;
  allocator_->release(MemoryCategory::activation, bytes);
  held_bytes_ -= bytes;
}

// A checkpointed invocation's range run again, right after the module's pre-backward hook: the
// forward hooks fire for every module nested in it (an engine gathers their parameters again), each
// op computes its dropped value anew and gets a fresh backward, and the range's activations are
// held again until their backwards end.
void recompute_checkpointed(Context& ctx, size_t exit_index) {
  const Stopwatch watch;  // the recompute's wall clock, for the step's phase times (step_stats.h)
  Tape& tape = ctx.tape();
  std::vector<TapeEntry>& entries = tape.entries_;
  const ModuleMarker exit = entries[exit_index].marker;
  tape.release_activations(exit.kept_bytes);
  for (size_t i = exit.enter_index + 1; i < exit_index; ++i) {
    TapeEntry& entry = entries[i];
    if (entry.is_marker) {
      ctx.current_invocation_ = entry.marker.invocation;
      if (entry.marker.kind == MarkerKind::module_enter) {
        ctx.module_stack_.push_back(entry.marker.module);
        ctx.hooks().pre_forward(ctx, *entry.marker.module);
      } else {
        ctx.hooks().post_forward(ctx, *entry.marker.module);
        ctx.module_stack_.pop_back();
        tape.acquire_activations(entry.marker.activation_bytes, entry.marker.name);
      }
      continue;
    }
    TapeOp fresh = tape.rerun(ctx, entry.op);
    // The kept output still holds its forward value (the same bits); every other value comes back.
    if (!entry.op.output.value().defined()) entry.op.output.mutable_value() = fresh.output.value();
    entry.op.backward = std::move(fresh.backward);
  }
  tape.acquire_activations(exit.activation_bytes, exit.name);
  ctx.current_invocation_ = exit.invocation;
  ctx.recompute_seconds_ += watch.seconds();
}

void backward(Context& ctx, const Var& loss) {
  ZERO3_CHECK(loss.defined() && loss.value().numel() == 1, "backward() needs a scalar loss, got " +
                                                               describe(loss.value()));
  Var seed = loss;
  const Tensor& value = loss.value();
  seed.accumulate_grad(ctx, value.is_meta() ? Tensor::meta(value.shape(), value.dtype())
                                            : device_full(ctx.kernels(), value.shape(), 1.0f, value.dtype()));
  const std::vector<TapeEntry>& entries = ctx.tape().entries();
  for (size_t index = entries.size(); index-- > 0;) {
    const TapeEntry* it = &entries[index];
    if (it->is_marker) {
      // Reversed: an exit marker starts the module's backward, its enter marker ends it.
      ctx.current_invocation_ = it->marker.invocation;
      if (it->marker.kind == MarkerKind::module_exit) {
        ctx.hooks().pre_backward(ctx, *it->marker.module);
        if (it->marker.checkpointed) recompute_checkpointed(ctx, index);
      } else {
        ctx.tape().release_activations(it->marker.activation_bytes);
        ctx.hooks().post_backward(ctx, *it->marker.module);
      }
      continue;
    }
    const TapeOp& op = it->op;
    if (!op.output.grad().defined()) continue;  // nothing downstream of this op reached the loss
    op.backward(ctx, op.output.grad());
  }
  ctx.tape().clear();
}

}  // namespace zero3
