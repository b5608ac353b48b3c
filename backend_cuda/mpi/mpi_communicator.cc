// Nonblocking MPI collectives behind the Communicator seam (mpi_communicator.h, mpi_world.h).
#include "backend_cuda/mpi/mpi_communicator.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "core/base/errors.h"
#include "core/sharding/rank_order_reduction.h"

namespace zero3 {

void check_mpi(int code, const std::string& what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw BackendError(what + ": " + std::string(text, static_cast<size_t>(length)));
}

// One collective in flight: its request, the staging it owns, and what runs when a phase ends
// (the rank-order reduction, the start of an all-reduce's second phase, the copy back).
class MpiWork final : public Work {
 public:
  MpiWork(MpiCommunicator& comm, int64_t sequence_number, CollectiveSignature checked, CallSite call_site)
      : sequence(sequence_number), signature(checked), site(std::move(call_site)), comm_(comm) {}
  void wait() override { comm_.complete_through(this); }
  bool done() override { return comm_.poll_through(this); }

  // Tests the request without blocking; runs the phase's continuation when it finished. True once
  // the last phase is done.
  bool advance() {
    if (completed) return true;
    int finished = 0;
    check_mpi(MPI_Test(&request, &finished, MPI_STATUS_IGNORE), describe_call() + ": MPI_Test");
    if (!finished) return false;
    std::function<void()> continuation = std::move(after_phase);
    after_phase = nullptr;
    if (continuation) continuation();  // may start another phase: a new request and continuation
    completed = request == MPI_REQUEST_NULL && !after_phase;
    return completed;
  }

  std::string describe_call() const {
    return "collective #" + std::to_string(sequence) + " (" + zero3::describe(signature) + ") at " +
           zero3::describe(site);
  }

  const int64_t sequence;
  const CollectiveSignature signature;
  const CallSite site;
  MPI_Request request = MPI_REQUEST_NULL;
  std::function<void()> after_phase;
  std::vector<std::byte> staging;   // what MPI receives into before the reduction
  std::vector<std::byte> segment;   // all-reduce: the input padded to W segments, then this rank's sum
  Tensor keep_send, keep_recv;      // the caller's buffers stay alive until completion
  bool completed = false;

 private:
  MpiCommunicator& comm_;
};

namespace {

MPI_Comm duplicate(MPI_Comm parent) {
  MPI_Comm copy = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(parent, &copy), "MPI_Comm_dup");
  // Errors come back as codes (and then exceptions) instead of ending the process silently.
  check_mpi(MPI_Comm_set_errhandler(copy, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  return copy;
}

void* bytes_of(Tensor& tensor) { return tensor.device_bytes(); }
void* bytes_of(const Tensor& tensor) { return const_cast<void*>(tensor.device_bytes()); }  // MPI's send is const in spirit

void refuse_meta(const Tensor& tensor, int rank, const CallSite& site) {
  if (tensor.is_meta()) {
    throw BackendError("rank " + std::to_string(rank) + ": --backend mpi moves real data, and the collective at " +
                       describe(site) + " has a meta tensor (meta runs are the simulator's and trace replay's)");
  }
}

// The element bytes of rank r's block i.
std::vector<const void*> blocks_of(const std::vector<std::byte>& staging, int world, int64_t block_bytes) {
  std::vector<const void*> blocks;
  for (int rank = 0; rank < world; ++rank) blocks.push_back(staging.data() + rank * block_bytes);
  return blocks;
}

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm parent, const MpiOptions& options, std::string group_name,
                                 std::vector<int> world_ranks)
    : options_(options), group_name_(std::move(group_name)), world_ranks_(std::move(world_ranks)) {
  if (options_.max_message_bytes < 1) throw InputError("MPI max_message_bytes must be at least 1");
  comm_ = duplicate(parent);
  second_phase_comm_ = duplicate(parent);
  check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm_, &world_), "MPI_Comm_size");
  if (world_ranks_.empty()) {
    for (int rank = 0; rank < world_; ++rank) world_ranks_.push_back(rank);
  }
  if (static_cast<int>(world_ranks_.size()) != world_) {
    throw InputError("MPI communicator " + group_name_ + " of " + std::to_string(world_) + " ranks given " +
                     std::to_string(world_ranks_.size()) + " world ranks; expected one per rank");
  }
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key, const CallSite& site) {
  check_split(color, key, rank_, site);
  const std::string what = "rank " + std::to_string(rank_) + " of " + group_name_ + ": split at " + describe(site);
  // MPI_Comm_split orders the group by (key, parent rank), the seam's order.
  MPI_Comm group = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(comm_, color, key, &group), what + ": MPI_Comm_split");
  int group_world = 0;
  std::vector<int> group_world_ranks;
  try {
    check_mpi(MPI_Comm_size(group, &group_world), what + ": MPI_Comm_size");
    // The members' world ranks in group-rank order, for the group's name and nested splits.
    group_world_ranks.resize(static_cast<size_t>(group_world));
    int mine = world_ranks_[static_cast<size_t>(rank_)];
    check_mpi(MPI_Allgather(&mine, 1, MPI_INT, group_world_ranks.data(), 1, MPI_INT, group), what + ": MPI_Allgather");
    auto made = std::make_unique<MpiCommunicator>(group, options_, split_group_name(color, group_world_ranks),
                                                  group_world_ranks);
    MPI_Comm_free(&group);  // the group communicator keeps its own duplicates
    return made;
  } catch (...) {
    MPI_Comm_free(&group);
    throw;
  }
}

