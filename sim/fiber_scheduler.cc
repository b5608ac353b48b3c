// The event loop and the fiber switches.
#include "sim/fiber_scheduler.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include <boost/context/protected_fixedsize_stack.hpp>

#include "core/base/errors.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace zero3 {

namespace {

// AddressSanitizer tracks which stack is current; a switch it is not told of makes it take the
// new stack's frames for overflows and use-after-return. Each switch is bracketed: start before
// (naming the stack switched to; a null save slot when the leaving fiber ends), finish after
// (learning the stack switched from). Without ASan these are empty.
void start_switch(void** fake_stack_save, const void* bottom, size_t size) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_start_switch_fiber(fake_stack_save, bottom, size);
#else
  (void)fake_stack_save, (void)bottom, (void)size;
#endif
}

void finish_switch(void* fake_stack_save, const void** bottom_from, size_t* size_from) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(fake_stack_save, bottom_from, size_from);
#else
  (void)fake_stack_save, (void)bottom_from, (void)size_from;
#endif
}

// A fiber's frames that never return (the ending fiber's entry frames jump to the scheduler) leave
// their redzones poisoned in ASan's shadow, and unmapping the stack does not clear it: the next
// stack mapped at the same address read as overflowing in a plain write (CI, CheckpointRoundTrip
// seed 4176541875; sim/fiber_stack_shadow_test.cc). A stack holds no frames when it is made or
// unmade, so both clear its shadow.
void clear_stack_shadow(const boost::context::stack_context& context) {
#if defined(__SANITIZE_ADDRESS__)
  ASAN_UNPOISON_MEMORY_REGION(static_cast<char*>(context.sp) - context.size, context.size);
#else
  (void)context;
#endif
}

// protected_fixedsize_stack, also telling the scheduler where the stack it made lies.
class RecordingStack {
 public:
  RecordingStack(size_t bytes, const void** bottom, size_t* size) : stack_(bytes), bottom_(bottom), size_(size) {}
  boost::context::stack_context allocate() {
    boost::context::stack_context context = stack_.allocate();
    clear_stack_shadow(context);
    *bottom_ = static_cast<const char*>(context.sp) - context.size;  // sp is the top: stacks grow down
    *size_ = context.size;
    return context;
  }
  void deallocate(boost::context::stack_context& context) noexcept {
    clear_stack_shadow(context);
    stack_.deallocate(context);
  }

 private:
  boost::context::protected_fixedsize_stack stack_;
  const void** bottom_;
  size_t* size_;
};

}  // namespace

FiberScheduler::FiberScheduler(int tasks, uint64_t seed, size_t stack_bytes)
    : tasks_(static_cast<size_t>(tasks)), rng_(seed, stream_id("schedule")), stack_bytes_(stack_bytes) {
  ZERO3_CHECK(tasks >= 1, "scheduler with " + std::to_string(tasks) + " tasks");
}

size_t FiberScheduler::index(int task) const {
  ZERO3_CHECK(task >= 0 && task < task_count(), "task " + std::to_string(task));
  return static_cast<size_t>(task);
}

bool FiberScheduler::later(const Event& a, const Event& b) {
  if (a.time_s != b.time_s) return a.time_s > b.time_s;
  if (a.tie_break != b.tie_break) return a.tie_break > b.tie_break;
  return a.serial > b.serial;
}

void FiberScheduler::push(double time_s, int task, bool poll_wake, std::function<void()> callback) {
  events_.push_back(Event{time_s, rng_.next_u64(), serial_++, task, poll_wake, std::move(callback)});
  std::push_heap(events_.begin(), events_.end(), later);
}

void FiberScheduler::run(const std::function<void(int task)>& body, const std::function<void()>& on_stuck) {
  ZERO3_CHECK(body_ == nullptr && current_ == -1, "FiberScheduler::run is not reentrant");
  body_ = &body;
  for (int task = 0; task < task_count(); ++task) push(0.0, task, false, nullptr);
  while (true) {
    if (events_.empty()) {
      const bool all_finished = std::all_of(tasks_.begin(), tasks_.end(),
                                            [](const Task& task) { return task.state == State::finished; });
      if (all_finished) break;
      on_stuck();
      ZERO3_CHECK(!events_.empty(), "the deadlock handler woke no task");
      continue;
    }
    std::pop_heap(events_.begin(), events_.end(), later);
    Event event = std::move(events_.back());
    events_.pop_back();
    if (!event.poll_wake) wake_pollers(event.time_s);
    if (event.task < 0) {
      event.callback();
    } else {
      resume(event.task);
    }
  }
  body_ = nullptr;
}

