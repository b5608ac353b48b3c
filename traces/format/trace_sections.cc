// The optional sections of a trace: the recorded collective log, and the model spec, run and
// expected failure that make a trace replayable functionally (FORMAT.md).
#include <limits>

#include "core/zero3/bug_injection.h"
#include "core/base/errors.h"
#include "core/training/train_config.h"
#include "sim/fault_plan.h"
#include "traces/format/trace_reader_parts.h"

namespace zero3 {

TraceCollective read_collective(const JsonReader& node) {
  // Two more elements, group and level, where the run's communicator said them (FORMAT.md).
  if (!node.json().is_array() || (node.size() != 10 && node.size() != 12)) {
    node.fail("[sequence, op, dtype, count, bytes, module, phase, step, start_s, duration_s] or the same with "
              "group and level after them");
  }
  TraceCollective call;
  constexpr int64_t kMax = int64_t{1} << 60;
  call.sequence = node.at(0).as_int(0, kMax);
  call.op = node.at(1).as_choice({"all_gather", "reduce_scatter", "all_reduce", "broadcast", "barrier"});
  call.dtype = node.at(2).as_choice({"f32", "bf16"});
  call.count = node.at(3).as_int(0, kMax);
  call.bytes = node.at(4).as_int(0, kMax);
  call.module = node.at(5).as_string();
  call.phase = node.at(6).as_string();
  call.step = node.at(7).as_int(-1, kMax);
  call.start_s = node.at(8).as_number(0.0, 1e12);
  call.duration_s = node.at(9).as_number(0.0, 1e12);
  if (node.size() == 12) {
    call.group = node.at(10).as_choice({"world", "block", "across blocks", "group"});
    call.level = node.at(11).as_choice({"intra-node", "inter-node", ""});
  }
  return call;
}

namespace {

TraceRun read_run(const JsonReader& node, const std::string& source) {
  node.expect_only_keys({"world", "seed", "steps", "config", "inject", "faults", "checkpoint"});
  TraceRun run;
  run.world = static_cast<int>(node.at("world").as_int(1, 4096));
  run.seed = static_cast<uint64_t>(node.at("seed").as_int(0, std::numeric_limits<int64_t>::max()));
  run.steps = node.at("steps").as_int(1, 1 << 20);
  if (node.has("config")) {
    run.config = node.at("config").json();
    std::vector<std::string> warnings;
    parse_train_config(run.config, source + " " + node.path() + "/config", &warnings);
  }
  if (node.has("inject")) {
    const JsonReader inject = node.at("inject");
    for (size_t i = 0; i < inject.size(); ++i) {
      const std::string name = inject.at(i).as_string();
      try {
        parse_bug(name);
      } catch (const InputError& error) {
        inject.at(i).fail(std::string("a bug injection name: ") + error.what());
      }
      run.inject.push_back(name);
    }
  }
  if (node.has("faults")) {
    run.faults = node.at("faults").as_string();
    try {
      FaultPlan::parse(run.faults);
    } catch (const InputError& error) {
      node.at("faults").fail(std::string("a fault plan: ") + error.what());
    }
  }
  if (node.has("checkpoint")) {
    const JsonReader checkpoint = node.at("checkpoint");
    checkpoint.expect_only_keys({"save_at_step", "resume_world"});
    if (run.steps < 2) node.at("steps").fail("at least 2 steps, so that a checkpoint falls between them");
    checkpoint.at("save_at_step").as_int(1, run.steps - 1);
    checkpoint.at("resume_world").as_int(1, 4096);
    run.checkpoint = checkpoint.json();
  }
  return run;
}

}  // namespace

void read_functional_sections(const JsonReader& root, const std::string& source, Trace& trace) {
  if (root.has("model_spec") != root.has("run")) {
    root.fail("both \"model_spec\" and \"run\" (a functional trace needs the model and how it was run), or neither");
  }
  if (root.has("run")) {
    const JsonReader spec = root.at("model_spec");
    if (!spec.json().is_string() && !spec.json().is_object()) spec.fail("a built-in model name or a model spec object");
    trace.run = read_run(root.at("run"), source);
    trace.run->model_spec = spec.json();
  }
  if (root.has("expected")) {
    if (!trace.run) root.at("expected").fail("no \"expected\" without \"model_spec\" and \"run\"");
    const JsonReader expected = root.at("expected");
    expected.expect_only_keys({"property", "message", "event_log_hash"});
    TraceExpectation expectation;
    expectation.property = expected.at("property").as_string();
    expectation.message = expected.has("message") ? expected.at("message").as_string() : "";
    if (expected.has("event_log_hash")) expectation.event_log_hash = expected.at("event_log_hash").as_string();
    trace.expected = expectation;
  }
}

}  // namespace zero3
