// FiberScheduler: runs N tasks (the ranks) as Boost.Context fibers on the calling thread, as a
// discrete-event simulation. Each task has a simulated clock; events are task resumptions and
// timed callbacks (collective completions), processed in order of simulated time with exact ties
// broken by the seeded "schedule" PRNG stream. No OS thread and no wall clock is involved, so the
// same seed gives the same interleaving.
//
// Inside a task: yield() requeues it at its clock; block() parks it until someone calls wake().
// When no event is left but some task is blocked, `on_stuck` runs (the deadlock detector); it must
// wake at least one task.
//
// Stacks are mmap'ed with a guard page when a task first runs and freed when it ends, so untouched
// stack pages cost no memory: 1024 tasks with 256 KiB stacks reserve 256 MiB of address space but
// only the pages they touch. Under AddressSanitizer every switch is announced to it
// (__sanitizer_start/finish_switch_fiber), which otherwise takes the fiber stacks for overflows.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include <boost/context/fiber.hpp>

#include "core/base/rng.h"

namespace zero3 {

class FiberScheduler {
 public:
  FiberScheduler(int tasks, uint64_t seed, size_t stack_bytes);

  // Runs every task's `body` to its end. `body` must not throw.
  void run(const std::function<void(int task)>& body, const std::function<void()>& on_stuck);

  // From inside a task.
  int current() const { return current_; }
  bool in_task() const { return current_ >= 0; }
  void yield();
  void block();
  // Parks the task until something else happens: another task runs (not one that only polls) or
  // a timed event fires, or wake(). Lets a polling loop progress without turning a deadlock into
  // a livelock: when only pollers are left, the queue runs dry and `on_stuck` runs.
  void wait_for_progress();

  // From anywhere.
  void wake(int task, double time_s);  // the task's clock moves to at least time_s
  void at(double time_s, std::function<void()> callback);
  double now_s(int task) const { return tasks_[index(task)].clock_s; }
  void advance(int task, double seconds);
  bool blocked(int task) const { return tasks_[index(task)].state == State::blocked; }
  bool finished(int task) const { return tasks_[index(task)].state == State::finished; }
  int task_count() const { return static_cast<int>(tasks_.size()); }
  // The schedule stream: tie-breaks here, timing jitter in the collective matcher.
  CounterRng& schedule_rng() { return rng_; }

 private:
  enum class State : uint8_t { queued, running, blocked, finished };
  // A stack as AddressSanitizer's fiber interface names it; unused without ASan.
  struct StackBounds {
    const void* bottom = nullptr;
    size_t size = 0;
  };
  struct Task {
    State state = State::queued;
    double clock_s = 0.0;
    bool started = false;
    bool polling = false;  // parked by wait_for_progress()
    boost::context::fiber fiber;      // the task's context while it is suspended
    boost::context::fiber scheduler;  // the scheduler's context while the task runs
    StackBounds stack;                // the task's fiber stack
    void* asan_fake_stack = nullptr;  // ASan's fake stack of the task while it is switched out
  };
  struct Event {
    double time_s;
    uint64_t tie_break;
    uint64_t serial;
    int task;  // -1: run `callback`
    bool poll_wake;  // resumes a poller: not progress by itself
    std::function<void()> callback;
  };
  static bool later(const Event& a, const Event& b);
  size_t index(int task) const;
  void push(double time_s, int task, bool poll_wake, std::function<void()> callback);
  void wake_pollers(double time_s);
  void resume(int task);
  void switch_to_scheduler();

  std::vector<Task> tasks_;
  std::vector<Event> events_;  // a min-heap by (time_s, tie_break, serial)
  std::vector<int> pollers_;   // tasks parked by wait_for_progress(), in parking order
  uint64_t serial_ = 0;
  CounterRng rng_;
  size_t stack_bytes_;
  int current_ = -1;
  const std::function<void(int)>* body_ = nullptr;
  StackBounds scheduler_stack_;               // the thread's own stack, where run() loops
  void* scheduler_asan_fake_stack_ = nullptr;
};

}  // namespace zero3
