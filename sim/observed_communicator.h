// ObservedCommunicator: a Communicator decorator that counts the staging buffers of each collective
// under comm_buffer from issue until the wait (the engine allocates them but does not account
// them), for simulated training and replay alike, and tells an optional listener about every
// collective as it is issued (replay releases full gradients when their reduce-scatter starts).
// split() splits the inner communicator and wraps the group in an ObservedCommunicator of its own
// (same allocator, same listener), so a group's buffers are counted as the world's are.
//
//   ObservedCommunicator comm(sim.comm(), memory, [&](CollectiveOp op, const CallSite& site) { ... });
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "core/tensor/allocator.h"
#include "core/sharding/communicator.h"

namespace zero3 {

class ObservedCommunicator : public Communicator {
 public:
  using Listener = std::function<void(CollectiveOp, const CallSite&)>;
  ObservedCommunicator(Communicator& inner, Allocator& allocator, Listener listener)
      : inner_(inner), allocator_(allocator), listener_(std::move(listener)) {}
  // Owns `inner` (a group split from another communicator).
  ObservedCommunicator(std::unique_ptr<Communicator> inner, Allocator& allocator, Listener listener)
      : owned_(std::move(inner)), inner_(*owned_), allocator_(allocator), listener_(std::move(listener)) {}

  int rank() const override { return inner_.rank(); }
  int world() const override { return inner_.world(); }
  std::string group_name() const override { return inner_.group_name(); }
  std::unique_ptr<Communicator> split(int color, int key, const CallSite& site) override {
    return std::make_unique<ObservedCommunicator>(inner_.split(color, key, site), allocator_, listener_);
  }
  // The inner communicator's own forms (the symmetric replay answers them without split()).
  std::unique_ptr<Communicator> split_block(int block_size, const CallSite& site) override {
    return std::make_unique<ObservedCommunicator>(inner_.split_block(block_size, site), allocator_, listener_);
  }
  std::unique_ptr<Communicator> split_across_blocks(int block_size, const CallSite& site) override {
    return std::make_unique<ObservedCommunicator>(inner_.split_across_blocks(block_size, site), allocator_,
                                                  listener_);
  }

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

  std::unique_ptr<Communicator> owned_;  // declared first: inner_ may refer to it
  Communicator& inner_;
  Allocator& allocator_;
  Listener listener_;
};

}  // namespace zero3
