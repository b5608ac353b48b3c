// NcclCommunicator: the Communicator seam (core/sharding/communicator.h) over one NCCL
// communicator, its collectives on the rank's comm stream, joined to the compute stream by events,
// with a host-side watchdog wherever the host waits: in synchronize(), and in the context's waits
// for the compute stream (a download: the compute stream may be waiting for a collective), where
// it is registered as the context's host-wait watchdog. Internal to the CUDA backend: it includes
// <nccl.h>.
//
//   CudaContext context(0);
//   std::vector<ncclComm_t> comms = nccl_init_all(1);            // world 1 on cuda:0
//   NcclCommunicator comm(comms[0], 0, 1, context, 600.0);     // owns comms[0] from here on
//   auto work = comm.all_gather_async(shard, gathered, site);  // enqueued behind the compute issued so far
//   work->wait();                                              // later compute waits; the host does not
//   comm.synchronize();                                        // the host waits, with the watchdog
#pragma once
#include <nccl.h>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend_cuda/cuda/cuda_context.h"
#include "core/sharding/communicator.h"

namespace zero3 {

struct IssuedCollective;
class NcclWork;

class NcclCommunicator final : public Communicator {
 public:
  // Takes ownership of `comm`: it is destroyed (or aborted) with this object, and aborted when the
  // constructor throws (a size, rank or device that disagrees with `comm`). `context` is the
  // rank's GPU, the one `comm` was made on; it must outlive this object, and every Work handle
  // must be dropped before this object is. `timeout_seconds`: how long a host wait lets a
  // collective stay pending, from its issue, before it aborts the communicator (the CLI's
  // --collective-timeout). Registers the liveness check as `context`'s host-wait watchdog.
  // `group_name` and `world_rank` (this rank's rank in the world communicator; -1: `rank`) are
  // what split() passes down.
  NcclCommunicator(ncclComm_t comm, int rank, int world, CudaContext& context, double timeout_seconds,
                   std::string group_name = "world", int world_rank = -1);
  // Without a throw: removes its host-wait watchdog from the context, then destroys the
  // communicator when every collective has completed, and aborts it otherwise (ncclCommDestroy
  // would wait for pending collectives, possibly for ever).
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int world() const override { return world_; }
  std::string group_name() const override { return group_name_; }
  // ncclCommSplit of this communicator (blocking, on the host; the group shares this rank's GPU,
  // context and streams). NCCL offers no cheap way to learn the other members' world ranks, so
  // the group's name lists this rank only: "group 1 (2 ranks, with world rank 3)". BackendError
  // naming ncclCommSplit when the NCCL headers built against predate it (2.18).
  std::unique_ptr<Communicator> split(int color, int key, const CallSite& site) override;

  std::shared_ptr<Work> all_gather_async(const Tensor& send, Tensor& recv, const CallSite& site) override;
  std::shared_ptr<Work> reduce_scatter_async(const Tensor& send, Tensor& recv, ReduceOp op,
                                             const CallSite& site) override;
  std::shared_ptr<Work> all_reduce_async(Tensor& buffer, ReduceOp op, const CallSite& site) override;
  std::shared_ptr<Work> broadcast_async(Tensor& buffer, int root, const CallSite& site) override;
  // A host rendezvous: a one-element all-reduce, then the host waits (synchronize()); the Work it
  // returns is already done.
  std::shared_ptr<Work> barrier_async(const CallSite& site) override;
  // The host waits for every collective issued so far, polling (host_wait.h) with the liveness
  // check between polls: an asynchronous NCCL error or a collective pending past the timeout
  // aborts the communicator and throws LivenessError naming this rank and the oldest pending
  // collective (its sequence number and signature).
  void synchronize() override;
  // ncclCommAbort. Safe from any thread (the single-process launcher aborts every rank's
  // communicator when one rank fails); later collectives, waits and synchronize() throw
  // PeerFailureError naming this rank and `reason`.
  void abort(const std::string& reason) override;

 private:
  friend class NcclWork;
  // The NCCL call of one collective, given the communicator and the comm stream.
  using Enqueue = std::function<ncclResult_t(ncclComm_t, cudaStream_t)>;

  std::shared_ptr<Work> issue(const CollectiveSignature& signature, const CallSite& site, std::vector<Tensor> buffers,
                              const char* nccl_call, const Enqueue& enqueue);
  void enqueue_under_lock(const IssuedCollective& collective, const char* nccl_call, const Enqueue& enqueue);
  void refuse_foreign_buffer(const Tensor& tensor, const IssuedCollective& collective) const;
  // PeerFailureError naming `what`, this rank and the reason, once the communicator was aborted.
  void throw_if_aborted(const std::string& what) const;
  // Drops completed collectives from the front of pending_; true when none is left.
  bool prune_completed();
  // The oldest collective still pending (null when none is) and how many are.
  std::shared_ptr<const IssuedCollective> oldest_pending(size_t* pending_count);
  // The watchdog run between the polls of every host wait (`waiting_for` names the wait): throws
  // PeerFailureError once the communicator was aborted (by another thread too), and aborts it
  // and throws LivenessError when NCCL reports an asynchronous error or the oldest pending
  // collective has been pending longer than the timeout. Never waits for a stream.
  void check_liveness(const char* waiting_for);
  // NCCL's asynchronous error, "" when there is none.
  std::string asynchronous_nccl_problem();
  // Aborts the communicator and throws LivenessError "rank R: <what> (N collective(s) pending; the
  // NCCL communicator was aborted)", `what` naming the oldest pending collective (its sequence
  // number and signature) and what happened to it.
  [[noreturn]] void fail_liveness(const std::string& what, size_t pending_count);
  // ncclCommAbort once, for `reason`, whoever calls first; later calls return at once.
  void abort_communicator(const std::string& reason);

  ncclComm_t comm_;
  int rank_;
  int world_;
  CudaContext& context_;
  double timeout_seconds_;
  std::string group_name_;
  int world_rank_;
  cudaEvent_t inputs_ready_ = nullptr;  // recorded on the compute stream before every collective
  float* barrier_buffer_ = nullptr;     // the barrier's one device element, always zero
  int64_t next_sequence_ = 0;
  // Issued and not yet seen complete, in issue order (one stream completes them in that order).
  // Guarded by pending_mutex_: the rank's thread issues, prunes and watches, and any thread that
  // waits for this GPU's compute stream runs the watchdog, which reads it.
  std::mutex pending_mutex_;
  std::deque<std::shared_ptr<const IssuedCollective>> pending_;
  // NCCL forbids concurrent calls on one communicator; abort() may come from another thread.
  std::timed_mutex nccl_mutex_;
  std::atomic<bool> aborted_{false};
  mutable std::mutex abort_reason_mutex_;
  std::string abort_reason_;
};

// ncclCommInitAll over devices 0 .. device_count-1 in this process: the one-process-all-GPUs mode,
// communicator i on cuda:i with rank i. BackendError with NCCL's words when it fails.
std::vector<ncclComm_t> nccl_init_all(int device_count);
// ncclCommInitRank for one process per GPU: call it with the rank's device current
// (CudaContext::make_current) after every rank has the same `id`. BackendError when it fails.
ncclComm_t nccl_init_rank(int world, const ncclUniqueId& id, int rank);

}  // namespace zero3
