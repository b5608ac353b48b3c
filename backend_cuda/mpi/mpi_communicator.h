// The Communicator over one MPI communicator (mpi_world.h says what it promises). Internal to the
// MPI backend: it includes <mpi.h>, so only the backend's own files include it.
#pragma once
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <mpi.h>

#include "backend_cuda/mpi/mpi_world.h"
#include "core/sharding/communicator.h"

namespace zero3 {

class MpiWork;

class MpiCommunicator final : public Communicator {
 public:
  // Duplicates `parent` twice: one communicator for every collective as issued, one for the
  // second phase of all-reduces, which starts later (at completion) and so has an order of its own.
  // `group_name` and `world_ranks` (the world rank of each rank of `parent`, empty: rank i is
  // world rank i) are what a split passes down, for group_name() and nested splits.
  MpiCommunicator(MPI_Comm parent, const MpiOptions& options, std::string group_name = "world",
                  std::vector<int> world_ranks = {});
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int world() const override { return world_; }
  std::string group_name() const override { return group_name_; }
  // MPI_Comm_split of this communicator, blocking: it has no timeout, so a rank that never calls
  // it hangs the others (as MPI would) instead of failing with a LivenessError. Collectives issued
  // before it stay pending and complete as usual; the group gets duplicates of its own.
  std::unique_ptr<Communicator> split(int color, int key, const CallSite& site) override;

  std::shared_ptr<Work> all_gather_async(const Tensor& send, Tensor& recv, const CallSite& site) override;
  std::shared_ptr<Work> reduce_scatter_async(const Tensor& send, Tensor& recv, ReduceOp op,
                                             const CallSite& site) override;
  std::shared_ptr<Work> all_reduce_async(Tensor& buffer, ReduceOp op, const CallSite& site) override;
  std::shared_ptr<Work> broadcast_async(Tensor& buffer, int root, const CallSite& site) override;
  std::shared_ptr<Work> barrier_async(const CallSite& site) override;
  void synchronize() override;
  // Says why on stderr and ends the job (MPI_Abort with the liveness exit code).
  [[noreturn]] void abort(const std::string& reason) override;

  // Completes, in issue order, every collective up to and including `work`. Past the timeout, a
  // LivenessError naming the collective, this group and, from the arrival board, each peer that
  // never arrived at it or whose process is stopped or gone.
  void complete_through(const MpiWork* work);
  // The same without blocking: advances what has arrived, in issue order; true when `work` is done.
  bool poll_through(const MpiWork* work);

 private:
  std::shared_ptr<Work> enqueue(std::shared_ptr<MpiWork> work);
  // A datatype of `bytes` contiguous bytes, built from chunks of at most max_message_bytes.
  MPI_Datatype block_type(int64_t bytes) const;
  // The arrival board (backend_cuda/mpi/README.md): one slot per rank of this communicator in
  // memory shared by the node's processes, each written only by its own rank: how many collectives
  // it has issued here, and its pid. A stopped process answers nothing, but its slot stays readable.
  struct BoardSlot;
  void open_arrival_board();
  // What the board says about the peers of `work`, for the timeout's message.
  std::string peers_at(const MpiWork& work) const;
  // "rank 1 (world rank 3)".
  std::string name_rank(int rank) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm second_phase_comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int world_ = 1;
  MpiOptions options_;
  std::string group_name_;
  std::vector<int> world_ranks_;  // by rank of this communicator
  int64_t next_sequence_ = 0;
  MPI_Comm node_comm_ = MPI_COMM_NULL;  // the ranks of comm_ that share this rank's node
  int node_ranks_ = 0;                  // how many they are; the board needs all world_ of them
  MPI_Win board_window_ = MPI_WIN_NULL;
  BoardSlot* board_ = nullptr;  // world_ slots; null when the ranks span several nodes
  std::deque<std::shared_ptr<MpiWork>> pending_;  // issued, not yet completed, in issue order
};

// Throws BackendError naming `what` when an MPI call did not return MPI_SUCCESS.
void check_mpi(int code, const std::string& what);

}  // namespace zero3
