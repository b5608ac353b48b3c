// NCCL collectives behind the Communicator seam (nccl_communicator.h): the stream handoffs of each
// collective, the pending list a timeout names, the watchdog every host wait runs, and abort.
#include "backend_cuda/cuda/nccl_communicator.h"

#include <chrono>
#include <cstdio>
#include <exception>
#include <utility>

#include "backend_cuda/cuda/host_wait.h"
#include "core/base/errors.h"

namespace zero3 {

// One collective this rank issued: what the ranks agreed to run, who asked, when, and the event
// recorded on the comm stream after it.
struct IssuedCollective {
  IssuedCollective(int64_t sequence_number, const CollectiveSignature& checked, const CallSite& call_site)
      : sequence(sequence_number), signature(checked), site(call_site) {}
  ~IssuedCollective() {
    // Destroying an event that has not fired yet is allowed: CUDA releases it once it fires.
    if (completion != nullptr) static_cast<void>(cudaEventDestroy(completion));
  }
  IssuedCollective(const IssuedCollective&) = delete;
  IssuedCollective& operator=(const IssuedCollective&) = delete;

  // The same words as the MPI backend's: "collective #12 (all_gather bf16 count=96) at module ...".
  std::string describe() const {
    return "collective #" + std::to_string(sequence) + " (" + zero3::describe(signature) + ") at " +
           zero3::describe(site);
  }

  const int64_t sequence;
  const CollectiveSignature signature;
  const CallSite site;
  // The watchdog's timeout counts from here: a collective still pending this long after its issue
  // is taken for hung, whichever host wait notices it.
  const std::chrono::steady_clock::time_point issued_at = std::chrono::steady_clock::now();
  cudaEvent_t completion = nullptr;  // null when nothing was enqueued (a zero-count collective)
};

// The Work of one collective. It holds the collective's buffers until the compute stream is
// ordered after the collective, so that the stream-ordered frees of those buffers (on the compute
// stream, cuda_memory.cc) come after the collective however early the caller drops its tensors.
class NcclWork final : public Work {
 public:
  NcclWork(NcclCommunicator& comm, std::shared_ptr<const IssuedCollective> collective, std::vector<Tensor> buffers)
      : comm_(comm), collective_(std::move(collective)), buffers_(std::move(buffers)) {}
  ~NcclWork() override {
    // Never waited: compute waits now, before the buffers' frees are queued behind it. A failure
    // means the device is already in an error state, which the next checked call reports.
    if (!buffers_.empty() && collective_->completion != nullptr) {
      static_cast<void>(cudaStreamWaitEvent(comm_.context_.compute_stream(), collective_->completion, 0));
    }
  }
  NcclWork(const NcclWork&) = delete;
  NcclWork& operator=(const NcclWork&) = delete;

  void wait() override {
    if (collective_->completion == nullptr) return;
    comm_.throw_if_aborted("rank " + std::to_string(comm_.rank_) + ": waiting for " + collective_->describe());
    // Kernels issued after this on the compute stream run after the collective: they may read its
    // output, and the frees of its buffers are ordered after it.
    check_cuda(cudaStreamWaitEvent(comm_.context_.compute_stream(), collective_->completion, 0),
               "cudaStreamWaitEvent (compute after collective)");
    buffers_.clear();
  }

  bool done() override {
    if (collective_->completion == nullptr) return true;
    return cuda_query_done(cudaEventQuery(collective_->completion),
                           [] { return "cudaEventQuery (collective completion)"; });
  }

 private:
  NcclCommunicator& comm_;
  std::shared_ptr<const IssuedCollective> collective_;
  std::vector<Tensor> buffers_;
};

namespace {

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return ncclFloat32;
    case DType::bf16: return ncclBfloat16;
  }
  throw BackendError("no NCCL type for dtype " + std::string(dtype_name(dtype)));
}

ncclRedOp_t nccl_reduction(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::max: return ncclMax;
  }
  throw BackendError(std::string("no NCCL reduction for ") + reduce_op_name(op));
}

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", seconds);
  return text;
}

std::string nccl_problem_text(ncclResult_t result, ncclComm_t comm) {
  std::string text = ncclGetErrorString(result);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && last[0] != '\0') text += " (" + std::string(last) + ")";
  return text;
}

void check_nccl(ncclResult_t result, const std::string& call) {
  if (result == ncclSuccess) return;
  throw BackendError(call + " failed: " + nccl_problem_text(result, nullptr));
}

