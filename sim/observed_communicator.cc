// Forwarding collectives while accounting their staging buffers.
#include "sim/observed_communicator.h"

namespace zero3 {

namespace {

// Holds the staging bytes until the first wait, as the engine holds the buffers until then.
class ObservedWork : public Work {
 public:
  ObservedWork(std::shared_ptr<Work> inner, Allocator& allocator, int64_t bytes)
      : inner_(std::move(inner)), allocator_(allocator), bytes_(bytes) {}
  ~ObservedWork() override { release(); }
  void wait() override {
    inner_->wait();
    release();
  }
  bool done() override { return inner_->done(); }

 private:
  void release() {
    if (bytes_ > 0) allocator_.release(MemoryCategory::comm_buffer, bytes_);
    bytes_ = 0;
  }
  std::shared_ptr<Work> inner_;
  Allocator& allocator_;
  int64_t bytes_;
};

}  // namespace

std::shared_ptr<Work> ObservedCommunicator::observe(CollectiveOp op, const CallSite& site, int64_t buffer_bytes,
                                                    const std::function<std::shared_ptr<Work>()>& issue) {
  if (listener_) listener_(op, site);
  allocator_.acquire(MemoryCategory::comm_buffer, buffer_bytes, std::string(collective_op_name(op)) + " buffers");
  try {
    return std::make_shared<ObservedWork>(issue(), allocator_, buffer_bytes);
  } catch (...) {
    allocator_.release(MemoryCategory::comm_buffer, buffer_bytes);
    throw;
  }
}

std::shared_ptr<Work> ObservedCommunicator::all_gather_async(const Tensor& send, Tensor& recv, const CallSite& site) {
  return observe(CollectiveOp::all_gather, site, send.bytes() + recv.bytes(),
                 [&] { return inner_.all_gather_async(send, recv, site); });
}

std::shared_ptr<Work> ObservedCommunicator::reduce_scatter_async(const Tensor& send, Tensor& recv, ReduceOp op,
                                                                 const CallSite& site) {
  return observe(CollectiveOp::reduce_scatter, site, send.bytes() + recv.bytes(),
                 [&] { return inner_.reduce_scatter_async(send, recv, op, site); });
}

std::shared_ptr<Work> ObservedCommunicator::all_reduce_async(Tensor& buffer, ReduceOp op, const CallSite& site) {
  return observe(CollectiveOp::all_reduce, site, buffer.bytes(),
                 [&] { return inner_.all_reduce_async(buffer, op, site); });
}

std::shared_ptr<Work> ObservedCommunicator::broadcast_async(Tensor& buffer, int root, const CallSite& site) {
  return observe(CollectiveOp::broadcast, site, buffer.bytes(), [&] { return inner_.broadcast_async(buffer, root, site); });
}

std::shared_ptr<Work> ObservedCommunicator::barrier_async(const CallSite& site) {
  return observe(CollectiveOp::barrier, site, 0, [&] { return inner_.barrier_async(site); });
}

}  // namespace zero3
