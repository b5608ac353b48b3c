// Nonblocking MPI collectives behind the Communicator seam (mpi_communicator.h, mpi_world.h).
#include "backend_cuda/mpi/mpi_communicator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include <unistd.h>

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

// SIGCONTs this process received. The clock of a wait runs on while the process is stopped
// (SIGSTOP, job control), and the peers are not to blame for that time: a continued wait starts
// its timeout again. Otherwise a stopped rank, continued as the launcher ends the job, would report
// its own stop as its peers' timeout.
std::atomic<int64_t> continued_count{0};
static_assert(std::atomic<int64_t>::is_always_lock_free, "the SIGCONT handler needs a lock-free counter");

void on_continued(int) { continued_count.fetch_add(1, std::memory_order_relaxed); }

void count_continues() {
  static const bool installed = [] {
    struct sigaction action {};
    action.sa_handler = on_continued;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    return sigaction(SIGCONT, &action, nullptr) == 0;
  }();
  if (!installed) throw BackendError("sigaction(SIGCONT) failed: a stopped and continued rank could not tell");
}

// How a peer's process is doing, from /proc/PID/stat (the board's ranks share this node, so its
// pid is this process's view of it), and whether it can still take its part in a collective.
struct ProcessState {
  std::string text;  // "is stopped (state T: SIGSTOP or job control)"
  bool progressing;  // running, sleeping or blocked in the kernel: it can still arrive and take its part
};

ProcessState process_state(int64_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (pid <= 0 || !std::getline(stat, line)) {
    return {"is gone: no process " + std::to_string(pid) + " here (it exited or was killed, or runs in another PID "
            "namespace)", false};
  }
  // The state follows the command name, which is in parentheses and may itself hold any character.
  const size_t close = line.rfind(')');
  const char state = close != std::string::npos && close + 2 < line.size() ? line[close + 2] : '?';
  switch (state) {
    case 'R': return {"runs (state R)", true};
    case 'S': return {"runs (state S, sleeping)", true};
    case 'D': return {"runs (state D: blocked in the kernel, e.g. on I/O)", true};
    case 'T': return {"is stopped (state T: SIGSTOP or job control)", false};
    case 't': return {"is stopped by a debugger (state t)", false};
    case 'Z': return {"has exited (state Z: a zombie not yet reaped)", false};
    default: return {"is in state " + std::string(1, state) + " (/proc/" + std::to_string(pid) + "/stat)", false};
  }
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string text;
  for (int rank : ranks) text += (text.empty() ? "" : ",") + std::to_string(rank);
  return text;
}

// The pid of every world rank on this node, by world rank, from the world communicator's board:
// a group's timeout names a stopped or dead process outside the group too, since a peer in the
// group may only be waiting on it.
std::vector<int64_t>& job_pids() {
  static std::vector<int64_t> pids;
  return pids;
}

std::string seconds_text(double seconds) {
  std::ostringstream text;
  text << seconds;
  return text.str();
}

}  // namespace

// A cache line's 64 bytes each, so that no rank's store slows another's; padded, not alignas(64):
// MPI_Win_allocate_shared promises only 8-byte alignment of the segment (UBSan caught alignas).
struct MpiCommunicator::BoardSlot {
  int64_t issued;  // collectives this rank has issued on the communicator (the next sequence number)
  int64_t pid;
  int64_t padding[6];
};

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
  count_continues();
  open_arrival_board();
}