void FiberScheduler::resume(int task) {
  Task& record = tasks_[index(task)];
  ZERO3_CHECK(record.state == State::queued, "resume of task " + std::to_string(task) + " that is not queued");
  if (!record.started) {
    record.started = true;
    const auto* body = body_;
    record.fiber = boost::context::fiber(
        std::allocator_arg, RecordingStack(stack_bytes_, &record.stack.bottom, &record.stack.size),
        [this, task, body](boost::context::fiber&& scheduler) {
          finish_switch(nullptr, &scheduler_stack_.bottom, &scheduler_stack_.size);
          tasks_[static_cast<size_t>(task)].scheduler = std::move(scheduler);
          (*body)(task);
          Task& done = tasks_[static_cast<size_t>(task)];
          done.state = State::finished;
          start_switch(nullptr, scheduler_stack_.bottom, scheduler_stack_.size);  // this fiber ends
          return std::move(done.scheduler);
        });
  }
  record.state = State::running;
  current_ = task;
  start_switch(&scheduler_asan_fake_stack_, record.stack.bottom, record.stack.size);
  record.fiber = std::move(record.fiber).resume();
  finish_switch(scheduler_asan_fake_stack_, nullptr, nullptr);
  current_ = -1;
  ZERO3_CHECK(record.state != State::running, "task " + std::to_string(task) + " returned while running");
}

void FiberScheduler::switch_to_scheduler() {
  const int task = current_;
  Task& record = tasks_[index(task)];
  start_switch(&record.asan_fake_stack, scheduler_stack_.bottom, scheduler_stack_.size);
  record.scheduler = std::move(record.scheduler).resume();
  finish_switch(record.asan_fake_stack, &scheduler_stack_.bottom, &scheduler_stack_.size);
  // Resumed: the scheduler has set current_ back to this task.
  ZERO3_CHECK(current_ == task && record.state == State::running, "task " + std::to_string(task) + " resumed badly");
}

void FiberScheduler::yield() {
  ZERO3_CHECK(in_task(), "yield outside a task");
  Task& record = tasks_[index(current_)];
  record.state = State::queued;
  push(record.clock_s, current_, false, nullptr);
  switch_to_scheduler();
}

void FiberScheduler::block() {
  ZERO3_CHECK(in_task(), "block outside a task");
  tasks_[index(current_)].state = State::blocked;
  switch_to_scheduler();
}

void FiberScheduler::wait_for_progress() {
  ZERO3_CHECK(in_task(), "wait_for_progress outside a task");
  Task& record = tasks_[index(current_)];
  record.state = State::blocked;
  record.polling = true;
  pollers_.push_back(current_);
  switch_to_scheduler();
}

void FiberScheduler::wake(int task, double time_s) {
  Task& record = tasks_[index(task)];
  ZERO3_CHECK(record.state == State::blocked, "wake of task " + std::to_string(task) + " that is not blocked");
  if (record.polling) {
    record.polling = false;
    std::erase(pollers_, task);
  }
  record.clock_s = std::max(record.clock_s, time_s);
  record.state = State::queued;
  push(record.clock_s, task, false, nullptr);
}

void FiberScheduler::wake_pollers(double time_s) {
  for (int task : pollers_) {
    Task& record = tasks_[index(task)];
    ZERO3_CHECK(record.polling && record.state == State::blocked, "poller " + std::to_string(task) + " not parked");
    record.polling = false;
    record.clock_s = std::max(record.clock_s, time_s);
    record.state = State::queued;
    push(record.clock_s, task, true, nullptr);
  }
  pollers_.clear();
}

void FiberScheduler::at(double time_s, std::function<void()> callback) {
  ZERO3_CHECK(callback != nullptr, "timed event without a callback");
  push(time_s, -1, false, std::move(callback));
}

void FiberScheduler::advance(int task, double seconds) {
  ZERO3_CHECK(seconds >= 0.0, "clock moved back by " + std::to_string(seconds) + " s");
  tasks_[index(task)].clock_s += seconds;
}

}  // namespace zero3
