// Collectives of the symmetric replay: the shared argument check, the cost model, the log.
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

}  // namespace

std::shared_ptr<Work> SymmetricCommunicator::issue(const CollectiveSignature& signature, const CallSite& site,
                                                   std::initializer_list<const Tensor*> buffers) {
  if (!abort_reason_.empty()) {
    throw PeerFailureError(std::string(collective_op_name(signature.op)) + " (" + describe(site) + ") after rank " +
                               std::to_string(rank_) + " aborted the world: " + abort_reason_,
                           rank_);
  }
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
  return issue(check_all_gather(send, recv, rank_, world_, site), site, {&send, &recv});
}

std::shared_ptr<Work> SymmetricCommunicator::reduce_scatter_async(const Tensor& send, Tensor& recv, ReduceOp op,
                                                                  const CallSite& site) {
  return issue(check_reduce_scatter(send, recv, op, rank_, world_, site), site, {&send, &recv});
}

std::shared_ptr<Work> SymmetricCommunicator::all_reduce_async(Tensor& buffer, ReduceOp op, const CallSite& site) {
  return issue(check_all_reduce(buffer, op, rank_, site), site, {&buffer});
}

std::shared_ptr<Work> SymmetricCommunicator::broadcast_async(Tensor& buffer, int root, const CallSite& site) {
  return issue(check_broadcast(buffer, root, rank_, world_, site), site, {&buffer});
}

std::shared_ptr<Work> SymmetricCommunicator::barrier_async(const CallSite& site) {
  return issue(barrier_signature(), site, {});
}

void SymmetricCommunicator::synchronize() { clock_.wait_until(clock_.stream_free_s()); }

std::unique_ptr<Communicator> SymmetricCommunicator::split(int color, int key, const CallSite& site) {
  check_split(color, key, rank_, site);
  // A group's size depends on every rank's color, and only this rank's is known here.
  throw InputError("split on rank " + std::to_string(rank_) + " (" + describe(site) +
                   "): the symmetric replay does not support process groups yet; expected a communicator without "
                   "split() calls, or replay on the full simulator");
}

}  // namespace zero3
