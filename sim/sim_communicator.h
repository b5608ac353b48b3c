// SimCommunicator: one rank's Communicator over the simulated world. Calls pass the shared argument
// check (communicator.h), then go to the CollectiveMatcher; wait() and synchronize() block only
// this rank's fiber; abort() fails the world with a peer failure naming this rank. Work handles are valid
// while the SimWorld that made them runs.
#pragma once
#include <memory>
#include <string>

#include "core/sharding/communicator.h"

namespace zero3 {

class CollectiveMatcher;

class SimCommunicator : public Communicator {
 public:
  // `task`: the matcher's party this rank issues as (the rank itself unless its fiber is shared).
  SimCommunicator(int rank, int world, int task, CollectiveMatcher& matcher)
      : rank_(rank), world_(world), task_(task), matcher_(matcher) {}

  int rank() const override { return rank_; }
  int world() const override { return world_; }

  std::shared_ptr<Work> all_gather_async(const Tensor& send, Tensor& recv, const CallSite& site) override;
  std::shared_ptr<Work> reduce_scatter_async(const Tensor& send, Tensor& recv, ReduceOp op,
                                             const CallSite& site) override;
  std::shared_ptr<Work> all_reduce_async(Tensor& buffer, ReduceOp op, const CallSite& site) override;
  std::shared_ptr<Work> broadcast_async(Tensor& buffer, int root, const CallSite& site) override;
  std::shared_ptr<Work> barrier_async(const CallSite& site) override;
  void synchronize() override;
  void abort(const std::string& reason) override;

 private:
  int rank_;
  int world_;
  int task_;
  CollectiveMatcher& matcher_;
};

}  // namespace zero3