// Collective over comm_, as the constructor is: every rank of the communicator calls it together.
void MpiCommunicator::open_arrival_board() {
  static_assert(sizeof(BoardSlot) == 64 && alignof(BoardSlot) == alignof(int64_t), "a padded cache line per rank");
  const std::string what = "rank " + std::to_string(rank_) + " of " + group_name_ + ": the arrival board";
  // Keyed by rank: when every rank shares this node, the node communicator's ranks are comm_'s.
  check_mpi(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_comm_),
            what + ": MPI_Comm_split_type");
  check_mpi(MPI_Comm_size(node_comm_, &node_ranks_), what + ": MPI_Comm_size");
  if (node_ranks_ != world_) return;  // a timeout then says that the peers could not be inspected
  // Rank 0 holds every slot; the others map its segment.
  const MPI_Aint bytes = rank_ == 0 ? static_cast<MPI_Aint>(world_) * static_cast<MPI_Aint>(sizeof(BoardSlot)) : 0;
  void* mine = nullptr;
  check_mpi(MPI_Win_allocate_shared(bytes, sizeof(BoardSlot), MPI_INFO_NULL, node_comm_, &mine, &board_window_),
            what + ": MPI_Win_allocate_shared");
  MPI_Aint size = 0;
  int unit = 0;
  void* base = nullptr;
  check_mpi(MPI_Win_shared_query(board_window_, 0, &size, &unit, &base), what + ": MPI_Win_shared_query");
  if (size < static_cast<MPI_Aint>(world_ * sizeof(BoardSlot))) {
    throw BackendError(what + ": MPI_Win_shared_query gave rank 0's segment as " + std::to_string(size) +
                       " bytes; expected " + std::to_string(world_ * sizeof(BoardSlot)) + ", a slot per rank");
  }
  if (reinterpret_cast<uintptr_t>(base) % alignof(int64_t) != 0) {
    throw BackendError(what + ": MPI_Win_shared_query mapped rank 0's segment at an address not 8-byte aligned; "
                       "the slots' atomic loads and stores need 8");
  }
  board_ = static_cast<BoardSlot*>(base);
  // Plain atomics on memory every process maps (x86 and ARM keep it coherent): no MPI RMA epoch is
  // needed, and the reader, a timed-out rank, may find the writer stopped at any instruction.
  std::atomic_ref(board_[rank_].issued).store(0, std::memory_order_release);
  std::atomic_ref(board_[rank_].pid).store(static_cast<int64_t>(::getpid()), std::memory_order_release);
  check_mpi(MPI_Barrier(node_comm_), what + ": MPI_Barrier");  // every slot written before any is read
  if (group_name_ == "world" && job_pids().empty()) {
    for (int rank = 0; rank < world_; ++rank) {
      job_pids().push_back(std::atomic_ref(board_[rank].pid).load(std::memory_order_acquire));
    }
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
  // With collectives still pending (a failed run) freeing the communicators is erroneous, and
  // MPI_Win_free waits for every rank of the node: during an exception's unwinding this rank may be
  // the only one here. The job is being aborted then anyway (MPI_Abort frees everything).
  if (!pending_.empty() || std::uncaught_exceptions() > 0) return;
  if (board_window_ != MPI_WIN_NULL) MPI_Win_free(&board_window_);
  MPI_Comm_free(&node_comm_);
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
  // Arrived: the collective is issued (its MPI request started), whatever happens to this process next.
  if (board_) std::atomic_ref(board_[rank_].issued).store(work->sequence + 1, std::memory_order_release);
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
  auto started = std::chrono::steady_clock::now();
  int64_t continues = continued_count.load(std::memory_order_relaxed);
  const auto limit = std::chrono::duration<double>(options_.timeout_seconds);
  int64_t polls = 0;
  while (!pending_.empty()) {
    MpiWork& front = *pending_.front();
    while (!front.advance()) {
      // Oversubscribed runs (4 processes on 2 cores) need the core back for the peers.
      std::this_thread::yield();
      if (++polls % 1024 != 0) continue;
      const auto now = std::chrono::steady_clock::now();
      if (continued_count.load(std::memory_order_relaxed) != continues) {
        // This process was stopped during the wait: the peers get the whole timeout from now.
        started = now;
        continues = continued_count.load(std::memory_order_relaxed);
      } else if (now - started > limit) {
        throw LivenessError("rank " + std::to_string(rank_) + " of " + group_name_ + ": " + front.describe_call() +
                            " did not complete within " + seconds_text(options_.timeout_seconds) + " s" +
                            peers_at(front));
      }
    }
    const bool reached = &front == work;
    pending_.pop_front();
    if (reached) return;
  }
}

std::string MpiCommunicator::name_rank(int rank) const {
  const int world_rank = world_ranks_[static_cast<size_t>(rank)];
  return "rank " + std::to_string(rank) + " (world rank " + std::to_string(world_rank) + ")";
}

std::string MpiCommunicator::peers_at(const MpiWork& work) const {
  const std::string number = "#" + std::to_string(work.sequence);
  if (!board_) {
    return "; the peers could not be inspected: " + std::to_string(node_ranks_) + " of the " + std::to_string(world_) +
           " ranks of " + group_name_ + " share this rank's node, and the arrival board (backend_cuda/mpi/README.md) "
           "reads peers in one node's shared memory: a peer process failed, hangs, or issued a different collective";
  }
  std::string named;
  std::vector<int> running;  // arrived, and their processes run
  for (int rank = 0; rank < world_; ++rank) {
    const int64_t issued = std::atomic_ref(board_[rank].issued).load(std::memory_order_acquire);
    const int64_t pid = std::atomic_ref(board_[rank].pid).load(std::memory_order_acquire);
    const ProcessState process = rank == rank_ ? ProcessState{"runs", true} : process_state(pid);
    const std::string who = name_rank(rank), its_process = "its process (pid " + std::to_string(pid) + ") ";
    if (issued <= work.sequence) {
      named += "; " + who + " never arrived at " + number + " (it issued " + std::to_string(issued) +
               (issued == 1 ? " collective in " : " collectives in ") + group_name_ +
               (issued > 0 ? ", the last #" + std::to_string(issued - 1) : "") +
               "), and " + its_process + process.text;
    } else if (!process.progressing) {
      named += "; " + who + " issued " + number + ", but " + its_process + process.text +
               ", so it cannot take its part";
    } else {
      running.push_back(rank);
    }
  }
  // Outside this group: a stopped or dead process the group's ranks may be waiting on.
  for (size_t world_rank = 0; world_rank < job_pids().size(); ++world_rank) {
    if (std::find(world_ranks_.begin(), world_ranks_.end(), static_cast<int>(world_rank)) != world_ranks_.end()) continue;
    const ProcessState process = process_state(job_pids()[world_rank]);
    if (process.progressing) continue;
    named += "; outside " + group_name_ + ", world rank " + std::to_string(world_rank) + ": its process (pid " +
             std::to_string(job_pids()[world_rank]) + ") " + process.text;
  }
  if (named.empty()) {
    return "; every rank of " + group_name_ + " issued " + number +
           " and every process runs: they may have issued different collectives at " + number +
           ", or one is stuck inside MPI";
  }
  if (running.empty()) return named;
  return named + (running.size() == 1 ? "; rank " + rank_list(running) + " issued it and runs"
                                      : "; ranks " + rank_list(running) + " issued it and run");
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
