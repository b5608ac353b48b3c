// Collectives of the symmetric replay: argument checks, the cost model, the log.
#include "traces/symmetric_communicator.h"

#include "core/base/errors.h"

namespace zero3 {

namespace {

class ModelledWork : public Work {
 public:
  ModelledWork(StreamClock& clock, double end_s) : clock_(clock), end_s_(end_s) {}
  void wait() override { clock_.wait_until(end_s_); }
  bool done() override { return clock_.now_s() >= end_s_; }

 private:
  StreamClock& clock_;
  double end_s_;
};

void check_pair(const char* op, const Tensor& small, const Tensor& large, int world, const CallSite& site) {
  if (!small.defined() || !large.defined() || large.numel() != small.numel() * world || small.dtype() != large.dtype()) {
    throw ShapeError(std::string(op) + " (" + describe(site) + "): buffers " + describe(small) + " and " +
                     describe(large) + " do not fit a world of " + std::to_string(world));
  }
}

}  // namespace

std::shared_ptr<Work> SymmetricCommunicator::issue(const CollectiveSignature& signature, const CallSite& site,
                                                   std::initializer_list<const Tensor*> buffers) {
  for (const Tensor* buffer : buffers) {
    // The other ranks' values are not simulated, so a real buffer could only be filled wrongly.
    if (!buffer->is_meta()) {
      throw InputError(std::string("the symmetric replay moves no data, but ") + collective_op_name(signature.op) +
                       " (" + describe(site) + ") got " + describe(*buffer) + "; replay functional runs on the full "
                       "simulator");
    }
  }
  const int64_t bytes = collective_buffer_bytes(signature, world_);
  const double duration_s = collective_time_s(clock_.hardware(), signature.op, bytes, world_);
  const double start_s = clock_.start_collective(duration_s);
  log_.push_back({.sequence = static_cast<int64_t>(log_.size()), .op = collective_op_name(signature.op),
                  .dtype = dtype_name(signature.dtype), .count = signature.count, .bytes = bytes,
                  .module = site.module, .phase = site.phase, .step = site.step, .start_s = start_s,
                  .duration_s = duration_s});
  return std::make_shared<ModelledWork>(clock_, start_s + duration_s);
}

std::shared_ptr<Work> SymmetricCommunicator::all_gather_async(const Tensor& send, Tensor& recv, const CallSite& site) {
  check_pair("all_gather", send, recv, world_, site);
  return issue({CollectiveOp::all_gather, send.dtype(), send.numel()}, site, {&send, &recv});
}

std::shared_ptr<Work> SymmetricCommunicator::reduce_scatter_async(const Tensor& send, Tensor& recv, ReduceOp op,
                                                                  const CallSite& site) {
  check_pair("reduce_scatter", recv, send, world_, site);
  return issue({CollectiveOp::reduce_scatter, send.dtype(), recv.numel(), -1, op}, site, {&send, &recv});
}

std::shared_ptr<Work> SymmetricCommunicator::all_reduce_async(Tensor& buffer, ReduceOp op, const CallSite& site) {
  return issue({CollectiveOp::all_reduce, buffer.dtype(), buffer.numel(), -1, op}, site, {&buffer});
}

std::shared_ptr<Work> SymmetricCommunicator::broadcast_async(Tensor& buffer, int root, const CallSite& site) {
  if (root < 0 || root >= world_) throw ShapeError("broadcast (" + describe(site) + "): root " + std::to_string(root) +
                                                   " outside a world of " + std::to_string(world_));
  return issue({CollectiveOp::broadcast, buffer.dtype(), buffer.numel(), root}, site, {&buffer});
}

std::shared_ptr<Work> SymmetricCommunicator::barrier_async(const CallSite& site) {
  return issue({CollectiveOp::barrier, DType::f32, 0}, site, {});
}

}  // namespace zero3
