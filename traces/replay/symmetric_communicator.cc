// Collectives of the symmetric replay: the shared argument check, the cost model, the log.
#include "traces/replay/symmetric_communicator.h"

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

SymmetricCommunicator::SymmetricCommunicator(int rank, int world, StreamClock& clock)
    : SymmetricCommunicator(rank, world, clock, std::make_shared<Shared>(), "world",
                            world_level(clock.hardware(), world)) {}

SymmetricCommunicator::SymmetricCommunicator(int rank, int world, StreamClock& clock, std::shared_ptr<Shared> shared,
                                             std::string group, LinkLevel level)
    : rank_(rank), world_(world), clock_(clock), shared_(std::move(shared)), group_(std::move(group)), level_(level) {}

std::shared_ptr<Work> SymmetricCommunicator::issue(const CollectiveSignature& signature, const CallSite& site,
                                                   std::initializer_list<const Tensor*> buffers) {
  if (!shared_->abort_reason.empty()) {
    throw PeerFailureError(std::string(collective_op_name(signature.op)) + " (" + describe(site) + ") after rank " +
                               std::to_string(rank_) + " aborted the world: " + shared_->abort_reason,
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
  const double duration_s = group_ == "world"
                                ? collective_time_s(clock_.hardware(), signature.op, bytes, world_)
                                : group_collective_time_s(clock_.hardware(), signature.op, bytes, world_, level_);
  const double start_s = clock_.start_collective(duration_s);
  std::vector<TraceCollective>& log = shared_->log;
  log.push_back({.sequence = static_cast<int64_t>(log.size()), .op = collective_op_name(signature.op),
                 .dtype = dtype_name(signature.dtype), .count = signature.count, .bytes = bytes,
                 .module = site.module, .phase = site.phase, .step = site.step, .start_s = start_s,
                 .duration_s = duration_s, .group = group_, .level = link_level_name(level_)});
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

std::unique_ptr<Communicator> SymmetricCommunicator::group_of(int block_size, bool across, const CallSite& site) {
  const char* what = across ? "split_across_blocks" : "split_block";
  if (group_ != "world" || block_size < 1 || world_ % block_size != 0) {
    throw InputError(std::string(what) + "(" + std::to_string(block_size) + ") on rank " + std::to_string(rank_) +
                     " (" + describe(site) + ") of the symmetric replay's " + group_ + " of " +
                     std::to_string(world_) + " ranks: expected a block size that divides the world's size");
  }
  const HardwareProfile& hardware = clock_.hardware();
  const int blocks = world_ / block_size;
  // Every group of the split, for its level: the slowest one's link sets every rank's pace.
  LinkLevel level = LinkLevel::intra_node;
  if (across) {
    for (int place = 0; place < block_size && level == LinkLevel::intra_node; ++place) {
      std::vector<int> members;
      for (int block = 0; block < blocks; ++block) members.push_back(block * block_size + place);
      level = link_level(hardware, members);
    }
  } else {
    level = block_level(hardware, block_size);
  }
  const int group_rank = across ? rank_ / block_size : rank_ % block_size;
  const int group_world = across ? blocks : block_size;
  return std::unique_ptr<Communicator>(new SymmetricCommunicator(
      group_rank, group_world, clock_, shared_, across ? "across blocks" : "block", level));
}

std::unique_ptr<Communicator> SymmetricCommunicator::split_block(int block_size, const CallSite& site) {
  return group_of(block_size, /*across=*/false, site);
}

std::unique_ptr<Communicator> SymmetricCommunicator::split_across_blocks(int block_size, const CallSite& site) {
  return group_of(block_size, /*across=*/true, site);
}

}  // namespace zero3
