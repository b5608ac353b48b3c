// CollectiveMatcher: the shared state behind every rank's SimCommunicator. It numbers each rank's
// collectives (the k-th call of every rank is collective #k), matches them once all ranks have
// issued #k, times them with the cost model, moves the data when the schedule completes them, and
// turns every way a real job would hang into a typed error on every rank:
//   - different signatures at #k           -> CollectiveMismatchError (every rank's call listed)
//   - every live rank waits, nothing can complete -> DeadlockError (or the mismatch among the
//     calls that did arrive), naming what each rank waits on and its last completed collectives
//   - a rank crashed or its program threw  -> PeerFailureError naming that rank on the others
// Once one of these happens the world is failed: every pending and later collective fails with it.
//
// Semantics beyond NCCL's: an output is poisoned (NaN) from issue to completion; inputs are read
// at completion (in-place inputs are copied at issue); a buffer still in flight in one collective
// may not be passed to another before a wait, because completions may be reordered. A blocking
// call's output is poisoned only if the world fails before the call completes: its rank runs
// nothing in between, and completion overwrites every element, so the rank sees what an eager
// poisoning would show while the simulator saves a pass over every output.
//
// The matcher's parties are the scheduler's tasks. A task is one rank, unless RankGroups lets it
// stand for several ranks that make the same calls (rank_groups.h): then #k is matched once every
// task has issued it, sized and timed at the full world, and reports still list every rank. A
// task standing for more than one rank may issue meta collectives only: the ranks it stands for
// have no data of their own to move.
//
// Groups (Communicator::split): collectives are matched per group. Group 0 is the world, every task
// a party; a split registers a group of its tasks in group-rank order, and the k-th collective of a
// group is matched among those tasks only, sized and timed at the group's size, its data moved in
// group-rank order, priced on the intra-node link when its ranks lie in one node
// (hardware_profile.h; the world's collectives keep the world's link). Reports of a group's
// collectives name the group and its ranks. Each task has one comm stream: a collective starts once
// the streams of all its parties are free, so disjoint groups overlap (issue order: see match()).
// Groups are offered only when every rank is a task of its own.
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/sharding/communicator.h"
#include "sim/hardware_profile.h"
#include "sim/in_flight_buffers.h"
#include "sim/rank_groups.h"

namespace zero3 {

class FaultInjector;
class FiberScheduler;
class Recorder;

// One rank's side of a collective. Which tensors are set depends on the op: all-gather and
// reduce-scatter read `input` and write `output`; all-reduce reads and writes the same buffer
// (both set); broadcast: the root only reads, the others only write; barrier: neither.
struct CollectiveCall {
  CollectiveSignature signature;
  // Never null. Shared by the in-flight registry, the event log and the deadlock report's last
  // completed collectives, so that a call's strings are copied once, when it is issued.
  std::shared_ptr<const CallSite> site;
  bool meta = false;  // shapes only: matched, timed and recorded, but no data moves
  bool blocking = false;  // from a blocking form: the rank runs nothing until it completes
  Tensor input;
  Tensor output;
};
std::string describe(const CollectiveCall& call);  // "all_gather f32 count=4 at module 'h.0' step 1"

struct CollectiveSlot {
  int group = 0;  // the communicator group it was issued on (0: the world)
  struct Arrival {
    bool arrived = false;
    CollectiveCall call;
    std::vector<char> input_copy;  // the input's bytes as issued, when it shares storage with the output
    bool input_copied = false;
    double issue_s = 0.0;
  };
  int64_t sequence = 0;
  std::vector<Arrival> arrivals;  // by task; released when the collective completes
  int arrived_count = 0;
  bool matched = false;
  bool completed = false;
  double start_s = 0.0;
  double end_s = 0.0;  // when the ranks see it complete
};

class CollectiveMatcher {
 public:
  CollectiveMatcher(const RankGroups& groups, FiberScheduler& scheduler, FaultInjector& faults, Recorder& recorder,
                    const HardwareProfile& hardware, double jitter_fraction);

  // From task `task`. Registers the call as collective #k of that task in `group` and returns its slot.
  std::shared_ptr<CollectiveSlot> issue(int task, int group, CollectiveCall call);
  // The id of the group `key` (the same on every rank that asks with the same key) over `tasks`,
  // in group-rank order; the first rank to ask registers it. `name` is what reports call it.
  int register_group(const std::string& key, const std::vector<int>& tasks, const std::string& name);
  const std::string& group_name(int group) const { return comm_group(group).name; }
  // What the group is for, as logged with its collectives: "block" or "across blocks" (hierarchical
  // sharding's, communicator.h), "group" for any other split. A static string.
  void set_group_kind(int group, const char* kind);
  // The group's tasks in group-rank order (the world's: every task).
  const std::vector<int>& group_tasks(int group) const { return comm_group(group).tasks; }
  // Whether a task stands for several ranks (then there are no groups).
  bool shares_tasks() const { return !groups_.every_rank_alone(); }
  // Blocks the task until the slot completes; throws the world's failure instead.
  void wait(int task, CollectiveSlot& slot);
  // True once completed; otherwise lets the other tasks make progress first and answers again.
  bool poll(int task, CollectiveSlot& slot);
  // Waits for every collective the task issued (its program returned).
  void drain(int task);
  void rank_exited(int task);
  // The task's program ended with an error: peers that need it get PeerFailureError.
  void rank_failed(int task, const std::string& reason);
  // Fault sites of a task's own progress ("compute", or the collective about to be issued): may
  // stall the task or crash it (throws RankCrashedError). No faults once the world has failed.
  void inject_rank_faults(int task, std::string_view site_class, const std::string& site);
  // Throws RankCrashedError if the task crashed (its program may have caught the first one).
  void throw_if_crashed(int task, const std::string& doing) const;
  // The scheduler found every live task blocked: fail the world with a deadlock or mismatch report.
  void on_stuck();

