// Kernel work in traces (FORMAT.md, "Kernel work"): it reads and writes back the same, bad values
// are errors naming the JSON path, rescaling grows its parts as they grow, and a recorded run
// carries each module's own forward and backward work and the loss's.
#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "traces/format/trace.h"
#include "traces/format/trace_recorder.h"
#include "traces/format/trace_scaling.h"

namespace zero3 {
namespace {

nlohmann::json trace_with_work() {
  return nlohmann::json::parse(R"({
    "zero3_trace": 1, "name": "worked", "dtype": "f32", "batch": 2, "seq_len": 4,
    "modules": [["", "Net"], ["a", "Linear"]],
    "params": [[0, "a.weight", [8, 4]]],
    "steps": [{"ranks": "all", "repeat": 1, "events": [
      ["enter", ""],
      ["call", "a", null, 64, {"forward_work": {"flops": 512, "bytes": {"linear": 96, "quadratic": 32},
                                                "transcendentals": 10, "calls": 3},
                               "backward_work": {"flops": 1024, "bytes": 200, "calls": 4}}],
      ["exit", ""],
      ["backward", 4, {"forward_work": {"bytes": 300, "transcendentals": {"quadratic": 40}, "calls": 2},
                      "backward_work": {"bytes": 160, "calls": 1}}],
      ["bwd_enter", ""], ["bwd_exit", ""], ["optimizer_step"]]}]
  })");
}

std::string error_of(const nlohmann::json& json) {
  try {
    read_trace(json, "w.json");
  } catch (const InputError& error) {
    return error.what();
  }
  return "";
}

TEST(KernelWorkFormat, ReadsEachAmountWithItsQuadraticPartAndWritesBackTheSame) {
  const nlohmann::json json = trace_with_work();
  const Trace trace = read_trace(json, "w.json");
  ASSERT_TRUE(trace.has_kernel_work());
  const std::vector<TraceEvent> events = events_for(trace.steps[0], 0);
  const KernelWork& forward = events[1].forward_work;
  EXPECT_EQ(forward.flops, 512.0);
  EXPECT_EQ(forward.bytes, 128.0);
  EXPECT_EQ(forward.bytes_quadratic, 32.0);
  EXPECT_EQ(forward.transcendentals, 10.0);
  EXPECT_EQ(forward.calls, 3);
  EXPECT_EQ(events[1].backward_work.flops, 1024.0);
  EXPECT_EQ(events[1].backward_work.transcendentals, 0.0) << "a key left out is none of that work";
  EXPECT_EQ(events[1].flops, -1.0) << "recorded work leaves the flops place to derive from shapes";
  EXPECT_EQ(events[3].forward_work.transcendentals_quadratic, 40.0);
  EXPECT_EQ(events[3].backward_work.bytes, 160.0);
  const nlohmann::json written = trace_to_json(trace);
  EXPECT_EQ(written["steps"][0]["events"][1][4]["forward_work"],
            nlohmann::json::parse(R"({"flops": 512, "bytes": {"linear": 96, "quadratic": 32},
                                      "transcendentals": 10, "calls": 3})"));
  EXPECT_EQ(read_trace(nlohmann::json::parse(trace_to_text(trace)), "again.json").steps[0].items, trace.steps[0].items);
  EXPECT_FALSE(read_trace(nlohmann::json::parse(R"({"zero3_trace": 1, "modules": [["", "Net"]], "params": [],
      "steps": [{"events": [["enter", ""], ["exit", ""], ["backward"], ["optimizer_step"]]}]})"), "old.json")
                   .has_kernel_work());
}

TEST(KernelWorkFormat, BadWorkIsAnErrorNamingTheFileTheJsonPathAndWhatWasExpected) {
  struct Case {
    const char* what;
    nlohmann::json work;
    const char* path;
    const char* says;  // what was expected
  };
  const std::vector<Case> cases = {
      {"negative bytes", {{"bytes", -1}}, "w.json: at /steps/0/events/1/4/forward_work/bytes", "expected"},
      {"an unknown key", {{"flops", 1}, {"seconds", 2}}, "w.json: at /steps/0/events/1/4/forward_work/seconds",
       "allowed: flops, bytes, transcendentals, calls"},
      {"an empty object", nlohmann::json::object(), "w.json: at /steps/0/events/1/4/forward_work", "at least one"},
      {"fractional calls", {{"calls", 1.5}}, "w.json: at /steps/0/events/1/4/forward_work/calls", "expected"},
      {"a quadratic part of a string", {{"flops", {{"quadratic", "x"}}}},
       "w.json: at /steps/0/events/1/4/forward_work/flops/quadratic", "expected"},
  };
  for (const Case& bad : cases) {
    SCOPED_TRACE(bad.what);
    nlohmann::json json = trace_with_work();
    json["steps"][0]["events"][1][4]["forward_work"] = bad.work;
    const std::string error = error_of(json);
    EXPECT_NE(error.find(bad.path), std::string::npos) << error;
    EXPECT_NE(error.find(bad.says), std::string::npos) << error;
  }
  nlohmann::json json = trace_with_work();
  json["steps"][0]["events"][3][2]["backward_work"] = "lots";
  EXPECT_NE(error_of(json).find("at /steps/0/events/3/2/backward_work"), std::string::npos) << error_of(json);
}

TEST(KernelWorkFormat, RescalingGrowsTheLinearPartsWithTokensTheQuadraticWithSeqLenSquaredAndKeepsCalls) {
  const Trace trace = read_trace(trace_with_work(), "w.json");
  // Twice the batch and twice the sequence: tokens x4, batch x seq_len^2 x8.
  const Trace scaled = rescale_trace(trace, {.batch = 4, .seq_len = 8}, "w.json");
  const std::vector<TraceEvent> events = events_for(scaled.steps[0], 0);
  EXPECT_EQ(events[1].forward_work.flops, 4.0 * 512);
  EXPECT_EQ(events[1].forward_work.bytes, 4.0 * 96 + 8.0 * 32);
  EXPECT_EQ(events[1].forward_work.bytes_quadratic, 8.0 * 32);
  EXPECT_EQ(events[1].forward_work.calls, 3) << "a kernel runs once whatever its size";
  EXPECT_EQ(events[3].forward_work.transcendentals, 8.0 * 40);
  EXPECT_EQ(events[1].backward_work.bytes, 4.0 * 200);
}

// What a recorded gpt-tiny run says of its work. gpt-tiny's blocks: ln_1, attn (qkv, proj),
// ln_2, mlp (fc, gelu, proj); the LM head and the loss's cross-entropy over the vocabulary.
TEST(KernelWorkRecorder, EachModuleCarriesItsOwnForwardAndBackwardWorkAndTheLossItsOwn) {
  DistributedRunOptions options;
  options.model = "gpt-tiny";
  options.seed = 3;
  options.world = 2;
  options.steps = 1;
  options.config.zero.stage = 3;
  const DistributedRunResult run = run_distributed(options);
  ASSERT_TRUE(run.sim.all_ok()) << run.sim.summary();
  const Trace trace = record_training_trace(options, run.sim.event_log());
  ASSERT_FALSE(trace.divergent()) << "equal shapes on every rank: equal work, one SPMD event list";
  ASSERT_TRUE(trace.has_kernel_work());
  int linears = 0, attentions = 0;
  double forward_flops = 0.0, backward_flops = 0.0;
  const TraceEvent* loss = nullptr;
  for (const TraceItem& item : trace.steps[0].items) {
    const TraceEvent& event = item.event;
    if (event.kind == EventKind::backward) loss = &event;
    if (event.kind != EventKind::call && event.kind != EventKind::enter) continue;
    forward_flops += event.forward_work.flops;
    backward_flops += event.backward_work.flops;
    const TraceModule& module = trace.modules[static_cast<size_t>(event.module)];
    SCOPED_TRACE(module.name + " (" + module.type + ")");
    if (module.type == "linear") {
      const auto weight = std::find_if(trace.params.begin(), trace.params.end(),
                                       [&](const TraceParam& param) { return param.name == module.name + ".weight"; });
      ASSERT_NE(weight, trace.params.end());
      const double product = 2.0 * static_cast<double>(trace.tokens * weight->shape[0] * weight->shape[1]);
      EXPECT_EQ(event.forward_work.flops, product) << "y = x W^T, the bias added as bytes";
      EXPECT_EQ(event.backward_work.flops, 2.0 * product) << "dx = dy W and dW = dy^T x";
      EXPECT_EQ(event.forward_work.flops_quadratic, 0.0);
      EXPECT_GT(event.forward_work.bytes, 0.0);
      ++linears;
    }
    if (event.forward_work.flops_quadratic > 0.0) {
      // Attention's own work, its projections' excluded: the per-head products and the softmax.
      EXPECT_EQ(event.forward_work.flops_quadratic, event.forward_work.flops);
      EXPECT_GT(event.forward_work.transcendentals_quadratic, 0.0);
      EXPECT_GT(event.backward_work.flops_quadratic, event.forward_work.flops_quadratic);
      ++attentions;
    }
  }
  EXPECT_GT(linears, 0);
  EXPECT_GT(attentions, 0);
  EXPECT_GT(backward_flops, forward_flops);
  ASSERT_NE(loss, nullptr);
  const int64_t vocab = trace.run->model_spec.at("vocab").get<int64_t>();
  // The cross-entropy's exp per logit in the loss's forward; its gradient in the loss's backward.
  EXPECT_GE(loss->forward_work.transcendentals, static_cast<double>(trace.tokens * vocab));
  EXPECT_GE(loss->backward_work.bytes, 2.0 * 4 * static_cast<double>(trace.tokens * vocab));
  EXPECT_EQ(loss->backward_work.transcendentals, 0.0);
}

}  // namespace
}  // namespace zero3