MpiCommunicator::~MpiCommunicator() {
  // With collectives still pending (a failed run) freeing the communicators is erroneous; the job is
  // being aborted then anyway.
  if (!pending_.empty()) return;
  MPI_Comm_free(&second_phase_comm_);
  MPI_Comm_free(&comm_);
}

MPI_Datatype MpiCommunicator::block_type(int64_t bytes) const {
  const int64_t chunk = options_.max_message_bytes;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  if (bytes <= chunk) {
    check_mpi(MPI_Type_contiguous(static_cast<int>(bytes), MPI_BYTE, &type), "MPI_Type_contiguous");
  } else {
    const int64_t chunks = bytes / chunk, rest = bytes % chunk;
    if (chunks > INT_MAX) throw BackendError("a block of " + std::to_string(bytes) + " bytes needs too many chunks");
    MPI_Datatype chunk_type = MPI_DATATYPE_NULL;
    check_mpi(MPI_Type_contiguous(static_cast<int>(chunk), MPI_BYTE, &chunk_type), "MPI_Type_contiguous");
    int lengths[2] = {static_cast<int>(chunks), static_cast<int>(rest)};
    MPI_Aint displacements[2] = {0, static_cast<MPI_Aint>(chunks * chunk)};
    MPI_Datatype types[2] = {chunk_type, MPI_BYTE};
    MPI_Datatype joined = MPI_DATATYPE_NULL;
    check_mpi(MPI_Type_create_struct(rest > 0 ? 2 : 1, lengths, displacements, types, &joined),
              "MPI_Type_create_struct");
    // Block i of a buffer starts at i * bytes: the extent is exactly the block, no alignment padding.
    check_mpi(MPI_Type_create_resized(joined, 0, static_cast<MPI_Aint>(bytes), &type), "MPI_Type_create_resized");
    MPI_Type_free(&joined);
    MPI_Type_free(&chunk_type);
  }
  check_mpi(MPI_Type_commit(&type), "MPI_Type_commit");
  return type;
}

std::shared_ptr<Work> MpiCommunicator::enqueue(std::shared_ptr<MpiWork> work) {
  pending_.push_back(work);
  return work;
}

std::shared_ptr<Work> MpiCommunicator::all_gather_async(const Tensor& send, Tensor& recv, const CallSite& site) {
  auto work = std::make_shared<MpiWork>(*this, next_sequence_++, check_all_gather(send, recv, rank_, world_, site), site);
  refuse_meta(send, rank_, site);
  const int64_t block_bytes = send.bytes();
  if (block_bytes > 0) {
    MPI_Datatype type = block_type(block_bytes);
    check_mpi(MPI_Iallgather(bytes_of(send), 1, type, bytes_of(recv), 1, type, comm_, &work->request),
              work->describe_call() + ": MPI_Iallgather");
    MPI_Type_free(&type);  // freed once the collective no longer needs it
  }
  work->keep_send = send;
  work->keep_recv = recv;
  return enqueue(work);
}

std::shared_ptr<Work> MpiCommunicator::reduce_scatter_async(const Tensor& send, Tensor& recv, ReduceOp op,
                                                            const CallSite& site) {
  auto work = std::make_shared<MpiWork>(*this, next_sequence_++,
                                        check_reduce_scatter(send, recv, op, rank_, world_, site), site);
  refuse_meta(send, rank_, site);
  const int64_t block_bytes = recv.bytes();
  if (block_bytes > 0) {
    // Every rank's block for this rank, side by side; then summed here in rank order.
    work->staging.resize(static_cast<size_t>(block_bytes * world_));
    MPI_Datatype type = block_type(block_bytes);
    check_mpi(MPI_Ialltoall(bytes_of(send), 1, type, work->staging.data(), 1, type, comm_, &work->request),
              work->describe_call() + ": MPI_Ialltoall");
    MPI_Type_free(&type);
    MpiWork* self = work.get();
    work->after_phase = [self, recv, world = world_, block_bytes]() mutable {
      reduce_in_rank_order(self->signature.reduce, self->signature.dtype, blocks_of(self->staging, world, block_bytes), 0,
                           recv.device_bytes(), self->signature.count);
      self->staging = {};
    };
  }
  work->keep_send = send;
  work->keep_recv = recv;
  return enqueue(work);
}

