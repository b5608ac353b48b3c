// The Communicator seam: collectives among the ranks of one world. The engine is written against
// this file only. Implementations:
//   SimCommunicator        sim/sim_communicator.h                 simulated ranks, fibers
//   MpiCommunicator        backend_cuda/mpi/mpi_communicator.h    a CPU process per rank, MPI
//   NcclCommunicator       backend_cuda/cuda/nccl_communicator.h  a GPU per rank, NCCL
//   SymmetricCommunicator  traces/replay/symmetric_communicator.h        shape replay, one rank for all
// ObservedCommunicator (sim/observed_communicator.h) wraps any of them to count its buffers;
// TimedCommunicator (core/sharding/timed_communicator.h) to time how long the rank waits on them.
//
// Buffer layout follows NCCL exactly:
//   all_gather:     send[count] from every rank; recv[count * world], rank i's block at i * count.
//   reduce_scatter: send[count * world] on every rank; rank i receives the reduction of block i.
//   all_reduce:     send and recv [count]; broadcast: `root`'s buffer copied into every rank's.
// Every implementation runs the same argument check first (check_all_gather() and friends below),
// so a call one backend refuses is refused by all, with the same words.
//
// Reduction order. The simulator (and MPI) sum in rank order (rank 0 + rank 1 + ...), so results
// are deterministic and ZeRO-3 is bitwise equal to DDP there. NCCL's ring and tree orders are
// unspecified and change with the topology: on NCCL, bitwise equality with DDP is not promised;
// the GPU checks compare against the reference with a tolerance instead.
//
// Zero-count collectives are legal. The simulator matches them across ranks like any other (a
// rank that skips one is a mismatch there); NCCL treats them as no-ops and matches nothing.
//
// On a device (cuda, and the simulator's opaque stand-in) buffers are device memory and the
// contract is NCCL's stream contract:
//   - *_async enqueues the collective behind the compute already issued (its inputs are final
//     when issued) and returns at once;
//   - Work::wait() orders the compute stream after the collective (an event): kernels issued after
//     it see the result. The host does not wait for the data. In the simulator, whose kernels run
//     on the host, wait() is also where this rank's fiber yields until the collective completes.
//   - a collective's output is not readable before wait(), by kernels or anyone else;
//   - synchronize() blocks the host until every collective this rank issued has completed: call
//     it before the host reads collective outputs by any path other than Kernels::copy_to_host
//     (which waits for the stream itself);
//   - abort(reason) gives up on the world (ncclCommAbort): every pending and later collective of
//     every rank fails with PeerFailureError naming this rank instead of hanging. A rank whose
//     program fails calls it so that its peers stop too.
//
// Process groups. split(color, key, site) is a collective over the parent communicator: every rank
// of the parent calls it, in the same place of its program (the simulator matches it like any
// other collective). Ranks that pass the same color form one group; within it they are ordered by
// (key, parent rank), and that order is the group's rank order: rank() of the returned
// communicator is this rank's place in it and world() the group's size. Colors and keys are in
// [0, 2^24) (the simulator exchanges them as exact f32 values; MPI's MPI_UNDEFINED, a negative
// color meaning "no group", is not offered). A group communicator is a Communicator like any
// other:
//   - its collectives are matched per group: the k-th collective of a group is matched among the
//     group's ranks only, so disjoint groups may run different collectives at the same time;
//   - buffer layout and reductions are the group's: all-gather puts group rank i's block at
//     i * count, and the simulator and MPI sum in group-rank order (group rank 0 + group rank 1
//     + ...), so a group reduction is as deterministic as a world one (NCCL's order stays
//     unspecified);
//   - the shared argument check sees the group's rank and world (a root is a group rank);
//   - group_name() names it in errors, "group <color> (ranks 0,2)" with the ranks of the
//     outermost (world) communicator in group-rank order, so that a mismatch inside a group says
//     which ranks diverged (NCCL, which cannot list the members cheaply, names the group's size
//     and this rank's world rank instead).
// The symmetric replay offers only split_block() and split_across_blocks() (below), whose groups it
// knows from the sizes; its split() throws InputError.
//
// Hierarchical sharding's reduction tree (HSDP, mics_shard_size G): a gradient is reduce-scattered
// inside each block of G ranks, summed in block-rank order, then all-reduced across the W/G blocks
// in block order: sum over b of (sum over q of rank b*G+q), each sum rounded to f32 as it goes.
// That is another order of float additions than the flat rank order (they agree for G = 1 and
// G = W), so HSDP's oracle is DDP reduced over the same tree, and flat DDP only within tolerance.
// The parent stays usable; a group communicator must not outlive its parent's backend (the
// simulated world, the MPI session, the NCCL communicator it was split from).
//
//   std::unique_ptr<Communicator> shard_group = comm.split(comm.rank() / 2, comm.rank(), site);
//   shard_group->all_reduce(buffer, ReduceOp::sum, site);   // over the two ranks of this group
//
// Every call carries a CallSite saying who asked (module, parameters, step, phase); a collective
// mismatch or deadlock report prints each rank's CallSite, so the user sees which module diverged.
//
//   auto work = comm.all_gather_async(shard, gathered, {.module = "h.0.attn", .step = 3});
//   ...                      // overlap compute
//   work->wait();            // gathered is readable only after this
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor/tensor.h"

