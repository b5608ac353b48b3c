// SimCommunicator: one rank's Communicator over the simulated world. Calls pass the shared argument
// check (communicator.h), then go to the CollectiveMatcher; wait() and synchronize() block only
// this rank's fiber; abort() fails the world with a peer failure naming this rank. Work handles are valid
// while the SimWorld that made them runs. The blocking forms issue and wait without a Work handle,
// and mark their calls blocking: nothing of this rank runs before they complete, so their outputs
// need no poisoning (collective_matcher.h).
//
// split() exchanges every rank's color and key with an all-gather over this communicator (at the
// given call site, its params extended with "<split color, key>"), so a rank that skips or
// misplaces a split is a mismatch or deadlock like any other collective; then each rank registers
// its group with the matcher, under a key made of this group, the exchange's sequence number and
// the color, the same on all its members. The group's collectives are matched per group.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/sharding/communicator.h"

namespace zero3 {

class CollectiveMatcher;
struct CollectiveCall;

class SimCommunicator : public Communicator {
 public:
  // `task`: the matcher's party this rank issues as (the rank itself unless its fiber is shared).
  SimCommunicator(int rank, int world, int task, CollectiveMatcher& matcher)
      : SimCommunicator(rank, world, task, matcher, 0, "world") {}
  // A group's communicator: `group` is the matcher's id for it, `rank` and `world` the group's.
  SimCommunicator(int rank, int world, int task, CollectiveMatcher& matcher, int group, std::string group_name)
      : rank_(rank), world_(world), task_(task), group_(group), group_name_(std::move(group_name)), matcher_(matcher) {}

  int rank() const override { return rank_; }
  int world() const override { return world_; }
  std::string group_name() const override { return group_name_; }
  std::unique_ptr<Communicator> split(int color, int key, const CallSite& site) override;
  // split() underneath; the group is then named "block" / "across blocks" in the event log.
  std::unique_ptr<Communicator> split_block(int block_size, const CallSite& site) override;
  std::unique_ptr<Communicator> split_across_blocks(int block_size, const CallSite& site) override;

  std::shared_ptr<Work> all_gather_async(const Tensor& send, Tensor& recv, const CallSite& site) override;
  std::shared_ptr<Work> reduce_scatter_async(const Tensor& send, Tensor& recv, ReduceOp op,
                                             const CallSite& site) override;
  std::shared_ptr<Work> all_reduce_async(Tensor& buffer, ReduceOp op, const CallSite& site) override;
  std::shared_ptr<Work> broadcast_async(Tensor& buffer, int root, const CallSite& site) override;
  std::shared_ptr<Work> barrier_async(const CallSite& site) override;
  void synchronize() override;
  void abort(const std::string& reason) override;

  void all_gather(const Tensor& send, Tensor& recv, const CallSite& site) override;
  void reduce_scatter(const Tensor& send, Tensor& recv, ReduceOp op, const CallSite& site) override;
  void all_reduce(Tensor& buffer, ReduceOp op, const CallSite& site) override;
  void broadcast(Tensor& buffer, int root, const CallSite& site) override;
  void barrier(const CallSite& site) override;

 private:
  // Each call after the shared argument check, as the matcher takes it.
  CollectiveCall all_gather_call(const Tensor& send, Tensor& recv, const CallSite& site, bool blocking);
  CollectiveCall reduce_scatter_call(const Tensor& send, Tensor& recv, ReduceOp op, const CallSite& site,
                                     bool blocking);
  CollectiveCall all_reduce_call(Tensor& buffer, ReduceOp op, const CallSite& site, bool blocking);
  CollectiveCall broadcast_call(Tensor& buffer, int root, const CallSite& site, bool blocking);
  CollectiveCall barrier_call(const CallSite& site, bool blocking);
  std::shared_ptr<Work> issue_async(CollectiveCall call);
  // Returns the collective's sequence number in this communicator's group.
  int64_t issue_and_wait(CollectiveCall call);
  // The call's own copy of `site`, shared from here on by everything that keeps it. Consecutive
  // calls from one site share one copy.
  std::shared_ptr<const CallSite> shared_site(const CallSite& site);

  int rank_;
  int world_;
  int task_;
  int group_;
  std::string group_name_;
  CollectiveMatcher& matcher_;
  std::shared_ptr<const CallSite> last_site_;
};

}  // namespace zero3
