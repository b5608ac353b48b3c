// Argument checks and Work handles over the collective matcher.
#include "sim/sim_communicator.h"

#include "core/base/errors.h"
#include "sim/collective_matcher.h"

namespace zero3 {

namespace {

class SimWork : public Work {
 public:
  SimWork(CollectiveMatcher& matcher, int rank, std::shared_ptr<CollectiveSlot> slot)
      : matcher_(matcher), rank_(rank), slot_(std::move(slot)) {}
  void wait() override { matcher_.wait(rank_, *slot_); }
  bool done() override { return matcher_.poll(rank_, *slot_); }

 private:
  CollectiveMatcher& matcher_;
  int rank_;
  std::shared_ptr<CollectiveSlot> slot_;
};

[[noreturn]] void throw_bad_argument(CollectiveOp op, int rank, const CallSite& site, const std::string& problem) {
  throw ShapeError(std::string(collective_op_name(op)) + " on rank " + std::to_string(rank) + " (" + describe(site) +
                   "): " + problem);
}

void check_defined(CollectiveOp op, int rank, const CallSite& site, const char* name, const Tensor& tensor) {
  if (!tensor.defined()) throw_bad_argument(op, rank, site, std::string(name) + " is an undefined tensor");
}

// send and recv of all-gather / reduce-scatter: same dtype and device, recv_factor * recv.numel()
// == send_factor * send.numel().
void check_pair(CollectiveOp op, int rank, int world, const CallSite& site, const Tensor& send, const Tensor& recv) {
  check_defined(op, rank, site, "send", send);
  check_defined(op, rank, site, "recv", recv);
  if (send.dtype() != recv.dtype() || send.device() != recv.device()) {
    throw_bad_argument(op, rank, site, "send is " + describe(send) + " but recv is " + describe(recv) +
                                           "; they must have the same dtype and device");
  }
  const bool gather = op == CollectiveOp::all_gather;
  const int64_t small = gather ? send.numel() : recv.numel();
  const int64_t large = gather ? recv.numel() : send.numel();
  if (large != small * world) {
    throw_bad_argument(op, rank, site, std::string(gather ? "recv" : "send") + " has " + std::to_string(large) +
                                           " elements, expected " + (gather ? "send" : "recv") + ".numel() * world = " +
                                           std::to_string(small) + " * " + std::to_string(world) + " = " +
                                           std::to_string(small * world));
  }
}

}  // namespace

std::shared_ptr<Work> SimCommunicator::all_gather_async(const Tensor& send, Tensor& recv, const CallSite& site) {
  check_pair(CollectiveOp::all_gather, rank_, world_, site, send, recv);
  CollectiveCall call{{CollectiveOp::all_gather, send.dtype(), send.numel()}, site, send.is_meta(), send, recv};
  return std::make_shared<SimWork>(matcher_, rank_, matcher_.issue(rank_, std::move(call)));
}

std::shared_ptr<Work> SimCommunicator::reduce_scatter_async(const Tensor& send, Tensor& recv, ReduceOp op,
                                                            const CallSite& site) {
  check_pair(CollectiveOp::reduce_scatter, rank_, world_, site, send, recv);
  CollectiveCall call{{CollectiveOp::reduce_scatter, send.dtype(), recv.numel(), -1, op}, site, send.is_meta(), send,
                      recv};
  return std::make_shared<SimWork>(matcher_, rank_, matcher_.issue(rank_, std::move(call)));
}

std::shared_ptr<Work> SimCommunicator::all_reduce_async(Tensor& buffer, ReduceOp op, const CallSite& site) {
  check_defined(CollectiveOp::all_reduce, rank_, site, "buffer", buffer);
  CollectiveCall call{{CollectiveOp::all_reduce, buffer.dtype(), buffer.numel(), -1, op}, site, buffer.is_meta(),
                      buffer, buffer};
  return std::make_shared<SimWork>(matcher_, rank_, matcher_.issue(rank_, std::move(call)));
}

std::shared_ptr<Work> SimCommunicator::broadcast_async(Tensor& buffer, int root, const CallSite& site) {
  check_defined(CollectiveOp::broadcast, rank_, site, "buffer", buffer);
  if (root < 0 || root >= world_) {
    throw_bad_argument(CollectiveOp::broadcast, rank_, site,
                       "root " + std::to_string(root) + " is not a rank of a world of " + std::to_string(world_));
  }
  // The root's buffer is only read; every other rank's is only written.
  const bool is_root = root == rank_;
  CollectiveCall call{{CollectiveOp::broadcast, buffer.dtype(), buffer.numel(), root}, site, buffer.is_meta(),
                      is_root ? buffer : Tensor(), is_root ? Tensor() : buffer};
  return std::make_shared<SimWork>(matcher_, rank_, matcher_.issue(rank_, std::move(call)));
}

std::shared_ptr<Work> SimCommunicator::barrier_async(const CallSite& site) {
  CollectiveCall call{{CollectiveOp::barrier, DType::f32, 0}, site, false, Tensor(), Tensor()};
  return std::make_shared<SimWork>(matcher_, rank_, matcher_.issue(rank_, std::move(call)));
}

}  // namespace zero3
