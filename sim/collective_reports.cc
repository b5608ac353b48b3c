// The mismatch and deadlock reports: what every rank called or waits on, ranks with the same line
// grouped ("ranks 0-6: ...") so that a 1024-rank report stays readable.
#include "sim/collective_matcher.h"

#include <algorithm>
#include <map>
#include <utility>

#include "core/base/errors.h"
#include "sim/rank_ranges.h"

namespace zero3 {

namespace {

// One line per distinct text, in order of the lowest rank showing it.
std::string grouped_lines(const std::vector<std::string>& line_by_rank) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  std::map<std::string, size_t> group_of_line;
  for (size_t rank = 0; rank < line_by_rank.size(); ++rank) {
    if (line_by_rank[rank].empty()) continue;
    const auto [entry, inserted] = group_of_line.try_emplace(line_by_rank[rank], groups.size());
    if (inserted) groups.push_back({line_by_rank[rank], {}});
    groups[entry->second].second.push_back(static_cast<int>(rank));
  }
  std::string text;
  for (const auto& [line, ranks] : groups) text += "\n  " + format_ranks(ranks) + ": " + line;
  return text;
}

}  // namespace

std::string CollectiveMatcher::describe_completed(const CompletedCollective& completed) const {
  return "#" + std::to_string(completed.sequence) + in_group(completed.group) + " " +
         collective_op_name(completed.op) + " (" + describe(*completed.site) + ")";
}

std::string CollectiveMatcher::last_completed_text(int task) const {
  const std::vector<CompletedCollective>& last_completed = state(task).last_completed;
  if (last_completed.empty()) return "no collective completed";
  std::string text = "last completed ";
  for (size_t i = 0; i < last_completed.size(); ++i) text += (i ? ", " : "") + describe_completed(last_completed[i]);
  return text;
}

std::string CollectiveMatcher::task_state(int task) const {
  const TaskState& status = state(task);
  std::string text;
  if (status.blocked_on != nullptr) {
    const CollectiveSlot& slot = *status.blocked_on;
    const CollectiveCall& call = slot.arrivals[static_cast<size_t>(task)].call;
    text = "waits in #" + std::to_string(slot.sequence) + in_group(slot.group) + ": " + describe(call);
  } else if (status.crashed) {
    text = "crashed";
  } else if (status.failed) {
    text = "failed";
  } else if (status.exited) {
    text = "exited (its program returned)";
  } else {
    text = "is running";
  }
  return text + "; " + last_completed_text(task);
}

std::string CollectiveMatcher::mismatch_report(const CollectiveSlot& slot) const {
  // Only the group's ranks are parties; the others' lines stay empty and are left out.
  std::vector<std::string> line_by_task(static_cast<size_t>(tasks_));
  for (int task : comm_group(slot.group).tasks) {
    const CollectiveSlot::Arrival& arrival = slot.arrivals[static_cast<size_t>(task)];
    line_by_task[static_cast<size_t>(task)] =
        arrival.arrived ? describe(arrival.call)
                        : "did not issue #" + std::to_string(slot.sequence) + ": " + task_state(task);
  }
  return "collective mismatch" + in_group(slot.group) + " at #" + std::to_string(slot.sequence) +
         ": the ranks issued different collectives (NCCL would hang or mix up the buffers)" +
         grouped_lines(groups_.by_rank(line_by_task));
}

std::string CollectiveMatcher::deadlock_report() const {
  ZERO3_CHECK(!open_.empty(), "a deadlock without an open collective");
  // The lowest open collective that some party has not issued (world first, then the groups in
  // order of their creation) is the one holding everything up: every rank that has not issued it
  // can no longer do so (the scheduler found no runnable rank). Every open collective has all its
  // parties only if none can be missing, which a stuck world rules out; the first is the fallback.
  const CollectiveSlot* waiting = open_.begin()->second.get();
  for (const auto& [key, slot] : open_) {
    if (slot->arrived_count < static_cast<int>(comm_group(slot->group).tasks.size())) {
      waiting = slot.get();
      break;
    }
  }
  const CollectiveSlot& lowest = *waiting;
  // The group's ranks, ascending (the world's: every rank).
  std::vector<int> ranks;
  if (lowest.group == 0) {
    for (int rank = 0; rank < world_; ++rank) ranks.push_back(rank);
  } else {
    for (int task : comm_group(lowest.group).tasks) ranks.push_back(groups_.rank_of(task));
    std::sort(ranks.begin(), ranks.end());
  }
  std::vector<int> arrived;
  std::map<std::string, std::vector<int>> missing_by_state;
  const CollectiveCall* call = nullptr;
  for (int rank : ranks) {
    const int task = groups_.task_of(rank);
    const CollectiveSlot::Arrival& arrival = lowest.arrivals[static_cast<size_t>(task)];
    if (arrival.arrived) {
      arrived.push_back(rank);
      if (call == nullptr) call = &arrival.call;
      continue;
    }
    const TaskState& status = state(task);
    const char* state_word = status.crashed  ? "crashed"
                             : status.failed ? "failed"
                             : status.exited ? "exited"
                                             : "is running";
    missing_by_state[state_word].push_back(rank);
  }
  ZERO3_CHECK(call != nullptr, "open collective #" + std::to_string(lowest.sequence) + " without arrivals");
  std::string headline = lowest.group == 0 ? std::string() : "in " + comm_group(lowest.group).name + ", ";
  const size_t headline_start = headline.size();
  for (const auto& [state_word, missing] : missing_by_state) {
    headline += (headline.size() == headline_start ? "" : " and ") + format_ranks(missing) + " " + state_word;
  }
  headline += " while " + format_ranks(arrived) + " wait" + (arrived.size() == 1 ? "s" : "") + " in " +
              collective_op_name(call->signature.op) + " #" + std::to_string(lowest.sequence) + " (" +
              describe(*call->site) + ")";
  std::vector<std::string> line_by_task(static_cast<size_t>(tasks_));
  for (int task = 0; task < tasks_; ++task) line_by_task[static_cast<size_t>(task)] = task_state(task);
  return "deadlock: every live rank is blocked and no collective can complete: " + headline +
         grouped_lines(groups_.by_rank(line_by_task));
}

}  // namespace zero3
