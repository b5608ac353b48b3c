// SymmetricCommunicator: the world-size-W communicator of a symmetric (SPMD) replay. Only one
// representative rank runs; every other rank is assumed to issue exactly the same collectives
// (which holds when all ranks replay the same events), so each collective completes at once with
// the cost model's time on the rank's communication stream: no fibers, no matching, no data.
//
// Why: replaying GPT-3 at 1024 ranks with 1024 full engines would cost 1024 times the time and
// memory of one, and tell nothing new for a trace whose ranks are identical. Rank-divergent traces
// take the full SimWorld instead, where mismatches must be found (traces/replay/replay.h).
//
// Rank-specific facts still hold for the representative: every rank holds ceil(numel / W)
// elements of each parameter, so shard bytes are the same on every rank even where the last ranks
// own only padding (the report lists those parameters).
//
// Process groups: split_block() and split_across_blocks() return a SymmetricCommunicator of the
// group's size, known from the sizes alone (communicator.h), with this rank's place in it. Every
// rank's groups look alike, so the representative's stand for all. A group shares the parent's
// clock, communication stream and log: one stream per rank, so the rank's world and group
// collectives run one after another in issue order, as NCCL runs communicators issued on one
// stream (the engine issues them all on one). Each logged collective names its group ("world",
// "block", "across blocks") and level: "inter-node" if ANY of the split's groups spans nodes
// (the slowest group sets the step), priced by group_collective_time_s; world collectives keep
// collective_time_s, so a flat replay is priced as before. split() still throws: a group's size
// depends on every rank's color, and only this rank's is known.
//
//   StreamClock clock(hardware);
//   SymmetricCommunicator comm(/*rank=*/0, /*world=*/1024, clock);
//   comm.all_gather(shard, gathered, site);   // clock waits for the modelled gather
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/sharding/communicator.h"
#include "traces/replay/stream_clock.h"
#include "traces/format/trace.h"

namespace zero3 {

class SymmetricCommunicator : public Communicator {
 public:
  SymmetricCommunicator(int rank, int world, StreamClock& clock);

  int rank() const override { return rank_; }
  int world() const override { return world_; }
  std::string group_name() const override { return group_; }
  // Not supported: the representative rank knows only its own color and key, not the group's
  // size. Throws InputError saying so (after the shared argument check).
  std::unique_ptr<Communicator> split(int color, int key, const CallSite& site) override;
  // InputError unless block_size divides this communicator's world (only the world splits).
  std::unique_ptr<Communicator> split_block(int block_size, const CallSite& site) override;
  std::unique_ptr<Communicator> split_across_blocks(int block_size, const CallSite& site) override;

  std::shared_ptr<Work> all_gather_async(const Tensor& send, Tensor& recv, const CallSite& site) override;
  std::shared_ptr<Work> reduce_scatter_async(const Tensor& send, Tensor& recv, ReduceOp op,
                                             const CallSite& site) override;
  std::shared_ptr<Work> all_reduce_async(Tensor& buffer, ReduceOp op, const CallSite& site) override;
  std::shared_ptr<Work> broadcast_async(Tensor& buffer, int root, const CallSite& site) override;
  std::shared_ptr<Work> barrier_async(const CallSite& site) override;
  // The clock waits for the communication stream to drain.
  void synchronize() override;
  // The replay has no peers to stop; later collectives throw PeerFailureError with the reason.
  void abort(const std::string& reason) override { shared_->abort_reason = reason; }

  // Every collective issued on this communicator and the groups split from it (one log per rank),
  // in issue order, with its modelled start and duration; `sequence` is the place in this log.
  const std::vector<TraceCollective>& log() const { return shared_->log; }
  LinkLevel level() const { return level_; }

 private:
  struct Shared {
    std::vector<TraceCollective> log;
    std::string abort_reason;  // the world's: a group's collectives fail after abort() too
  };
  SymmetricCommunicator(int rank, int world, StreamClock& clock, std::shared_ptr<Shared> shared, std::string group,
                        LinkLevel level);
  std::unique_ptr<Communicator> group_of(int block_size, bool across, const CallSite& site);
  std::shared_ptr<Work> issue(const CollectiveSignature& signature, const CallSite& site,
                              std::initializer_list<const Tensor*> buffers);

  int rank_;
  int world_;
  StreamClock& clock_;
  std::shared_ptr<Shared> shared_;
  std::string group_;
  LinkLevel level_;
};


}  // namespace zero3
