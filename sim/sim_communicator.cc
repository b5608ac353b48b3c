// Work handles over the collective matcher, after the shared argument check.
#include "sim/sim_communicator.h"

#include <algorithm>

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

bool same_site(const CallSite& a, const CallSite& b) {
  return a.step == b.step && a.module == b.module && a.phase == b.phase && a.params == b.params;
}

}  // namespace

std::shared_ptr<const CallSite> SimCommunicator::shared_site(const CallSite& site) {
  if (last_site_ == nullptr || !same_site(*last_site_, site)) last_site_ = std::make_shared<const CallSite>(site);
  return last_site_;
}

CollectiveCall SimCommunicator::all_gather_call(const Tensor& send, Tensor& recv, const CallSite& site,
                                                bool blocking) {
  return {.signature = check_all_gather(send, recv, rank_, world_, site), .site = shared_site(site),
          .meta = send.is_meta(), .blocking = blocking, .input = send, .output = recv};
}

CollectiveCall SimCommunicator::reduce_scatter_call(const Tensor& send, Tensor& recv, ReduceOp op,
                                                    const CallSite& site, bool blocking) {
  return {.signature = check_reduce_scatter(send, recv, op, rank_, world_, site), .site = shared_site(site),
          .meta = send.is_meta(), .blocking = blocking, .input = send, .output = recv};
}

CollectiveCall SimCommunicator::all_reduce_call(Tensor& buffer, ReduceOp op, const CallSite& site, bool blocking) {
  return {.signature = check_all_reduce(buffer, op, rank_, site), .site = shared_site(site),
          .meta = buffer.is_meta(), .blocking = blocking, .input = buffer, .output = buffer};
}

CollectiveCall SimCommunicator::broadcast_call(Tensor& buffer, int root, const CallSite& site, bool blocking) {
  const CollectiveSignature signature = check_broadcast(buffer, root, rank_, world_, site);
  // The root's buffer is only read; every other rank's is only written.
  const bool is_root = root == rank_;
  return {.signature = signature, .site = shared_site(site), .meta = buffer.is_meta(), .blocking = blocking,
          .input = is_root ? buffer : Tensor(), .output = is_root ? Tensor() : buffer};
}

CollectiveCall SimCommunicator::barrier_call(const CallSite& site, bool blocking) {
  return {.signature = barrier_signature(), .site = shared_site(site), .meta = false, .blocking = blocking,
          .input = Tensor(), .output = Tensor()};
}

std::shared_ptr<Work> SimCommunicator::issue_async(CollectiveCall call) {
  return std::make_shared<SimWork>(matcher_, task_, matcher_.issue(task_, group_, std::move(call)));
}

int64_t SimCommunicator::issue_and_wait(CollectiveCall call) {
  const std::shared_ptr<CollectiveSlot> slot = matcher_.issue(task_, group_, std::move(call));
  matcher_.wait(task_, *slot);
  return slot->sequence;
}

std::unique_ptr<Communicator> SimCommunicator::split(int color, int key, const CallSite& site) {
  check_split(color, key, rank_, site);
  if (matcher_.shares_tasks()) {
    throw InputError("split on rank " + std::to_string(rank_) + " (" + describe(site) +
                     "): this simulated world runs several ranks as one task (a shape replay's identical ranks); "
                     "groups need every rank to be a task of its own");
  }
  CallSite exchange_site = site;
  exchange_site.params.push_back("<split color, key>");
  Tensor mine = Tensor::from_values({2}, {static_cast<float>(color), static_cast<float>(key)});
  Tensor every = Tensor::zeros({2 * int64_t{world_}});
  const int64_t sequence = issue_and_wait(all_gather_call(mine, every, exchange_site, true));
  std::vector<int> colors, keys;
  for (int rank = 0; rank < world_; ++rank) {
    colors.push_back(static_cast<int>(every.data()[2 * rank]));
    keys.push_back(static_cast<int>(every.data()[2 * rank + 1]));
  }
  // Parent ranks in group-rank order, then as the matcher's tasks (= world ranks: no shared tasks).
  const std::vector<int> members = split_members(colors, keys, color);
  const std::vector<int>& parent_tasks = matcher_.group_tasks(group_);
  std::vector<int> tasks;
  for (int parent_rank : members) tasks.push_back(parent_tasks[static_cast<size_t>(parent_rank)]);
  const std::string name = split_group_name(color, tasks);
  const int group = matcher_.register_group(std::to_string(group_) + "#" + std::to_string(sequence) + "/" +
                                                std::to_string(color),
                                            tasks, name);
  const auto found = std::find(members.begin(), members.end(), rank_);
  ZERO3_CHECK(found != members.end(), "rank " + std::to_string(rank_) + " missing from its own group " + name);
  return std::make_unique<SimCommunicator>(static_cast<int>(found - members.begin()), static_cast<int>(members.size()),
                                           task_, matcher_, group, name);
}

std::unique_ptr<Communicator> SimCommunicator::split_block(int block_size, const CallSite& site) {
  std::unique_ptr<Communicator> block = Communicator::split_block(block_size, site);
  matcher_.set_group_kind(static_cast<SimCommunicator&>(*block).group_, "block");
  return block;
}

std::unique_ptr<Communicator> SimCommunicator::split_across_blocks(int block_size, const CallSite& site) {
  std::unique_ptr<Communicator> across = Communicator::split_across_blocks(block_size, site);
  matcher_.set_group_kind(static_cast<SimCommunicator&>(*across).group_, "across blocks");
  return across;
}

std::shared_ptr<Work> SimCommunicator::all_gather_async(const Tensor& send, Tensor& recv, const CallSite& site) {
  return issue_async(all_gather_call(send, recv, site, false));
}

std::shared_ptr<Work> SimCommunicator::reduce_scatter_async(const Tensor& send, Tensor& recv, ReduceOp op,
                                                            const CallSite& site) {
  return issue_async(reduce_scatter_call(send, recv, op, site, false));
}

std::shared_ptr<Work> SimCommunicator::all_reduce_async(Tensor& buffer, ReduceOp op, const CallSite& site) {
  return issue_async(all_reduce_call(buffer, op, site, false));
}

std::shared_ptr<Work> SimCommunicator::broadcast_async(Tensor& buffer, int root, const CallSite& site) {
  return issue_async(broadcast_call(buffer, root, site, false));
}

std::shared_ptr<Work> SimCommunicator::barrier_async(const CallSite& site) {
  return issue_async(barrier_call(site, false));
}

void SimCommunicator::all_gather(const Tensor& send, Tensor& recv, const CallSite& site) {
  issue_and_wait(all_gather_call(send, recv, site, true));
}

void SimCommunicator::reduce_scatter(const Tensor& send, Tensor& recv, ReduceOp op, const CallSite& site) {
  issue_and_wait(reduce_scatter_call(send, recv, op, site, true));
}

void SimCommunicator::all_reduce(Tensor& buffer, ReduceOp op, const CallSite& site) {
  issue_and_wait(all_reduce_call(buffer, op, site, true));
}

void SimCommunicator::broadcast(Tensor& buffer, int root, const CallSite& site) {
  issue_and_wait(broadcast_call(buffer, root, site, true));
}

void SimCommunicator::barrier(const CallSite& site) { issue_and_wait(barrier_call(site, true)); }

void SimCommunicator::synchronize() { matcher_.drain(task_); }

void SimCommunicator::abort(const std::string& reason) { matcher_.rank_failed(task_, "aborted the world: " + reason); }

}  // namespace zero3
