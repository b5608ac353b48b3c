// ObservedCommunicator: a Communicator decorator that counts the staging buffers of each collective
// under comm_buffer from issue until the wait (the engine allocates them but does not account
// them), for simulated training and replay alike, and tells an optional listener about every
// collective as it is issued (replay releases full gradients when their reduce-scatter starts).
//
//   ObservedCommunicator comm(sim.comm(), memory, [&](CollectiveOp op, const CallSite& site) { ... });
#pragma once
#include <functional>

#include "core/tensor/allocator.h"
#include "core/sharding/communicator.h"

namespace zero3 {

class ObservedCommunicator : public Communicator {
 public:
  using Listener = std::function<void(CollectiveOp, const CallSite&)>;
  ObservedCommunicator(Communicator& inner, Allocator& allocator, Listener listener)
      : inner_(inner), allocator_(allocator), listener_(std::move(listener)) {}

  int rank() const override { return inner_.rank(); }
  int world() const override { return inner_.world(); }

  std::shared_ptr<Work> all_gather_async(const Tensor& send, Tensor& recv, const CallSite& site) override;
  std::shared_ptr<Work> reduce_scatter_async(const Tensor& send, Tensor& recv, ReduceOp op,
                                             const CallSite& site) override;
  std::shared_ptr<Work> all_reduce_async(Tensor& buffer, ReduceOp op, const CallSite& site) override;
  std::shared_ptr<Work> broadcast_async(Tensor& buffer, int root, const CallSite& site) override;
  std::shared_ptr<Work> barrier_async(const CallSite& site) override;
  void synchronize() override { inner_.synchronize(); }
  void abort(const std::string& reason) override { inner_.abort(reason); }

 private:
  std::shared_ptr<Work> observe(CollectiveOp op, const CallSite& site, int64_t buffer_bytes,
                                const std::function<std::shared_ptr<Work>()>& issue);

  Communicator& inner_;
  Allocator& allocator_;
  Listener listener_;
};

}  // namespace zero3
