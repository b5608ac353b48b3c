// RankGroups: which ranks each simulated task stands for. Ordinarily every rank is a task of its
// own. Ranks that are known to run the same program on the same inputs (a shape replay's ranks
// with identical event streams) may share one task instead: it runs as the group's lowest rank,
// at the full world size, and stands for the others in every result and report. A 1024-rank
// replay with two distinct event streams then runs two engines, not 1024.
//
//   RankGroups groups(8, {{0, 2, 4, 6}, {1, 3, 5, 7}});
//   groups.tasks();      // 2
//   groups.rank_of(1);   // 1: task 1 runs as rank 1
//   groups.task_of(6);   // 0
#pragma once
#include <cstddef>
#include <vector>

namespace zero3 {

class RankGroups {
 public:
  // Every rank of `world` alone.
  explicit RankGroups(int world);
  // `groups` must partition 0 .. world-1, each group ascending and the groups ordered by their
  // lowest rank (so task order is rank order); InputError otherwise. Empty: every rank alone.
  RankGroups(int world, std::vector<std::vector<int>> groups);

  int world() const { return static_cast<int>(task_of_rank_.size()); }
  int tasks() const { return static_cast<int>(groups_.size()); }
  bool every_rank_alone() const { return tasks() == world(); }
  // The rank a task runs as: the lowest of its group.
  int rank_of(int task) const;
  const std::vector<int>& ranks_of(int task) const;
  int task_of(int rank) const;

  // One value per task, repeated for every rank the task stands for.
  template <class T>
  std::vector<T> by_rank(const std::vector<T>& by_task) const {
    std::vector<T> out;
    out.reserve(task_of_rank_.size());
    for (int task : task_of_rank_) out.push_back(by_task.at(static_cast<size_t>(task)));
    return out;
  }

 private:
  std::vector<std::vector<int>> groups_;
  std::vector<int> task_of_rank_;
};

}  // namespace zero3
