// Per-rank validation of a step's events: modules nest, accesses come from the running module,
// backward follows forward, and every step ends with its optimizer step (FORMAT.md, "Events").
#include <vector>

#include "core/base/errors.h"
#include "traces/format/trace_reader_parts.h"

namespace zero3 {

namespace {

struct LocatedEvent {
  const TraceEvent* event;
  std::string path;
};

std::vector<LocatedEvent> locate(const TraceStep& step, const std::string& path, int rank) {
  std::vector<LocatedEvent> out;
  for (size_t i = 0; i < step.items.size(); ++i) {
    const TraceItem& item = step.items[i];
    const std::string item_path = path + "/" + std::to_string(i);
    if (item.per_rank.empty()) {
      out.push_back({&item.event, item_path});
      continue;
    }
    const size_t list = static_cast<size_t>(rank) % item.per_rank.size();
    for (size_t k = 0; k < item.per_rank[list].size(); ++k) {
      out.push_back({&item.per_rank[list][k], item_path + "/per_rank/" + std::to_string(list) + "/" + std::to_string(k)});
    }
  }
  return out;
}

class StepChecker {
 public:
  StepChecker(const Trace& trace, std::string source, int rank) : trace_(trace), source_(std::move(source)), rank_(rank) {}

  void check(const LocatedEvent& located) {
    path_ = located.path;
    const TraceEvent& event = *located.event;
    if (ended_) fail("no event after \"optimizer_step\" (it ends the step)");
    switch (event.kind) {
      case EventKind::enter: forward(); open_.push_back(event.module); break;
      case EventKind::call: forward(); break;
      case EventKind::exit: close(open_, event.module, "exit"); break;
      case EventKind::param:
        forward();
        if (open_.empty() || open_.back() != event.module) fail("a \"param\" access by the innermost running module" + running());
        break;
      case EventKind::raw:
        forward();
        if (event.module >= 0 && (open_.empty() || open_.back() != event.module)) {
          fail("a \"raw\" access naming the innermost running module (or null outside every module)" + running());
        }
        break;
      case EventKind::backward:
        forward();
        if (!open_.empty()) fail("\"backward\" after every module has exited" + running());
        in_backward_ = true;
        break;
      case EventKind::bwd_enter: backward(); backward_open_.push_back(event.module); break;
      case EventKind::bwd_exit: backward(); close(backward_open_, event.module, "bwd_exit"); break;
      case EventKind::optimizer_step:
        if (!in_backward_ || !backward_open_.empty()) fail("\"optimizer_step\" after a micro-step's \"backward\"");
        ended_ = true;
        break;
    }
  }

  void finish(const std::string& step_path) {
    path_ = step_path;
    if (!ended_) fail("a step that ends with [\"optimizer_step\"]");
  }

 private:
  // A forward event after a backward section starts the next micro-step.
  void forward() {
    if (in_backward_) {
      if (!backward_open_.empty()) fail("forward events after every \"bwd_enter\" has its \"bwd_exit\"");
      in_backward_ = false;
    }
  }
  void backward() {
    if (!in_backward_) fail("backward events only after [\"backward\"]");
  }
  void close(std::vector<int32_t>& open, int32_t module, const char* kind) {
    if (open.empty() || open.back() != module) fail(std::string("\"") + kind + "\" of the innermost open module" + running());
    open.pop_back();
  }
  std::string running() const {
    const std::vector<int32_t>& open = in_backward_ ? backward_open_ : open_;
    if (open.empty()) return " (no module is open)";
    return " (the innermost open module is '" + trace_.modules[static_cast<size_t>(open.back())].name + "')";
  }
  [[noreturn]] void fail(const std::string& expected) const {
    throw InputError(source_ + ": at " + path_ + ": expected " + expected + " (rank " + std::to_string(rank_) + ")");
  }

  const Trace& trace_;
  std::string source_;
  int rank_;
  std::string path_;
  std::vector<int32_t> open_;
  std::vector<int32_t> backward_open_;
  bool in_backward_ = false;
  bool ended_ = false;
};

}  // namespace

void validate_step_events(const Trace& trace, const TraceStep& step, const std::string& source,
                          const std::string& path, int rank) {
  StepChecker checker(trace, source, rank);
  const std::vector<LocatedEvent> events = locate(step, path, rank);
  for (const LocatedEvent& event : events) checker.check(event);
  checker.finish(path);
}

}  // namespace zero3