namespace zero3 {

enum class CollectiveOp : uint8_t { all_gather, reduce_scatter, all_reduce, broadcast, barrier };
enum class ReduceOp : uint8_t { sum, max };

const char* collective_op_name(CollectiveOp op);
const char* reduce_op_name(ReduceOp op);

struct CallSite {
  std::string module{};               // dotted module name, "" when not inside a module
  std::vector<std::string> params{};  // parameter names the collective moves
  int64_t step = -1;
  std::string phase{};                // "forward", "backward", "step", "checkpoint", ...
  // What the collective is for where the phase alone does not say: "gather", "recompute gather",
  // "secondary-shard gather", "block gather", "gradient reduce-scatter", "across-block all-reduce".
  // The fault campaign tables outcomes by it (collective_site_class); "" elsewhere.
  std::string purpose{};
};
// The site's class for fault plans and tables: its purpose, else its phase.
inline const std::string& collective_site_class(const CallSite& site) {
  return site.purpose.empty() ? site.phase : site.purpose;
}
std::string describe(const CallSite& site);

// The signature that must agree across ranks for one collective (by sequence number).
struct CollectiveSignature {
  CollectiveOp op = CollectiveOp::barrier;
  DType dtype = DType::f32;
  int64_t count = 0;   // elements per rank block (NCCL's count)
  int root = -1;       // broadcast only
  ReduceOp reduce = ReduceOp::sum;
  bool operator==(const CollectiveSignature&) const = default;
};
std::string describe(const CollectiveSignature& signature);
// Bytes of the whole buffer a collective moves: count * world elements for all-gather and
// reduce-scatter, count for all-reduce and broadcast, none for a barrier.
int64_t collective_buffer_bytes(const CollectiveSignature& signature, int world);

// The shared argument check. Each returns the signature the ranks must agree on, or throws
// ShapeError naming the op, the rank, the call site and what was expected: buffers defined; send
// and recv of one dtype and one device; recv = send * world elements for all-gather and send =
// recv * world for reduce-scatter; a root inside the world.
CollectiveSignature check_all_gather(const Tensor& send, const Tensor& recv, int rank, int world,
                                     const CallSite& site);
CollectiveSignature check_reduce_scatter(const Tensor& send, const Tensor& recv, ReduceOp op, int rank, int world,
                                         const CallSite& site);
CollectiveSignature check_all_reduce(const Tensor& buffer, ReduceOp op, int rank, const CallSite& site);
CollectiveSignature check_broadcast(const Tensor& buffer, int root, int rank, int world, const CallSite& site);
CollectiveSignature barrier_signature();
// split()'s argument check: color and key in [0, 2^24), else InputError naming the rank, the call
// site and the value.
void check_split(int color, int key, int rank, const CallSite& site);
// The ranks of a split that join `color`'s group, as parent ranks in group-rank order: by (key,
// parent rank). `colors` and `keys` hold every parent rank's arguments, by parent rank.
std::vector<int> split_members(const std::vector<int>& colors, const std::vector<int>& keys, int color);
// "group 1 (ranks 1,3)": the name of a group, its ranks being world ranks (ascending or not).
std::string split_group_name(int color, const std::vector<int>& world_ranks);

// Handle of an asynchronous collective. The output buffer must not be read before wait().
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  virtual bool done() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  // "world" for a communicator over every rank, split_group_name() for a group (see above).
  virtual std::string group_name() const { return "world"; }
  // A communicator over this rank's group (see "Process groups" above): a collective over this
  // communicator, which every one of its ranks calls.
  virtual std::unique_ptr<Communicator> split(int color, int key, const CallSite& site) = 0;
  // Hierarchical sharding's two groups over blocks of `block_size` consecutive ranks (a node, when
  // the block is its GPUs), both ordered by rank: the block holding this rank (color rank / size)
  // and the ranks at this rank's place in every block (color rank % size), one from each block.
  // split() underneath; the symmetric replay, whose one representative cannot see the other ranks'
  // colors, answers them from the sizes alone. Both are collectives over this communicator.
  virtual std::unique_ptr<Communicator> split_block(int block_size, const CallSite& site);
  virtual std::unique_ptr<Communicator> split_across_blocks(int block_size, const CallSite& site);

