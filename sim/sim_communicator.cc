// Work handles over the collective matcher, after the shared argument check.
#include "sim/sim_communicator.h"

#include "core/base/errors.h"
#include "sim/collective_matcher.h"

namespace zero3 {

namespace {

class SimWork : public Work {
 public:
  SimWork(CollectiveMatcher& matcher, int task, std::shared_ptr<CollectiveSlot> slot)
      : matcher_(matcher), task_(task), slot_(std::move(slot)) {}
  void wait() override { matcher_.wait(task_, *slot_); }
  bool done() override { return matcher_.poll(task_, *slot_); }

 private:
  CollectiveMatcher& matcher_;
  int task_;
  std::shared_ptr<CollectiveSlot> slot_;
};

}  // namespace

std::shared_ptr<Work> SimCommunicator::all_gather_async(const Tensor& send, Tensor& recv, const CallSite& site) {
  CollectiveCall call{check_all_gather(send, recv, rank_, world_, site), site, send.is_meta(), send, recv};
  return std::make_shared<SimWork>(matcher_, task_, matcher_.issue(task_, std::move(call)));
}

std::shared_ptr<Work> SimCommunicator::reduce_scatter_async(const Tensor& send, Tensor& recv, ReduceOp op,
                                                            const CallSite& site) {
  CollectiveCall call{check_reduce_scatter(send, recv, op, rank_, world_, site), site, send.is_meta(), send, recv};
  return std::make_shared<SimWork>(matcher_, task_, matcher_.issue(task_, std::move(call)));
}

std::shared_ptr<Work> SimCommunicator::all_reduce_async(Tensor& buffer, ReduceOp op, const CallSite& site) {
  CollectiveCall call{check_all_reduce(buffer, op, rank_, site), site, buffer.is_meta(), buffer, buffer};
  return std::make_shared<SimWork>(matcher_, task_, matcher_.issue(task_, std::move(call)));
}

std::shared_ptr<Work> SimCommunicator::broadcast_async(Tensor& buffer, int root, const CallSite& site) {
  const CollectiveSignature signature = check_broadcast(buffer, root, rank_, world_, site);
  // The root's buffer is only read; every other rank's is only written.
  const bool is_root = root == rank_;
  CollectiveCall call{signature, site, buffer.is_meta(), is_root ? buffer : Tensor(), is_root ? Tensor() : buffer};
  return std::make_shared<SimWork>(matcher_, task_, matcher_.issue(task_, std::move(call)));
}

std::shared_ptr<Work> SimCommunicator::barrier_async(const CallSite& site) {
  CollectiveCall call{barrier_signature(), site, false, Tensor(), Tensor()};
  return std::make_shared<SimWork>(matcher_, task_, matcher_.issue(task_, std::move(call)));
}

void SimCommunicator::synchronize() { matcher_.drain(task_); }

void SimCommunicator::abort(const std::string& reason) { matcher_.rank_failed(task_, "aborted the world: " + reason); }

}  // namespace zero3
