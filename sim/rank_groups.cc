// Validating a partition of the ranks into tasks, and the lookups both ways.
#include "sim/rank_groups.h"

#include <string>
#include <utility>

#include "core/base/errors.h"

namespace zero3 {

RankGroups::RankGroups(int world) : RankGroups(world, {}) {}

RankGroups::RankGroups(int world, std::vector<std::vector<int>> groups) : groups_(std::move(groups)) {
  if (world < 1) throw InputError("rank groups of world " + std::to_string(world));
  if (groups_.empty()) {
    for (int rank = 0; rank < world; ++rank) groups_.push_back({rank});
  }
  task_of_rank_.assign(static_cast<size_t>(world), -1);
  int previous_lowest = -1;
  for (size_t task = 0; task < groups_.size(); ++task) {
    const std::vector<int>& group = groups_[task];
    if (group.empty() || group.front() <= previous_lowest) {
      throw InputError("rank group " + std::to_string(task) + " is empty or not ordered by its lowest rank");
    }
    previous_lowest = group.front();
    for (size_t i = 0; i < group.size(); ++i) {
      const int rank = group[i];
      if (rank < 0 || rank >= world || (i > 0 && rank <= group[i - 1]) || task_of_rank_[static_cast<size_t>(rank)] >= 0) {
        throw InputError("rank group " + std::to_string(task) + ": rank " + std::to_string(rank) +
                         " is out of 0.." + std::to_string(world - 1) + ", out of order or in two groups");
      }
      task_of_rank_[static_cast<size_t>(rank)] = static_cast<int>(task);
    }
  }
  for (size_t rank = 0; rank < task_of_rank_.size(); ++rank) {
    if (task_of_rank_[rank] < 0) throw InputError("rank " + std::to_string(rank) + " is in no rank group");
  }
}

int RankGroups::rank_of(int task) const { return ranks_of(task).front(); }

const std::vector<int>& RankGroups::ranks_of(int task) const {
  ZERO3_CHECK(task >= 0 && task < tasks(), "task " + std::to_string(task) + " of " + std::to_string(tasks()));
  return groups_[static_cast<size_t>(task)];
}

int RankGroups::task_of(int rank) const {
  ZERO3_CHECK(rank >= 0 && rank < world(), "rank " + std::to_string(rank) + " of " + std::to_string(world()));
  return task_of_rank_[static_cast<size_t>(rank)];
}

}  // namespace zero3
