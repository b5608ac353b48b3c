// Forwarding collectives while timing the waits (timed_communicator.h).
#include "core/sharding/timed_communicator.h"

#include "core/base/stopwatch.h"

namespace zero3 {

namespace {

// Adds the seconds from its construction to its end to `total`, also when the timed call throws.
class WaitTimer {
 public:
  explicit WaitTimer(double& total) : total_(total) {}
  WaitTimer(const WaitTimer&) = delete;
  WaitTimer& operator=(const WaitTimer&) = delete;
  ~WaitTimer() { total_ += watch_.seconds(); }

 private:
  double& total_;
  const Stopwatch watch_;
};

class TimedWork final : public Work {
 public:
  TimedWork(std::shared_ptr<Work> inner, std::shared_ptr<double> total)
      : inner_(std::move(inner)), total_(std::move(total)) {}
  void wait() override {
    const WaitTimer timer(*total_);
    inner_->wait();
  }
  bool done() override { return inner_->done(); }

 private:
  std::shared_ptr<Work> inner_;
  std::shared_ptr<double> total_;
};

}  // namespace

std::unique_ptr<Communicator> TimedCommunicator::wrap(std::unique_ptr<Communicator> group) const {
  if (!group) return group;
  return std::unique_ptr<Communicator>(new TimedCommunicator(nullptr, std::move(group), total_));
}

std::shared_ptr<Work> TimedCommunicator::wrap(std::shared_ptr<Work> work) const {
  return std::make_shared<TimedWork>(std::move(work), total_);
}

std::unique_ptr<Communicator> TimedCommunicator::split(int color, int key, const CallSite& site) {
  return wrap(inner_.split(color, key, site));
}

std::unique_ptr<Communicator> TimedCommunicator::split_block(int block_size, const CallSite& site) {
  return wrap(inner_.split_block(block_size, site));
}

std::unique_ptr<Communicator> TimedCommunicator::split_across_blocks(int block_size, const CallSite& site) {
  return wrap(inner_.split_across_blocks(block_size, site));
}

std::shared_ptr<Work> TimedCommunicator::all_gather_async(const Tensor& send, Tensor& recv, const CallSite& site) {
  return wrap(inner_.all_gather_async(send, recv, site));
}

std::shared_ptr<Work> TimedCommunicator::reduce_scatter_async(const Tensor& send, Tensor& recv, ReduceOp op,
                                                              const CallSite& site) {
  return wrap(inner_.reduce_scatter_async(send, recv, op, site));
}

std::shared_ptr<Work> TimedCommunicator::all_reduce_async(Tensor& buffer, ReduceOp op, const CallSite& site) {
  return wrap(inner_.all_reduce_async(buffer, op, site));
}

std::shared_ptr<Work> TimedCommunicator::broadcast_async(Tensor& buffer, int root, const CallSite& site) {
  return wrap(inner_.broadcast_async(buffer, root, site));
}

std::shared_ptr<Work> TimedCommunicator::barrier_async(const CallSite& site) {
  return wrap(inner_.barrier_async(site));
}

void TimedCommunicator::synchronize() {
  const WaitTimer timer(*total_);
  inner_.synchronize();
}

void TimedCommunicator::all_gather(const Tensor& send, Tensor& recv, const CallSite& site) {
  const WaitTimer timer(*total_);
  inner_.all_gather(send, recv, site);
}

void TimedCommunicator::reduce_scatter(const Tensor& send, Tensor& recv, ReduceOp op, const CallSite& site) {
  const WaitTimer timer(*total_);
  inner_.reduce_scatter(send, recv, op, site);
}

void TimedCommunicator::all_reduce(Tensor& buffer, ReduceOp op, const CallSite& site) {
  const WaitTimer timer(*total_);
  inner_.all_reduce(buffer, op, site);
}

void TimedCommunicator::broadcast(Tensor& buffer, int root, const CallSite& site) {
  const WaitTimer timer(*total_);
  inner_.broadcast(buffer, root, site);
}

void TimedCommunicator::barrier(const CallSite& site) {
  const WaitTimer timer(*total_);
  inner_.barrier(site);
}

}  // namespace zero3