std::shared_ptr<Work> MpiCommunicator::all_reduce_async(Tensor& buffer, ReduceOp op, const CallSite& site) {
  auto work = std::make_shared<MpiWork>(*this, next_sequence_++, check_all_reduce(buffer, op, rank_, site), site);
  refuse_meta(buffer, rank_, site);
  const int64_t count = buffer.numel();
  if (count > 0) {
    const int64_t element_bytes = dtype_bytes(buffer.dtype());
    const int64_t segment_bytes = (count + world_ - 1) / world_ * element_bytes;
    // The input padded with zeros to W equal segments (a padding element is never copied back).
    work->segment.assign(static_cast<size_t>(segment_bytes * world_), std::byte{0});
    std::memcpy(work->segment.data(), buffer.device_bytes(), static_cast<size_t>(buffer.bytes()));
    work->staging.resize(work->segment.size());
    MPI_Datatype type = block_type(segment_bytes);
    check_mpi(MPI_Ialltoall(work->segment.data(), 1, type, work->staging.data(), 1, type, comm_, &work->request),
              work->describe_call() + ": MPI_Ialltoall");
    MPI_Type_free(&type);
    MpiWork* self = work.get();
    work->after_phase = [this, self, buffer, segment_bytes, element_bytes]() mutable {
      // Phase 1 done: this rank's segment reduced in rank order; phase 2 gathers every segment.
      reduce_in_rank_order(self->signature.reduce, self->signature.dtype,
                           blocks_of(self->staging, world_, segment_bytes), 0, self->segment.data(),
                           segment_bytes / element_bytes);
      MPI_Datatype segment_type = block_type(segment_bytes);
      check_mpi(MPI_Iallgather(self->segment.data(), 1, segment_type, self->staging.data(), 1, segment_type,
                               second_phase_comm_, &self->request),
                self->describe_call() + ": MPI_Iallgather (all-reduce, second phase)");
      MPI_Type_free(&segment_type);
      self->after_phase = [self, buffer]() mutable {
        std::memcpy(buffer.device_bytes(), self->staging.data(), static_cast<size_t>(buffer.bytes()));
        self->staging = {};
        self->segment = {};
      };
    };
  }
  work->keep_recv = buffer;
  return enqueue(work);
}

std::shared_ptr<Work> MpiCommunicator::broadcast_async(Tensor& buffer, int root, const CallSite& site) {
  auto work =
      std::make_shared<MpiWork>(*this, next_sequence_++, check_broadcast(buffer, root, rank_, world_, site), site);
  refuse_meta(buffer, rank_, site);
  if (buffer.bytes() > 0) {
    MPI_Datatype type = block_type(buffer.bytes());
    check_mpi(MPI_Ibcast(bytes_of(buffer), 1, type, root, comm_, &work->request),
              work->describe_call() + ": MPI_Ibcast");
    MPI_Type_free(&type);
  }
  work->keep_recv = buffer;
  return enqueue(work);
}

std::shared_ptr<Work> MpiCommunicator::barrier_async(const CallSite& site) {
  auto work = std::make_shared<MpiWork>(*this, next_sequence_++, barrier_signature(), site);
  check_mpi(MPI_Ibarrier(comm_, &work->request), work->describe_call() + ": MPI_Ibarrier");
  return enqueue(work);
}

void MpiCommunicator::complete_through(const MpiWork* work) {
  if (work->completed) return;
  const auto started = std::chrono::steady_clock::now();
  const auto limit = std::chrono::duration<double>(options_.timeout_seconds);
  int64_t polls = 0;
  while (!pending_.empty()) {
    MpiWork& front = *pending_.front();
    while (!front.advance()) {
      // Oversubscribed runs (4 processes on 2 cores) need the core back for the peers.
      std::this_thread::yield();
      if (++polls % 1024 == 0 && std::chrono::steady_clock::now() - started > limit) {
        throw LivenessError("rank " + std::to_string(rank_) + ": " + front.describe_call() + " did not complete within " +
                            std::to_string(options_.timeout_seconds) +
                            " s: a peer process failed, hangs, or issued a different collective");
      }
    }
    const bool reached = &front == work;
    pending_.pop_front();
    if (reached) return;
  }
}

bool MpiCommunicator::poll_through(const MpiWork* work) {
  while (!work->completed && !pending_.empty() && pending_.front()->advance()) pending_.pop_front();
  return work->completed;
}

void MpiCommunicator::synchronize() {
  if (!pending_.empty()) complete_through(pending_.back().get());
}

void MpiCommunicator::abort(const std::string& reason) {
  std::fflush(stdout);
  std::fprintf(stderr, "zero3: rank %d aborts the job: %s\n", rank_, reason.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, kExitLiveness);
  std::abort();  // MPI_Abort does not return
}

}  // namespace zero3
