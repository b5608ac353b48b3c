// Issue, match, time, complete and fail collectives (the reports are in collective_reports.cc).
#include "sim/collective_matcher.h"

#include <algorithm>
#include <set>

#include "core/base/errors.h"
#include "sim/collective_data.h"
#include "sim/collective_event.h"
#include "sim/fault_plan.h"
#include "sim/fiber_scheduler.h"
#include "sim/recorder.h"

namespace zero3 {

std::string describe(const CollectiveCall& call) {
  return describe(call.signature) + (call.meta ? " meta" : "") + " at " + describe(*call.site);
}

CollectiveMatcher::CollectiveMatcher(const RankGroups& groups, FiberScheduler& scheduler, FaultInjector& faults,
                                     Recorder& recorder, const HardwareProfile& hardware, double jitter_fraction)
    : groups_(groups), world_(groups.world()), tasks_(groups.tasks()), scheduler_(scheduler), faults_(faults),
      recorder_(recorder), hardware_(hardware), jitter_fraction_(jitter_fraction),
      task_states_(static_cast<size_t>(tasks_)), in_flight_(static_cast<size_t>(tasks_)),
      stream_free_s_(static_cast<size_t>(tasks_), 0.0) {
  ZERO3_CHECK(jitter_fraction >= 0.0, "matcher with jitter " + std::to_string(jitter_fraction));
  CommGroup world{.key = "world", .name = "world", .tasks = {}, .next_sequence = {}};
  for (int task = 0; task < tasks_; ++task) world.tasks.push_back(task);
  world.next_sequence.assign(static_cast<size_t>(tasks_), 0);
  comm_groups_.push_back(std::move(world));
  group_by_key_.emplace("world", 0);
}

int CollectiveMatcher::register_group(const std::string& key, const std::vector<int>& tasks, const std::string& name) {
  ZERO3_CHECK(!shares_tasks(), "group " + name + " in a world whose tasks stand for several ranks");
  const auto [found, inserted] = group_by_key_.try_emplace(key, static_cast<int>(comm_groups_.size()));
  if (!inserted) {
    // Every member computes the membership from the same exchanged colors and keys.
    ZERO3_CHECK(comm_group(found->second).tasks == tasks, "group " + key + " registered with different members");
    return found->second;
  }
  for (int task : tasks) ZERO3_CHECK(task >= 0 && task < tasks_, "group " + name + " with task " + std::to_string(task));
  // Every rank is a task of its own here, so the tasks are the members' world ranks.
  CommGroup made{.key = key, .name = name, .tasks = tasks,
                 .next_sequence = std::vector<int64_t>(static_cast<size_t>(tasks_), -1), .kind = "group",
                 .level = link_level(hardware_, tasks)};
  for (int task : tasks) made.next_sequence[static_cast<size_t>(task)] = 0;
  comm_groups_.push_back(std::move(made));
  return found->second;
}

void CollectiveMatcher::set_group_kind(int group, const char* kind) {
  ZERO3_CHECK(group > 0 && static_cast<size_t>(group) < comm_groups_.size(), "kind of group " + std::to_string(group));
  comm_groups_[static_cast<size_t>(group)].kind = kind;
}

const CollectiveMatcher::CommGroup& CollectiveMatcher::comm_group(int group) const {
  ZERO3_CHECK(group >= 0 && static_cast<size_t>(group) < comm_groups_.size(),
              "group " + std::to_string(group) + " of " + std::to_string(comm_groups_.size()));
  return comm_groups_[static_cast<size_t>(group)];
}

int CollectiveMatcher::group_size(int group) const {
  return group == 0 ? world_ : static_cast<int>(comm_group(group).tasks.size());
}

std::string CollectiveMatcher::in_group(int group) const {
  return group == 0 ? std::string() : " in " + comm_group(group).name;
}

std::string CollectiveMatcher::where(int group, const CollectiveCall& call, int64_t sequence) const {
  return std::string(collective_op_name(call.signature.op)) + " #" + std::to_string(sequence) + in_group(group) +
         " (" + describe(*call.site) + ")";
}

CollectiveMatcher::TaskState& CollectiveMatcher::state(int task) {
  ZERO3_CHECK(task >= 0 && task < tasks_, "task " + std::to_string(task) + " of " + std::to_string(tasks_));
  return task_states_[static_cast<size_t>(task)];
}

const CollectiveMatcher::TaskState& CollectiveMatcher::state(int task) const {
  ZERO3_CHECK(task >= 0 && task < tasks_, "task " + std::to_string(task) + " of " + std::to_string(tasks_));
  return task_states_[static_cast<size_t>(task)];
}

std::string CollectiveMatcher::rank_name(int task) const { return "rank " + std::to_string(groups_.rank_of(task)); }

bool CollectiveMatcher::usable(int task) const { return !failure_ && !state(task).crashed; }

template <class DoingFn>
void CollectiveMatcher::throw_if_unusable_doing(int task, DoingFn&& doing) const {
  if (!usable(task)) throw_if_unusable(task, doing());
}

template <class SiteFn>
void CollectiveMatcher::inject_rank_faults_at(int task, std::string_view site_class, SiteFn&& site) {
  // Once the world has failed the run is over for the collectives; more crashes would only bury
  // the root cause.
  if (failure_) return;
  if (faults_.fire(FaultKind::crash, task, site_class, site)) {
    const std::string crash_site = site();
    state(task).crashed = true;
    rank_failed(task, "crashed (injected fault) at " + crash_site);
    throw RankCrashedError(rank_name(task) + " crashed (injected fault) at " + crash_site);
  }
  if (faults_.fire(FaultKind::stall, task, site_class, site)) {
    scheduler_.advance(task, 10.0 * faults_.draw_delay_s());
    scheduler_.yield();
  }
}

void CollectiveMatcher::inject_rank_faults(int task, std::string_view site_class, const std::string& site) {
  inject_rank_faults_at(task, site_class, [&] { return site; });
}

std::shared_ptr<CollectiveSlot> CollectiveMatcher::issue(int task, int group, CollectiveCall call) {
  ZERO3_CHECK(scheduler_.current() == task, "task " + std::to_string(task) + " issued a collective from task " +
                                                std::to_string(scheduler_.current()));
  ZERO3_CHECK(call.site != nullptr, "a collective of task " + std::to_string(task) + " without a call site");
  const CommGroup& members = comm_group(group);
  const int64_t sequence = members.next_sequence[static_cast<size_t>(task)];
  ZERO3_CHECK(sequence >= 0, "task " + std::to_string(task) + " issued on " + members.name + ", which it is no part of");
  const auto call_where = [&] { return where(group, call, sequence); };
  const auto issuing = [&] { return "issuing " + call_where(); };
  throw_if_unusable_doing(task, issuing);
  inject_rank_faults_at(task, collective_site_class(*call.site), call_where);
  throw_if_unusable_doing(task, issuing);  // the world may have failed while the task stalled
  check_buffers_free(task, call, sequence, group);
  if (!call.meta && groups_.ranks_of(task).size() > 1) {
    throw InputError(rank_name(task) + " stands for " + std::to_string(groups_.ranks_of(task).size()) +
                     " ranks, but " + call_where() +
                     " moves data: the ranks it stands for have none, so only meta collectives are shared");
  }

  std::shared_ptr<CollectiveSlot> slot = open_slot(group, sequence);
  comm_groups_[static_cast<size_t>(group)].next_sequence[static_cast<size_t>(task)] = sequence + 1;
  arrive(task, *slot, std::move(call));
  if (slot->arrived_count == static_cast<int>(comm_group(group).tasks.size())) {
    match(*slot);
    // A mismatch fails the world.
    const CollectiveCall& arrived = slot->arrivals[static_cast<size_t>(task)].call;
    throw_if_unusable_doing(task, [&] { return "issuing " + where(group, arrived, sequence); });
  }
  return slot;
}

std::shared_ptr<CollectiveSlot> CollectiveMatcher::open_slot(int group, int64_t sequence) {
  std::shared_ptr<CollectiveSlot>& entry = open_[{group, sequence}];
  if (!entry) {
    entry = std::make_shared<CollectiveSlot>();
    entry->group = group;
    entry->sequence = sequence;
    entry->arrivals.resize(static_cast<size_t>(tasks_));
  }
  return entry;
}

void CollectiveMatcher::check_buffers_free(int task, const CollectiveCall& call, int64_t sequence, int group) const {
  const InFlightBuffers& in_flight = in_flight_[static_cast<size_t>(task)];
  const auto hazard = [&](const char* access, const Tensor& tensor, const InFlightUse& use) {
    throw CorrectnessError(rank_name(task) + ": " + where(group, call, sequence) + " " + access + " " +
                           describe(tensor) + ", which is " + describe(use) +
                           " still in flight; wait() on that collective first (completions may be reordered)");
  };
  if (call.input.defined()) {
    if (const InFlightUse* use = in_flight.writer_of(call.input.storage_id())) hazard("reads", call.input, *use);
  }
  if (call.output.defined()) {
    if (const InFlightUse* use = in_flight.user_of(call.output.storage_id())) hazard("writes", call.output, *use);
  }
}

void CollectiveMatcher::arrive(int task, CollectiveSlot& slot, CollectiveCall call) {
  CollectiveSlot::Arrival& arrival = slot.arrivals[static_cast<size_t>(task)];
  ZERO3_CHECK(!arrival.arrived, "task " + std::to_string(task) + " arrived twice at #" + std::to_string(slot.sequence));
  arrival.issue_s = scheduler_.now_s(task);
  if (!call.meta) {
    // An in-place input is copied before its buffer is poisoned; other inputs are read at completion.
    if (call.input.defined() && call.output.defined() && call.input.shares_storage_with(call.output)) {
      const auto* input = static_cast<const char*>(call.input.device_bytes());
      arrival.input_copy.assign(input, input + call.input.bytes());
      arrival.input_copied = true;
    }
    // A blocking call's output is poisoned only if it never completes (poison_blocking_outputs).
    if (call.output.defined() && !call.blocking) {
      poison(call.output.device_bytes(), call.output.numel(), call.output.dtype());
    }
  }
  InFlightBuffers& in_flight = in_flight_[static_cast<size_t>(task)];
  const std::string* group_name = slot.group == 0 ? nullptr : &comm_group(slot.group).name;
  if (call.input.defined()) {
    in_flight.add(call.input, {slot.sequence, call.signature.op, call.site, false, slot.group, group_name});
  }
  if (call.output.defined()) {
    in_flight.add(call.output, {slot.sequence, call.signature.op, call.site, true, slot.group, group_name});
  }
  arrival.call = std::move(call);
  arrival.arrived = true;
  ++slot.arrived_count;
  ZERO3_CHECK(slot.arrived_count <= static_cast<int>(comm_group(slot.group).tasks.size()),
              "more arrivals than parties at #" + std::to_string(slot.sequence) + in_group(slot.group));
}

bool CollectiveMatcher::calls_agree(const CollectiveSlot& slot) const {
  const CollectiveCall* first = nullptr;
  for (const CollectiveSlot::Arrival& arrival : slot.arrivals) {
    if (!arrival.arrived) continue;
    if (first == nullptr) {
      first = &arrival.call;
    } else if (!(arrival.call.signature == first->signature) || arrival.call.meta != first->meta) {
      return false;
    } else if (!arrival.call.site->params.empty() && !first->site->params.empty() &&
               arrival.call.site->params != first->site->params) {
      // Same signature, different parameters (one rank gathers expert 2, another expert 3): NCCL
      // would complete it and silently mix the buffers; the simulator says so instead.
      return false;
    }
  }
  return true;
}

void CollectiveMatcher::match(CollectiveSlot& slot) {
  const std::vector<int>& parties = comm_group(slot.group).tasks;
  ZERO3_CHECK(slot.arrived_count == static_cast<int>(parties.size()) && !slot.matched,
              "match of #" + std::to_string(slot.sequence) + in_group(slot.group));
  if (!calls_agree(slot)) {
    fail_with_mismatch(slot);
    return;
  }
  const CollectiveCall& call = slot.arrivals[static_cast<size_t>(parties.front())].call;
  const int size = group_size(slot.group);
  const int64_t bytes = collective_buffer_bytes(call.signature, size);
  const double jitter = 1.0 + jitter_fraction_ * scheduler_.schedule_rng().next_uniform();
  const double modelled_s = slot.group == 0
                                ? collective_time_s(hardware_, call.signature.op, bytes, size)
                                : group_collective_time_s(hardware_, call.signature.op, bytes, size,
                                                          comm_group(slot.group).level);
  double duration_s = modelled_s * jitter;
  const auto site = [&] { return where(slot.group, call, slot.sequence); };
  if (faults_.fire(FaultKind::late, -1, collective_site_class(*call.site), site)) duration_s += faults_.draw_delay_s();
  // Matched collectives start in each party's issue order. A group's collective may still start
  // ahead of one its party issued earlier on another communicator that waits for ranks outside the
  // group (not matched, so not on the stream yet), where NCCL on one stream would keep issue order:
  // with jitter, a recorded hpZ run can log a block gather before an earlier world gather.
  double start_s = 0.0;
  for (int task : parties) {
    start_s = std::max({start_s, stream_free_s_[static_cast<size_t>(task)],
                        slot.arrivals[static_cast<size_t>(task)].issue_s});
  }
  for (int task : parties) stream_free_s_[static_cast<size_t>(task)] = start_s + duration_s;
  double end_s = start_s + duration_s;
  // A reordered completion is held back without holding the stream, so later collectives overtake it.
  if (faults_.fire(FaultKind::reorder, -1, collective_site_class(*call.site), site)) end_s += faults_.draw_delay_s();
  slot.start_s = start_s;
  slot.end_s = end_s;
  slot.matched = true;
  // The slot stays in open_ until it completes (only complete() erases it); capturing only its
  // address keeps the callback small enough for std::function to hold without allocating.
  CollectiveSlot* const pending = &slot;
  scheduler_.at(end_s, [this, pending] { complete(pending); });
}

void CollectiveMatcher::complete(CollectiveSlot* pending) {
  // A failed world already gave every waiter its error; its pending collectives never complete.
  if (failure_) return;
  const auto found = open_.find({pending->group, pending->sequence});
  ZERO3_CHECK(found != open_.end() && found->second.get() == pending,
              "completion of #" + std::to_string(pending->sequence) + ", which is not open");
  const std::shared_ptr<CollectiveSlot> held = found->second;
  CollectiveSlot& slot = *held;
  ZERO3_CHECK(slot.matched && !slot.completed, "completion of #" + std::to_string(slot.sequence));
  const std::vector<int>& parties = comm_group(slot.group).tasks;
  if (!slot.arrivals[static_cast<size_t>(parties.front())].call.meta) move_data(slot);
  slot.completed = true;
  for (int task : parties) {
    in_flight_[static_cast<size_t>(task)].remove(slot.sequence, slot.group);
    record_completion(task, slot);
  }
  // Completed: the buffers are the ranks' again, and the slot keeps only its times.
  slot.arrivals.clear();
  slot.arrivals.shrink_to_fit();
  open_.erase(found);
  for (int task : parties) {
    if (state(task).blocked_on == &slot) wake(task, slot.end_s);
  }
}

void CollectiveMatcher::move_data(CollectiveSlot& slot) {
  // Only tasks of one rank each move data (arrive() refuses the others), so tasks are ranks here,
  // and the group's parties in group-rank order are the collective's ranks 0 .. size-1.
  // The pointer lists are members, reused so that a collective allocates nothing to move its data.
  const std::vector<int>& parties = comm_group(slot.group).tasks;
  data_inputs_.assign(parties.size(), nullptr);
  data_outputs_.assign(parties.size(), nullptr);
  for (size_t rank = 0; rank < data_inputs_.size(); ++rank) {
    CollectiveSlot::Arrival& arrival = slot.arrivals[static_cast<size_t>(parties[rank])];
    if (arrival.input_copied) {
      data_inputs_[rank] = arrival.input_copy.data();
    } else if (arrival.call.input.defined()) {
      data_inputs_[rank] = arrival.call.input.device_bytes();
    }
    if (arrival.call.output.defined()) data_outputs_[rank] = arrival.call.output.device_bytes();
  }
  move_collective_data(slot.arrivals[static_cast<size_t>(parties.front())].call.signature, data_inputs_, data_outputs_);
}

void CollectiveMatcher::record_completion(int task, const CollectiveSlot& slot) {
  const CollectiveSlot::Arrival& arrival = slot.arrivals[static_cast<size_t>(task)];
  const CollectiveCall& call = arrival.call;
  const bool world = slot.group == 0;
  const LinkLevel level = comm_group(slot.group).level;
  recorder_.record_collective(task, CollectiveEvent{.sequence = slot.sequence,
                                                    .signature = call.signature,
                                                    .bytes = collective_buffer_bytes(call.signature, group_size(slot.group)),
                                                    .meta = call.meta,
                                                    .site = call.site,
                                                    .issue_s = arrival.issue_s,
                                                    .start_s = slot.start_s,
                                                    .end_s = slot.end_s,
                                                    .group = world ? nullptr : comm_group(slot.group).kind,
                                                    .level = world ? nullptr : link_level_name(level)});
  std::vector<CompletedCollective>& last = state(task).last_completed;
  if (last.size() == 2) last.erase(last.begin());
  last.push_back(CompletedCollective{slot.group, slot.sequence, call.signature.op, call.site});
}

void CollectiveMatcher::wait(int task, CollectiveSlot& slot) {
  ZERO3_CHECK(scheduler_.current() == task, "task " + std::to_string(task) + " waited from task " +
                                                std::to_string(scheduler_.current()));
  while (!slot.completed) {
    throw_if_unusable_doing(task, [&] {
      return "waiting in " + where(slot.group, slot.arrivals[static_cast<size_t>(task)].call, slot.sequence);
    });
    state(task).blocked_on = &slot;
    scheduler_.block();
    ZERO3_CHECK(state(task).blocked_on == nullptr, "task " + std::to_string(task) + " resumed while still blocked");
  }
  if (state(task).crashed) throw_if_crashed(task, "waiting in #" + std::to_string(slot.sequence) + in_group(slot.group));
  // The compute stream waits for the comm stream: the task's clock moves to the completion.
  const double now_s = scheduler_.now_s(task);
  if (now_s < slot.end_s) scheduler_.advance(task, slot.end_s - now_s);
}

bool CollectiveMatcher::poll(int task, CollectiveSlot& slot) {
  ZERO3_CHECK(scheduler_.current() == task, "task " + std::to_string(task) + " polled from task " +
                                                std::to_string(scheduler_.current()));
  if (!slot.completed) {
    throw_if_unusable_doing(task, [&] {
      return "polling " + where(slot.group, slot.arrivals[static_cast<size_t>(task)].call, slot.sequence);
    });
    // Parked as waiting in the slot (deadlock reports name it) until anything else happens.
    state(task).blocked_on = &slot;
    scheduler_.wait_for_progress();
    state(task).blocked_on = nullptr;
  }
  if (!slot.completed) return false;
  wait(task, slot);  // completed: only moves the clock
  return true;
}

void CollectiveMatcher::drain(int task) {
  std::vector<std::shared_ptr<CollectiveSlot>> pending;
  for (const auto& [sequence, slot] : open_) {
    if (slot->arrivals[static_cast<size_t>(task)].arrived) pending.push_back(slot);
  }
  for (const std::shared_ptr<CollectiveSlot>& slot : pending) wait(task, *slot);
}

void CollectiveMatcher::rank_exited(int task) {
  ZERO3_CHECK(state(task).blocked_on == nullptr, "task " + std::to_string(task) + " exited while blocked");
  state(task).exited = true;
}

void CollectiveMatcher::rank_failed(int task, const std::string& reason) {
  state(task).failed = true;
  if (!failure_) fail(FailureKind::peer_failure, rank_name(task) + " " + reason, groups_.rank_of(task));
}

void CollectiveMatcher::throw_if_crashed(int task, const std::string& doing) const {
  if (state(task).crashed) {
    throw RankCrashedError(rank_name(task) + " crashed earlier (injected fault) and cannot go on " + doing);
  }
}

void CollectiveMatcher::throw_if_unusable(int task, const std::string& doing) const {
  throw_if_crashed(task, doing);
  if (!failure_) return;
  switch (failure_->kind) {
    case FailureKind::mismatch: throw CollectiveMismatchError(failure_->report, failure_->ranks_at_different_modules);
    case FailureKind::deadlock: throw DeadlockError(failure_->report);
    case FailureKind::peer_failure:
      throw PeerFailureError("peer failure: " + failure_->report + "; " + rank_name(task) + " was " + doing,
                             failure_->failed_rank);
  }
}

void CollectiveMatcher::fail_with_mismatch(const CollectiveSlot& slot) {
  std::set<std::string> modules;
  for (const CollectiveSlot::Arrival& arrival : slot.arrivals) {
    if (arrival.arrived) modules.insert(arrival.call.site->module);
  }
  fail(FailureKind::mismatch, mismatch_report(slot), -1);
  failure_->ranks_at_different_modules = modules.size() > 1;
}

void CollectiveMatcher::fail(FailureKind kind, std::string report, int failed_rank) {
  ZERO3_CHECK(!failure_, "the world failed twice");
  failure_ = Failure{kind, std::move(report), failed_rank};
  poison_blocking_outputs();
  for (int task = 0; task < tasks_; ++task) {
    if (state(task).blocked_on != nullptr) wake(task, scheduler_.now_s(task));
  }
  ZERO3_CHECK(failure_.has_value(), "failure recorded");
}

void CollectiveMatcher::poison_blocking_outputs() {
  // The open collectives will never complete now; their blocked ranks are about to see the
  // failure, and with it outputs as poisoned as an asynchronous call's.
  for (const auto& [sequence, slot] : open_) {
    for (const CollectiveSlot::Arrival& arrival : slot->arrivals) {
      const CollectiveCall& call = arrival.call;
      if (!arrival.arrived || !call.blocking || call.meta || !call.output.defined()) continue;
      Tensor output = call.output;
      poison(output.device_bytes(), output.numel(), output.dtype());
    }
  }
}

void CollectiveMatcher::wake(int task, double time_s) {
  ZERO3_CHECK(state(task).blocked_on != nullptr, "wake of task " + std::to_string(task) + " that waits on nothing");
  state(task).blocked_on = nullptr;
  // A polling task may already be queued by the scheduler's progress wake-up.
  if (scheduler_.blocked(task)) scheduler_.wake(task, time_s);
}

void CollectiveMatcher::on_stuck() {
  ZERO3_CHECK(!failure_, "ranks blocked after the world failed");
  // Calls that already disagree are the root cause; the hang is only their consequence.
  for (const auto& [sequence, slot] : open_) {
    if (!calls_agree(*slot)) {
      fail_with_mismatch(*slot);
      return;
    }
  }
  fail(FailureKind::deadlock, deadlock_report(), -1);
}

}  // namespace zero3