  const InFlightBuffers& in_flight(int task) const { return in_flight_[static_cast<size_t>(task)]; }
  bool failed() const { return failure_.has_value(); }

 private:
  enum class FailureKind : uint8_t { mismatch, deadlock, peer_failure };
  struct Failure {
    FailureKind kind;
    std::string report;
    int failed_rank = -1;
    bool ranks_at_different_modules = false;  // a mismatch whose calls came from different modules
  };
  // What a deadlock report says about a completed collective; formatted only when one is made.
  struct CompletedCollective {
    int group = 0;
    int64_t sequence = 0;
    CollectiveOp op = CollectiveOp::barrier;
    std::shared_ptr<const CallSite> site;
  };
  struct TaskState {
    const CollectiveSlot* blocked_on = nullptr;  // the collective the task waits in (held by open_)
    bool exited = false;
    bool failed = false;
    bool crashed = false;
    std::vector<CompletedCollective> last_completed;  // the two most recent, oldest first
  };
  // A group of tasks that match collectives among themselves.
  struct CommGroup {
    std::string key;
    std::string name;
    std::vector<int> tasks;              // in group-rank order
    std::vector<int64_t> next_sequence;  // by task; -1 for the tasks outside the group
    const char* kind = "group";
    // Whether its ranks lie in one node of hardware_.ranks_per_node: its link (hardware_profile.h).
    LinkLevel level = LinkLevel::inter_node;
  };
  const CommGroup& comm_group(int group) const;
  // Ranks a group's collective spans (for sizes and times): the world's ranks for group 0.
  int group_size(int group) const;
  // "" for the world, " in group 1 (ranks 0,2)" for a group: what messages add after "#k".
  std::string in_group(int group) const;
  std::string where(int group, const CollectiveCall& call, int64_t sequence) const;
  std::string describe_completed(const CompletedCollective& completed) const;
  std::string last_completed_text(int task) const;

  // The error checks of the hot path take the text of what the task was doing as a function, so
  // that it is formatted only when they throw.
  template <class DoingFn>
  void throw_if_unusable_doing(int task, DoingFn&& doing) const;
  template <class SiteFn>
  void inject_rank_faults_at(int task, std::string_view site_class, SiteFn&& site);
  bool usable(int task) const;
  void throw_if_unusable(int task, const std::string& doing) const;
  std::shared_ptr<CollectiveSlot> open_slot(int group, int64_t sequence);
  void check_buffers_free(int task, const CollectiveCall& call, int64_t sequence, int group) const;
  void arrive(int task, CollectiveSlot& slot, CollectiveCall call);
  void match(CollectiveSlot& slot);
  void complete(CollectiveSlot* pending);
  void move_data(CollectiveSlot& slot);
  void record_completion(int task, const CollectiveSlot& slot);
  void fail(FailureKind kind, std::string report, int failed_rank);
  void fail_with_mismatch(const CollectiveSlot& slot);
  void poison_blocking_outputs();
  void wake(int task, double time_s);
  bool calls_agree(const CollectiveSlot& slot) const;
  std::string mismatch_report(const CollectiveSlot& slot) const;
  std::string deadlock_report() const;
  std::string task_state(int task) const;
  // "rank 3": the rank a task runs as, for messages.
  std::string rank_name(int task) const;
  TaskState& state(int task);
  const TaskState& state(int task) const;

  RankGroups groups_;
  int world_;  // ranks, for sizes, times and reports
  int tasks_;  // parties to every collective
  FiberScheduler& scheduler_;
  FaultInjector& faults_;
  Recorder& recorder_;
  HardwareProfile hardware_;
  double jitter_fraction_;
  std::vector<TaskState> task_states_;
  std::vector<InFlightBuffers> in_flight_;  // by task
  std::deque<CommGroup> comm_groups_;  // 0: the world; a deque, so names stay put (InFlightUse)
  std::map<std::string, int> group_by_key_;
  // Issued by some rank, not completed, by (group, sequence).
  std::map<std::pair<int, int64_t>, std::shared_ptr<CollectiveSlot>> open_;
  std::vector<const void*> data_inputs_;  // move_data's pointer lists, by rank
  std::vector<void*> data_outputs_;
  std::vector<double> stream_free_s_;  // by task: when its comm stream is free
  std::optional<Failure> failure_;
};

}  // namespace zero3