  // recv.numel() must be send.numel() * world().
  virtual std::shared_ptr<Work> all_gather_async(const Tensor& send, Tensor& recv, const CallSite& site) = 0;
  // send.numel() must be recv.numel() * world().
  virtual std::shared_ptr<Work> reduce_scatter_async(const Tensor& send, Tensor& recv, ReduceOp op,
                                                     const CallSite& site) = 0;
  // In place: buffer holds this rank's input and, after wait(), the reduction.
  virtual std::shared_ptr<Work> all_reduce_async(Tensor& buffer, ReduceOp op, const CallSite& site) = 0;
  virtual std::shared_ptr<Work> broadcast_async(Tensor& buffer, int root, const CallSite& site) = 0;
  virtual std::shared_ptr<Work> barrier_async(const CallSite& site) = 0;

  // The host waits for every collective this rank issued (see the device contract above).
  virtual void synchronize() = 0;
  // Gives up on the world: pending and later collectives fail with PeerFailureError on every rank.
  virtual void abort(const std::string& reason) = 0;

  // Blocking forms: the asynchronous call, then wait(). Optional to override: an implementation
  // may skip work that only a caller running between issue and wait could observe (the simulator
  // poisons the outputs of asynchronous calls only).
  virtual void all_gather(const Tensor& send, Tensor& recv, const CallSite& site) {
    all_gather_async(send, recv, site)->wait();
  }
  virtual void reduce_scatter(const Tensor& send, Tensor& recv, ReduceOp op, const CallSite& site) {
    reduce_scatter_async(send, recv, op, site)->wait();
  }
  virtual void all_reduce(Tensor& buffer, ReduceOp op, const CallSite& site) {
    all_reduce_async(buffer, op, site)->wait();
  }
  virtual void broadcast(Tensor& buffer, int root, const CallSite& site) { broadcast_async(buffer, root, site)->wait(); }
  virtual void barrier(const CallSite& site) { barrier_async(site)->wait(); }
};

// HSDP's two groups over blocks of `block_size` consecutive ranks: split_block, then
// split_across_blocks (collectives over `comm`). Both null where the block is the whole world: flat
// sharding, nothing split.
struct BlockGroups {
  std::unique_ptr<Communicator> block;   // this rank's block
  std::unique_ptr<Communicator> across;  // one rank of every block, at this rank's place
};
BlockGroups split_into_blocks(Communicator& comm, int block_size, const CallSite& site);

}  // namespace zero3