// The communicator's size, rank and device must be the ones the caller says: a mix-up would
// otherwise show up only as a hang or as data landing in the wrong block.
void check_agreement(ncclComm_t comm, int rank, int world, const CudaContext& context) {
  int nccl_world = 0;
  int nccl_rank = 0;
  int nccl_device = 0;
  check_nccl(ncclCommCount(comm, &nccl_world), "ncclCommCount");
  check_nccl(ncclCommUserRank(comm, &nccl_rank), "ncclCommUserRank");
  check_nccl(ncclCommCuDevice(comm, &nccl_device), "ncclCommCuDevice");
  if (nccl_world != world || nccl_rank != rank || nccl_device != context.device_index()) {
    throw BackendError("the NCCL communicator is rank " + std::to_string(nccl_rank) + " of " +
                       std::to_string(nccl_world) + " on cuda:" + std::to_string(nccl_device) +
                       ", but was given as rank " + std::to_string(rank) + " of " + std::to_string(world) + " on " +
                       device_name(context.device()));
  }
}

}  // namespace

NcclCommunicator::NcclCommunicator(ncclComm_t comm, int rank, int world, CudaContext& context, double timeout_seconds,
                                   std::string group_name, int world_rank)
    : comm_(comm), rank_(rank), world_(world), context_(context), timeout_seconds_(timeout_seconds),
      group_name_(std::move(group_name)), world_rank_(world_rank < 0 ? rank : world_rank) {
  if (comm_ == nullptr) throw BackendError("NcclCommunicator needs an NCCL communicator, got none");
  try {
    if (!(timeout_seconds_ > 0.0)) {
      throw InputError("the collective timeout must be a positive number of seconds, got " +
                       seconds_text(timeout_seconds_));
    }
    check_agreement(comm_, rank_, world_, context_);
    context_.make_current();
    check_cuda(cudaEventCreateWithFlags(&inputs_ready_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    // Blocking calls, safe here: no collective of this communicator exists yet for them to wait on.
    check_cuda(cudaMalloc(&barrier_buffer_, sizeof(float)), "cudaMalloc (barrier element)");
    check_cuda(cudaMemsetAsync(barrier_buffer_, 0, sizeof(float), context_.comm_stream()),
               "cudaMemsetAsync (barrier element, on the comm stream that every barrier uses)");
    // The compute stream waits (by event) for collectives, so a host wait for it is a wait for
    // them too: it runs the same liveness check as synchronize(), and a hung collective ends in
    // LivenessError (exit 3) wherever the host waits.
    context_.add_host_wait_watchdog(this, [this](const char* why) { check_liveness(why); });
  } catch (...) {
    // The communicator was handed over: it ends here too rather than leak.
    if (barrier_buffer_ != nullptr) static_cast<void>(cudaFree(barrier_buffer_));
    if (inputs_ready_ != nullptr) static_cast<void>(cudaEventDestroy(inputs_ready_));
    static_cast<void>(ncclCommAbort(comm_));
    throw;
  }
}

std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key, const CallSite& site) {
  check_split(color, key, rank_, site);
  const std::string what = "rank " + std::to_string(rank_) + " of " + group_name_ + ": ncclCommSplit at " + describe(site);
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
  ncclComm_t group = nullptr;
  {
    // NCCL forbids concurrent calls on one communicator (abort() may come from another thread).
    const std::lock_guard lock(nccl_mutex_);
    throw_if_aborted(what);
    context_.make_current();
    // nullptr config: the group inherits the parent's (blocking) configuration.
    check_nccl(ncclCommSplit(comm_, color, key, &group, nullptr), what);
  }
  if (group == nullptr) throw BackendError(what + " returned no communicator for color " + std::to_string(color));
  int group_world = 0;
  int group_rank = 0;
  check_nccl(ncclCommCount(group, &group_world), what + ": ncclCommCount");
  check_nccl(ncclCommUserRank(group, &group_rank), what + ": ncclCommUserRank");
  const std::string name = "group " + std::to_string(color) + " (" + std::to_string(group_world) +
                           (group_world == 1 ? " rank" : " ranks") + ", with world rank " +
                           std::to_string(world_rank_) + ")";
  // The constructor owns `group` from here on, and aborts it if it throws.
  return std::make_unique<NcclCommunicator>(group, group_rank, group_world, context_, timeout_seconds_, name,
                                            world_rank_);
#else
  throw BackendError(what + ": ncclCommSplit is not in the NCCL headers this build used (NCCL " +
                     std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "); expected NCCL 2.18 or later");
#endif
}

NcclCommunicator::~NcclCommunicator() {
  context_.remove_host_wait_watchdog(this);
  if (!aborted_.load(std::memory_order_acquire)) {
    bool quiet = false;
    try {
      quiet = prune_completed();
    } catch (const std::exception& error) {
      std::fprintf(stderr, "zero3: rank %d: %s\n", rank_, error.what());
    }
    const ncclResult_t result = quiet ? ncclCommDestroy(comm_) : ncclCommAbort(comm_);
    if (result != ncclSuccess) {
      std::fprintf(stderr, "zero3: rank %d: %s failed: %s\n", rank_, quiet ? "ncclCommDestroy" : "ncclCommAbort",
                   ncclGetErrorString(result));
    }
  }
  {
    const std::lock_guard lock(pending_mutex_);
    pending_.clear();
  }
  // cudaFree waits for the device, which is safe here: the communicator was destroyed with nothing
  // pending, or aborted, and NCCL's kernels exit once their communicator is aborted.
  if (barrier_buffer_ != nullptr) static_cast<void>(cudaFree(barrier_buffer_));
  if (inputs_ready_ != nullptr) static_cast<void>(cudaEventDestroy(inputs_ready_));
}

void NcclCommunicator::throw_if_aborted(const std::string& what) const {
  if (!aborted_.load(std::memory_order_acquire)) return;
  std::string reason;
  {
    const std::lock_guard lock(abort_reason_mutex_);
    reason = abort_reason_;
  }
  throw PeerFailureError(what + ": rank " + std::to_string(rank_) + " aborted the world: " + reason, rank_);
}

void NcclCommunicator::refuse_foreign_buffer(const Tensor& tensor, const IssuedCollective& collective) const {
  if (tensor.is_meta()) {
    throw BackendError("rank " + std::to_string(rank_) + ": --backend cuda moves real data, and " +
                       collective.describe() + " has a meta tensor (meta runs are the simulator's and trace replay's)");
  }
  if (tensor.device() != context_.device()) {
    throw BackendError("rank " + std::to_string(rank_) + ": " + collective.describe() + " has a buffer " +
                       zero3::describe(tensor) + ", but this rank's NCCL communicator moves " +
                       device_name(context_.device()) + " memory");
  }
}

std::shared_ptr<Work> NcclCommunicator::issue(const CollectiveSignature& signature, const CallSite& site,
                                              std::vector<Tensor> buffers, const char* nccl_call,
                                              const Enqueue& enqueue) {
  auto collective = std::make_shared<IssuedCollective>(next_sequence_, signature, site);
  throw_if_aborted("rank " + std::to_string(rank_) + ": " + collective->describe());
  for (const Tensor& buffer : buffers) refuse_foreign_buffer(buffer, *collective);
  // Every rank takes a sequence number for the collective, as in the simulator, so that numbers in
  // a report match the simulator's and the trace's.
  ++next_sequence_;
  // NCCL matches nothing for an empty buffer: nothing is enqueued and the Work is done at once.
  if (signature.count == 0 && signature.op != CollectiveOp::barrier) {
    return std::make_shared<NcclWork>(*this, std::move(collective), std::vector<Tensor>{});
  }
  context_.make_current();
  prune_completed();
  // The collective reads what compute issued before it: the comm stream waits for that point.
  check_cuda(cudaEventRecord(inputs_ready_, context_.compute_stream()), "cudaEventRecord (inputs ready, compute)");
  check_cuda(cudaStreamWaitEvent(context_.comm_stream(), inputs_ready_, 0), "cudaStreamWaitEvent (comm after compute)");
  check_cuda(cudaEventCreateWithFlags(&collective->completion, cudaEventDisableTiming),
             "cudaEventCreateWithFlags (collective completion)");
  enqueue_under_lock(*collective, nccl_call, enqueue);
  // Marks the collective's end on the comm stream: Work::wait() makes compute wait for it, and
  // done() and synchronize() ask it whether the collective has finished.
  check_cuda(cudaEventRecord(collective->completion, context_.comm_stream()), "cudaEventRecord (completion, comm)");
  {
    const std::lock_guard lock(pending_mutex_);
    pending_.push_back(collective);
  }
  return std::make_shared<NcclWork>(*this, std::move(collective), std::move(buffers));
}

void NcclCommunicator::enqueue_under_lock(const IssuedCollective& collective, const char* nccl_call,
                                          const Enqueue& enqueue) {
  std::string problem;
  ncclResult_t result = ncclSuccess;
  {
    const std::lock_guard lock(nccl_mutex_);
    // Checked under the lock: an abort from another thread has either ended the communicator
    // before this point (and is seen here) or waits until this call returned.
    throw_if_aborted("rank " + std::to_string(rank_) + ": " + collective.describe());
    result = enqueue(comm_, context_.comm_stream());
    if (result != ncclSuccess) problem = nccl_problem_text(result, comm_);
  }
  if (result == ncclSuccess) return;
  const std::string message = "rank " + std::to_string(rank_) + ": " + collective.describe() + ": " + nccl_call +
                              " failed: " + problem;
  // This rank will not take part in the collective, so its peers would wait for it for ever: the
  // abort lets them fail too.
  abort_communicator(message);
  if (result == ncclRemoteError) throw LivenessError(message + "; a peer failed or left");
  throw BackendError(message);
}

std::shared_ptr<Work> NcclCommunicator::all_gather_async(const Tensor& send, Tensor& recv, const CallSite& site) {
  const CollectiveSignature signature = check_all_gather(send, recv, rank_, world_, site);
  return issue(signature, site, {send, recv}, "ncclAllGather", [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclAllGather(send.device_bytes(), recv.device_bytes(), static_cast<size_t>(signature.count),
                         nccl_type(signature.dtype), comm, stream);
  });
}

std::shared_ptr<Work> NcclCommunicator::reduce_scatter_async(const Tensor& send, Tensor& recv, ReduceOp op,
                                                             const CallSite& site) {
  const CollectiveSignature signature = check_reduce_scatter(send, recv, op, rank_, world_, site);
  // A plain sum (or max), as in the simulator: the engine scales by 1/W itself.
  return issue(signature, site, {send, recv}, "ncclReduceScatter", [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclReduceScatter(send.device_bytes(), recv.device_bytes(), static_cast<size_t>(signature.count),
                             nccl_type(signature.dtype), nccl_reduction(op), comm, stream);
  });
}

std::shared_ptr<Work> NcclCommunicator::all_reduce_async(Tensor& buffer, ReduceOp op, const CallSite& site) {
  const CollectiveSignature signature = check_all_reduce(buffer, op, rank_, site);
  return issue(signature, site, {buffer}, "ncclAllReduce", [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclAllReduce(buffer.device_bytes(), buffer.device_bytes(), static_cast<size_t>(signature.count),
                         nccl_type(signature.dtype), nccl_reduction(op), comm, stream);
  });
}

std::shared_ptr<Work> NcclCommunicator::broadcast_async(Tensor& buffer, int root, const CallSite& site) {
  const CollectiveSignature signature = check_broadcast(buffer, root, rank_, world_, site);
  return issue(signature, site, {buffer}, "ncclBroadcast", [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclBroadcast(buffer.device_bytes(), buffer.device_bytes(), static_cast<size_t>(signature.count),
                         nccl_type(signature.dtype), root, comm, stream);
  });
}

std::shared_ptr<Work> NcclCommunicator::barrier_async(const CallSite& site) {
  std::shared_ptr<Work> work =
      issue(barrier_signature(), site, {}, "ncclAllReduce (barrier)", [&](ncclComm_t comm, cudaStream_t stream) {
        return ncclAllReduce(barrier_buffer_, barrier_buffer_, 1, ncclFloat32, ncclSum, comm, stream);
      });
  // A barrier is a rendezvous of the ranks' hosts: this host goes on once every rank reached it.
  synchronize();
  return work;
}

bool NcclCommunicator::prune_completed() {
  const std::lock_guard lock(pending_mutex_);
  while (!pending_.empty()) {
    const IssuedCollective& oldest = *pending_.front();
    if (!cuda_query_done(cudaEventQuery(oldest.completion), [&] { return "cudaEventQuery for " + oldest.describe(); })) {
      return false;
    }
    pending_.pop_front();
  }
  return true;
}

std::shared_ptr<const IssuedCollective> NcclCommunicator::oldest_pending(size_t* pending_count) {
  const std::lock_guard lock(pending_mutex_);
  *pending_count = pending_.size();
  return pending_.empty() ? nullptr : pending_.front();
}

std::string NcclCommunicator::asynchronous_nccl_problem() {
  // Under the lock, with the abort flag read there: ncclCommAbort frees the communicator, and
  // abort_communicator takes this lock before it calls it.
  const std::lock_guard lock(nccl_mutex_);
  if (aborted_.load(std::memory_order_acquire)) return "";
  ncclResult_t async_error = ncclSuccess;
  const ncclResult_t queried = ncclCommGetAsyncError(comm_, &async_error);
  if (queried != ncclSuccess) async_error = queried;
  if (async_error == ncclSuccess || async_error == ncclInProgress) return "";
  return nccl_problem_text(async_error, comm_);
}

void NcclCommunicator::check_liveness(const char* waiting_for) {
  prune_completed();
  size_t pending_count = 0;
  const std::shared_ptr<const IssuedCollective> oldest = oldest_pending(&pending_count);
  // Aborted, by this thread or another (the launcher's FailureLatch, when another rank of this
  // process failed): the streams may never reach their events, so the wait ends here.
  if (aborted_.load(std::memory_order_acquire)) {
    std::string wait = "rank " + std::to_string(rank_) + ": " + waiting_for;
    if (oldest != nullptr) wait += " with " + oldest->describe() + " pending";
    throw_if_aborted(wait);
  }
  const std::string nccl_problem = asynchronous_nccl_problem();
  if (!nccl_problem.empty()) {
    fail_liveness(oldest != nullptr
                      ? oldest->describe() + " was pending when NCCL reported an asynchronous error: " + nccl_problem
                      : "NCCL reported an asynchronous error with no collective pending: " + nccl_problem,
                  pending_count);
  }
  if (oldest == nullptr) return;
  const auto pending_for = std::chrono::steady_clock::now() - oldest->issued_at;
  if (pending_for > std::chrono::duration<double>(timeout_seconds_)) {
    fail_liveness(oldest->describe() + " did not complete within " + seconds_text(timeout_seconds_) +
                      " s: a peer process failed, hangs, or issued a different collective",
                  pending_count);
  }
}

void NcclCommunicator::fail_liveness(const std::string& what, size_t pending_count) {
  // The MPI backend's shape: "rank 1: collective #12 (all_gather bf16 count=96) at ... did not
  // complete within 600 s: ...", with what this backend adds in parentheses.
  const std::string message = "rank " + std::to_string(rank_) + ": " + what + " (" + std::to_string(pending_count) +
                              " collective(s) pending; the NCCL communicator was aborted)";
  // The abort lets the peers' collectives fail too, and ends this rank's own pending ones; the
  // throw does not wait for them, since an aborted stream may never reach its events.
  abort_communicator(message);
  throw LivenessError(message);
}

void NcclCommunicator::synchronize() {
  throw_if_aborted("rank " + std::to_string(rank_) + ": synchronize");
  poll_until_ready([this] { return prune_completed(); }, [this] { check_liveness("synchronize"); });
}

void NcclCommunicator::abort(const std::string& reason) { abort_communicator(reason); }

void NcclCommunicator::abort_communicator(const std::string& reason) {
  {
    const std::lock_guard lock(abort_reason_mutex_);
    if (aborted_.load(std::memory_order_acquire)) return;
    abort_reason_ = reason;
    aborted_.store(true, std::memory_order_release);
  }
  std::fflush(stdout);
  std::fprintf(stderr, "zero3: rank %d aborts its NCCL communicator: %s\n", rank_, reason.c_str());
  std::fflush(stderr);
  // Waits for a call in progress on the rank's own thread, but not for ever: a collective that
  // connects lazily to a peer that is gone blocks inside NCCL, and ncclCommAbort is what ends such
  // a wait (NCCL polls its abort flag there).
  std::unique_lock lock(nccl_mutex_, std::defer_lock);
  static_cast<void>(lock.try_lock_for(std::chrono::seconds(5)));
  const ncclResult_t result = ncclCommAbort(comm_);
  if (result != ncclSuccess) {
    std::fprintf(stderr, "zero3: rank %d: ncclCommAbort failed: %s\n", rank_, ncclGetErrorString(result));
  }
}

std::vector<ncclComm_t> nccl_init_all(int device_count) {
  if (device_count < 1) {
    throw BackendError("ncclCommInitAll needs at least one device, got " + std::to_string(device_count));
  }
  std::vector<int> devices;
  for (int device = 0; device < device_count; ++device) devices.push_back(device);
  std::vector<ncclComm_t> comms(static_cast<size_t>(device_count), nullptr);
  check_nccl(ncclCommInitAll(comms.data(), device_count, devices.data()),
             "ncclCommInitAll over " + std::to_string(device_count) + " device(s)");
  return comms;
}

ncclComm_t nccl_init_rank(int world, const ncclUniqueId& id, int rank) {
  ncclComm_t comm = nullptr;
  check_nccl(ncclCommInitRank(&comm, world, id, rank),
             "ncclCommInitRank (rank " + std::to_string(rank) + " of " + std::to_string(world) + ")");
  return comm;
}

}  // namespace zero3
