// SymmetricCommunicator: the world-size-W communicator of a symmetric (SPMD) replay. Only one
// representative rank runs; every other rank is assumed to issue exactly the same collectives
// (which holds when all ranks replay the same events), so each collective completes at once with
// the cost model's time on the rank's communication stream: no fibers, no matching, no data.
//
// Why: replaying GPT-3 at 1024 ranks with 1024 full engines would cost 1024 times the time and
// memory of one, and tell nothing new for a trace whose ranks are identical. Rank-divergent traces
// take the full SimWorld instead, where mismatches must be found (traces/replay.h).
//
// Rank-specific facts still hold for the representative: every rank holds ceil(numel / W)
// elements of each parameter, so shard bytes are the same on every rank even where the last ranks
// own only padding (the report lists those parameters).
//
//   StreamClock clock(hardware);
//   SymmetricCommunicator comm(/*rank=*/0, /*world=*/1024, clock);
//   comm.all_gather(shard, gathered, site);   // clock waits for the modelled gather
#pragma once
#include <string>
#include <vector>

#include "core/sharding/communicator.h"
#include "traces/stream_clock.h"
#include "traces/trace.h"

namespace zero3 {

class SymmetricCommunicator : public Communicator {
 public:
  SymmetricCommunicator(int rank, int world, StreamClock& clock) : rank_(rank), world_(world), clock_(clock) {}

  int rank() const override { return rank_; }
  int world() const override { return world_; }
  // Not supported yet: the representative rank knows only its own color and key, not the group's
  // size. Throws InputError saying so (after the shared argument check).
  std::unique_ptr<Communicator> split(int color, int key, const CallSite& site) override;

  std::shared_ptr<Work> all_gather_async(const Tensor& send, Tensor& recv, const CallSite& site) override;
  std::shared_ptr<Work> reduce_scatter_async(const Tensor& send, Tensor& recv, ReduceOp op,
                                             const CallSite& site) override;
  std::shared_ptr<Work> all_reduce_async(Tensor& buffer, ReduceOp op, const CallSite& site) override;
  std::shared_ptr<Work> broadcast_async(Tensor& buffer, int root, const CallSite& site) override;
  std::shared_ptr<Work> barrier_async(const CallSite& site) override;
  // The clock waits for the communication stream to drain.
  void synchronize() override;
  // The replay has no peers to stop; later collectives throw PeerFailureError with the reason.
  void abort(const std::string& reason) override { abort_reason_ = reason; }

  // Every collective issued, in order, with its modelled start and duration.
  const std::vector<TraceCollective>& log() const { return log_; }

 private:
  std::shared_ptr<Work> issue(const CollectiveSignature& signature, const CallSite& site,
                              std::initializer_list<const Tensor*> buffers);

  int rank_;
  int world_;
  StreamClock& clock_;
  std::vector<TraceCollective> log_;
  std::string abort_reason_;
};


}  // namespace zero3
