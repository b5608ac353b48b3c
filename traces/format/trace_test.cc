// The trace format: reading, validation errors with JSON paths, versioning, per-rank groups, the
// writer's round trip, the shipped traces, and traces recorded from training runs.
#include <algorithm>
#include <filesystem>

#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "traces/format/trace.h"
#include "traces/format/trace_recorder.h"

namespace zero3 {
namespace {

// A two-layer model: root "" with "a" (Linear) and "b" (Linear), and b using a's weight too.
nlohmann::json small_trace() {
  return nlohmann::json::parse(R"({
    "zero3_trace": 1, "name": "small", "dtype": "bf16", "tokens": 4,
    "modules": [["", "Net"], ["a", "Linear"], ["b", "Linear"]],
    "params": [[0, "a.weight", [8, 4]], [1, "a.bias", [8]], [2, "b.weight", [2, 8], "f32", "b"]],
    "steps": [{"ranks": "all", "repeat": 2, "events": [
      ["enter", ""], ["call", "a", 1000, 64],
      ["enter", "b", null, 0, {"output_bytes": 32}], ["param", "b", "b.weight"], ["param", "b", "a.weight"], ["exit", "b"],
      ["raw", "", "a.bias"], ["exit", ""], ["raw", null, "a.bias"], ["backward"], ["bwd_enter", ""], ["bwd_exit", ""], ["optimizer_step"]]}]
  })");
}

std::string error_of(const nlohmann::json& json) {
  try {
    read_trace(json, "t.json");
  } catch (const InputError& error) {
    return error.what();
  }
  return "";
}

TEST(TraceReader, ReadsTablesEventsAndTheirDefaults) {
  const Trace trace = read_trace(small_trace(), "t.json");
  ASSERT_EQ(trace.modules.size(), 3u);
  ASSERT_EQ(trace.params.size(), 3u);
  EXPECT_EQ(trace.params[0].dtype, "bf16");   // the trace's dtype unless a parameter says otherwise
  EXPECT_EQ(trace.params[2].dtype, "f32");
  EXPECT_EQ(trace.params[1].owner, 1);        // the owner is the name's prefix
  EXPECT_EQ(trace.steps.at(0).repeat, 2);
  const std::vector<TraceEvent> events = events_for(trace.steps[0], 5);
  ASSERT_EQ(events.size(), 13u);
  EXPECT_EQ(events[1].kind, EventKind::call);
  EXPECT_EQ(events[1].flops, 1000.0);
  EXPECT_EQ(events[1].activation_bytes, 64);
  EXPECT_EQ(events[1].output_bytes, 0);  // what a checkpointed module keeps: unknown unless given
  EXPECT_EQ(events[2].output_bytes, 32);
  EXPECT_EQ(events[6].kind, EventKind::raw);
  EXPECT_EQ(events[6].module, 0);   // "" is the root
  EXPECT_EQ(events[8].kind, EventKind::raw);
  EXPECT_EQ(events[8].module, -1);  // null: outside every module
  EXPECT_FALSE(trace.divergent());
  EXPECT_EQ(trace.parameter_elements(), 32 + 8 + 16);
}

TEST(TraceReader, RejectsANewerVersionNamingTheVersionAndPath) {
  nlohmann::json json = small_trace();
  json["zero3_trace"] = 2;
  const std::string error = error_of(json);
  EXPECT_NE(error.find("t.json"), std::string::npos) << error;
  EXPECT_NE(error.find("/zero3_trace"), std::string::npos) << error;
  EXPECT_NE(error.find("newer"), std::string::npos) << error;
}

TEST(TraceReader, ErrorsNameTheFileTheJsonPathAndWhatWasExpected) {
  nlohmann::json json = small_trace();
  json["steps"][0]["events"][3] = {"param", "b", "c.weight"};
  EXPECT_NE(error_of(json).find("t.json: at /steps/0/events/3/2: expected the name of a listed parameter"),
            std::string::npos)
      << error_of(json);
  json = small_trace();
  json["params"][2][4] = "a";
  EXPECT_NE(error_of(json).find("/params/2/4"), std::string::npos) << error_of(json);
  json = small_trace();
  json["surprise"] = 1;
  EXPECT_NE(error_of(json).find("unknown key 'surprise'"), std::string::npos) << error_of(json);
}

TEST(TraceReader, AParameterOptionsObjectMarksItFrozenAndTheWriterKeepsIt) {
  nlohmann::json json = small_trace();
  json["params"][1] = {1, "a.bias", {8}, {{"requires_grad", false}}};        // after the shape
  json["params"][2] = {2, "b.weight", {2, 8}, "f32", "b", {{"requires_grad", true}}};  // after the owner
  const Trace trace = read_trace(json, "t.json");
  EXPECT_TRUE(trace.params[0].requires_grad);
  EXPECT_FALSE(trace.params[1].requires_grad);
  EXPECT_TRUE(trace.params[2].requires_grad);
  EXPECT_EQ(trace.params[2].dtype, "f32");
  const nlohmann::json written = trace_to_json(trace);
  EXPECT_EQ(written["params"][1].back(), (nlohmann::json{{"requires_grad", false}}));
  EXPECT_FALSE(read_trace(written, "again.json").params[1].requires_grad);
  json["params"][1] = {1, "a.bias", {8}, {{"frozen", true}}};
  EXPECT_NE(error_of(json).find("/params/1/3"), std::string::npos) << error_of(json);
  EXPECT_NE(error_of(json).find("frozen"), std::string::npos) << error_of(json);
  json["params"][1] = {1, "a.bias", {8}, {{"requires_grad", "no"}}};
  EXPECT_NE(error_of(json).find("/params/1/3/requires_grad"), std::string::npos) << error_of(json);
}

// The input fuzz's finding: a repeat of 2^20 made `zero3 replay --timeline` run for minutes and
// write gigabytes. The steps of a trace are bounded in all, the error naming the step that crosses.
TEST(TraceReader, RefusesMoreThanTenThousandReplayedStepsInAllNamingTheRepeat) {
  nlohmann::json json = small_trace();
  json["steps"][0]["repeat"] = 10'000;
  EXPECT_EQ(error_of(json), "");
  json["steps"].push_back(json["steps"][0]);
  json["steps"][1]["repeat"] = 1;
  const std::string error = error_of(json);
  EXPECT_NE(error.find("t.json: at /steps/1/repeat: expected a repeat that keeps the trace's steps in all"),
            std::string::npos)
      << error;
  json["steps"][1].erase("repeat");  // the default repeat of 1 crosses too: the step itself is named
  EXPECT_NE(error_of(json).find("at /steps/1: expected a repeat"), std::string::npos) << error_of(json);
}

TEST(TraceReader, RejectsEventsThatDoNotNestOrComeFromAModuleThatIsNotRunning) {
  nlohmann::json json = small_trace();
  json["steps"][0]["events"][5] = {"exit", "a"};
  EXPECT_NE(error_of(json).find("/steps/0/events/5: expected \"exit\" of the innermost open module"), std::string::npos)
      << error_of(json);
  json = small_trace();
  json["steps"][0]["events"][4] = {"param", "", "a.weight"};
  EXPECT_NE(error_of(json).find("a \"param\" access by the innermost running module"), std::string::npos)
      << error_of(json);
  json = small_trace();
  json["steps"][0]["events"].erase(json["steps"][0]["events"].end() - 1);
  EXPECT_NE(error_of(json).find("ends with [\"optimizer_step\"]"), std::string::npos) << error_of(json);
}

TEST(TraceReader, PerRankGroupsGiveRankRTheListRModN) {
  nlohmann::json json = small_trace();
  json["world"] = 2;
  json["steps"][0]["ranks"] = 2;
  json["steps"][0]["events"][1] = nlohmann::json::parse(R"({"per_rank": [[["call", "a"]], []]})");
  const Trace trace = read_trace(json, "t.json");
  EXPECT_TRUE(trace.divergent());
  EXPECT_EQ(trace.divergent_ranks(), 2);
  EXPECT_EQ(events_for(trace.steps[0], 0).size(), 13u);
  EXPECT_EQ(events_for(trace.steps[0], 1).size(), 12u);
  EXPECT_EQ(events_for(trace.steps[0], 3).size(), 12u);
  json["steps"][0]["ranks"] = "all";
  EXPECT_NE(error_of(json).find("a rank count"), std::string::npos) << error_of(json);
}

TEST(TraceWriter, WhatItWritesReadsBackTheSame) {
  const Trace trace = read_trace(small_trace(), "t.json");
  const Trace again = read_trace(nlohmann::json::parse(trace_to_text(trace)), "again.json");
  EXPECT_EQ(trace_to_json(again), trace_to_json(trace));
  EXPECT_EQ(again.steps[0].items, trace.steps[0].items);
}

// A collective log's calls say their group and level in two trailing elements; a world call with
// no level keeps the ten it always had, so older traces read and write unchanged.
TEST(TraceWriter, CollectivesKeepTheirGroupAndLevelAndWorldCallsKeepTenElements) {
  Trace trace = read_trace(small_trace(), "t.json");
  trace.collectives = {{{.sequence = 0, .op = "all_gather", .dtype = "bf16", .count = 4, .bytes = 64, .module = "a",
                         .phase = "forward", .step = 0, .start_s = 0.0, .duration_s = 1e-6},
                        {.sequence = 1, .op = "all_gather", .dtype = "bf16", .count = 4, .bytes = 32, .module = "a",
                         .phase = "backward", .step = 0, .start_s = 1e-6, .duration_s = 1e-7, .group = "block",
                         .level = "intra-node"}}};
  const nlohmann::json json = trace_to_json(trace);
  EXPECT_EQ(json.at("collectives").at("calls").at(0).size(), 10u);  // one list for all ranks
  EXPECT_EQ(json.at("collectives").at("calls").at(1).size(), 12u);
  const Trace again = read_trace(nlohmann::json::parse(trace_to_text(trace)), "again.json");
  EXPECT_EQ(again.collectives, trace.collectives);
  nlohmann::json bad = json;
  bad["collectives"]["calls"][1][11] = "cross-rack";
  EXPECT_NE(error_of(bad).find("/collectives/calls/1/11"), std::string::npos) << error_of(bad);
}

// Activation checkpointing keeps a module's output: enter and call events may say its bytes in a
// trailing options object, which the writer keeps and leaves out when there is none.
TEST(TraceWriter, OutputBytesReadBackTheSameAndAreLeftOutWhenZero) {
  nlohmann::json json = small_trace();
  json["steps"][0]["events"][1] = {"call", "a", 1000, 64, {{"output_bytes", 128}}};
  json["steps"][0]["events"][2] = {"enter", "b", nullptr, 0, {{"output_bytes", 32}}};  // flops derived, no bytes kept
  const Trace trace = read_trace(json, "t.json");
  const std::vector<TraceEvent> events = events_for(trace.steps[0], 0);
  EXPECT_EQ(events[1].output_bytes, 128);
  EXPECT_EQ(events[1].activation_bytes, 64);
  EXPECT_EQ(events[2].output_bytes, 32);
  EXPECT_LT(events[2].flops, 0.0);
  EXPECT_EQ(events[2].activation_bytes, 0);
  EXPECT_EQ(events[0].output_bytes, 0);  // not said
  const nlohmann::json written = trace_to_json(trace);
  EXPECT_EQ(written["steps"][0]["events"][1], json["steps"][0]["events"][1]);
  EXPECT_EQ(written["steps"][0]["events"][2], json["steps"][0]["events"][2]);
  const Trace again = read_trace(nlohmann::json::parse(trace_to_text(trace)), "again.json");
  EXPECT_EQ(again.steps[0].items, trace.steps[0].items);
  // Without output bytes the events are written as before.
  const nlohmann::json plain = trace_to_json(read_trace(small_trace(), "t.json"));
  EXPECT_EQ(plain["steps"][0]["events"], small_trace()["steps"][0]["events"]);
}

TEST(TraceReader, RejectsOutputBytesOutsideEnterAndCallAndBelowZeroNamingThePath) {
  nlohmann::json json = small_trace();
  json["steps"][0]["events"][5] = {"exit", "b", {{"output_bytes", 32}}};
  std::string error = error_of(json);
  EXPECT_NE(error.find("t.json: at /steps/0/events/5/2/output_bytes: expected no \"output_bytes\" on \"exit\" events"),
            std::string::npos) << error;
  json = small_trace();
  json["steps"][0]["events"][9] = {"backward", {{"output_bytes", 4}}};
  error = error_of(json);
  EXPECT_NE(error.find("at /steps/0/events/9/1/output_bytes: expected no \"output_bytes\" on \"backward\" events"),
            std::string::npos) << error;
  json = small_trace();
  json["steps"][0]["events"][1] = {"call", "a", 1000, 64, {{"output_bytes", -1}}};
  error = error_of(json);
  EXPECT_NE(error.find("t.json: at /steps/0/events/1/4/output_bytes"), std::string::npos) << error;
  json["steps"][0]["events"][1] = {"call", "a", {{"output_bytes", 8}}};  // in the flops' place
  error = error_of(json);
  EXPECT_NE(error.find("at /steps/0/events/1/2/output_bytes: expected \"output_bytes\" in the options object"),
            std::string::npos) << error;
  json["steps"][0]["events"][1] = {"call", "a", 1000, 64, {{"kept", 8}}};
  EXPECT_NE(error_of(json).find("/steps/0/events/1/4/kept"), std::string::npos) << error_of(json);
}

// A PyTorch recorder's memory amounts (tools/recorders/record_memory_trace.py): a module's inputs and the
// transient peaks of its own ops (and of the loss's, on the backward event), with quadratic parts,
// and the recorder that measured them; they read back the same and are refused where they do not belong.
TEST(TraceReader, RecordedTransientsAndInputsReadBackTheSameAndAreRefusedElsewhere) {
  nlohmann::json json = small_trace();
  json["recorder"] = {{"tool", "tools/recorders/record_memory_trace.py"}, {"torch", "2.15.0"}, {"transformers", nullptr}};
  json["steps"][0]["events"][1] = {"call", "a", 1000, 64,
                                   {{"input_bytes", 16}, {"forward_transient", {{"linear", 8}, {"quadratic", 24}}},
                                    {"backward_transient", 40}}};
  json["steps"][0]["events"][9] = {"backward", 12, {{"forward_transient", 6}, {"backward_transient", 18}}};
  const Trace trace = read_trace(json, "t.json");
  const std::vector<TraceEvent> events = events_for(trace.steps[0], 0);
  EXPECT_EQ(events[1].input_bytes, 16);
  EXPECT_EQ(events[1].forward_transient_bytes, 32);
  EXPECT_EQ(events[1].forward_transient_quadratic_bytes, 24);
  EXPECT_EQ(events[1].backward_transient_bytes, 40);
  EXPECT_EQ(events[9].activation_bytes, 12);
  EXPECT_EQ(events[9].forward_transient_bytes, 6);
  EXPECT_EQ(events[9].backward_transient_bytes, 18);
  EXPECT_EQ(trace.recorder.at("tool"), "tools/recorders/record_memory_trace.py");
  const nlohmann::json written = trace_to_json(trace);
  EXPECT_EQ(written["steps"][0]["events"][1], json["steps"][0]["events"][1]);
  EXPECT_EQ(written["steps"][0]["events"][9], json["steps"][0]["events"][9]);
  EXPECT_EQ(written["recorder"], json["recorder"]);
  EXPECT_EQ(read_trace(nlohmann::json::parse(trace_to_text(trace)), "again.json").steps[0].items, trace.steps[0].items);

  nlohmann::json bad = small_trace();
  bad["steps"][0]["events"][9] = {"backward", 12, {{"input_bytes", 4}}};
  EXPECT_NE(error_of(bad).find("t.json: at /steps/0/events/9/2/input_bytes"), std::string::npos) << error_of(bad);
  bad = small_trace();
  bad["steps"][0]["events"][1] = {"call", "a", 1000, 64, {{"forward_transient", -1}}};
  EXPECT_NE(error_of(bad).find("/steps/0/events/1/4/forward_transient"), std::string::npos) << error_of(bad);
  bad = small_trace();
  bad["recorder"] = {{"torch", "2.15.0"}};
  EXPECT_NE(error_of(bad).find("t.json: at /recorder"), std::string::npos) << error_of(bad);
}

TEST(TraceReader, AcceptsAFuzzerCaseFileAndChecksItsRunSection) {
  nlohmann::json json = nlohmann::json::parse(R"({
    "zero3_trace": 1, "source": "fuzz", "model_spec": "mlp-tiny",
    "run": {"world": 3, "seed": 9, "steps": 2, "config": {"gradient_accumulation_steps": 2},
            "inject": ["gas-scale-twice"], "faults": "none"},
    "expected": {"property": "equal_to_ddp", "message": "..."}})");
  const Trace trace = read_trace(json, "case.json");
  ASSERT_TRUE(trace.run.has_value());
  EXPECT_EQ(trace.run->world, 3);
  EXPECT_EQ(trace.run->inject, std::vector<std::string>{"gas-scale-twice"});
  EXPECT_FALSE(trace.has_events());
  json["run"]["inject"][0] = "no_such_bug";
  EXPECT_NE(error_of(json).find("/run/inject/0"), std::string::npos) << error_of(json);
  json["run"]["inject"][0] = "gas-scale-twice";
  json["run"]["config"]["gradient_accumulation_steps"] = 0;
  EXPECT_NE(error_of(json).find("/run/config"), std::string::npos) << error_of(json);
}

TEST(ShippedTraces, EveryShippedTraceReadsAndValidates) {
  int traces = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(ZERO3_TRACES_DIR) + "/models")) {
    SCOPED_TRACE(entry.path().string());
    const Trace trace = load_trace(entry.path().string());
    EXPECT_TRUE(trace.has_events());
    EXPECT_GT(trace.parameter_elements(), 0);
    ++traces;
  }
  EXPECT_GE(traces, 7);
}

TEST(TraceRecorder, AnSpmdRunIsStoredOnceForAllRanksWithItsCollectives) {
  DistributedRunOptions options;
  options.model = "gpt-tiny";
  options.seed = 3;
  options.world = 2;
  options.steps = 2;
  options.config.zero.stage = 3;
  const DistributedRunResult run = run_distributed(options);
  ASSERT_TRUE(run.sim.all_ok()) << run.sim.summary();
  const Trace trace = record_training_trace(options, run.sim.event_log());
  EXPECT_FALSE(trace.divergent());
  ASSERT_EQ(trace.steps.size(), 1u);  // two identical steps: one entry repeated
  EXPECT_EQ(trace.steps[0].repeat, 2);
  ASSERT_EQ(trace.collectives.size(), 1u);
  EXPECT_FALSE(trace.collectives[0].empty());
  ASSERT_TRUE(trace.run.has_value());
  // Each call carries the bytes its ops keep for backward and those of its output (what
  // checkpointing it keeps), and the backward event the loss's.
  int64_t module_bytes = 0, output_bytes = 0, loss_bytes = 0;
  for (const TraceItem& item : trace.steps[0].items) {
    if (item.event.kind == EventKind::call || item.event.kind == EventKind::enter) {
      module_bytes += item.event.activation_bytes;
      output_bytes += item.event.output_bytes;
    }
    if (item.event.kind == EventKind::backward) loss_bytes += item.event.activation_bytes;
  }
  EXPECT_GT(module_bytes, 0);
  EXPECT_GT(output_bytes, 0);
  EXPECT_EQ(loss_bytes, 4) << "the f32 scalar loss, computed outside every module";
  // Each module's output bytes: a linear layer's is a row of its output features per token, in f32.
  int linears = 0;
  for (const TraceItem& item : trace.steps[0].items) {
    if (item.event.kind != EventKind::call && item.event.kind != EventKind::enter) continue;
    const TraceModule& module = trace.modules[static_cast<size_t>(item.event.module)];
    SCOPED_TRACE(module.name);
    EXPECT_GT(item.event.output_bytes, 0);
    if (module.type != "linear") continue;
    const auto weight = std::find_if(trace.params.begin(), trace.params.end(),
                                     [&](const TraceParam& param) { return param.name == module.name + ".weight"; });
    ASSERT_NE(weight, trace.params.end());
    EXPECT_EQ(item.event.output_bytes, trace.tokens * weight->shape[0] * static_cast<int64_t>(sizeof(float)));
    ++linears;
  }
  EXPECT_GT(linears, 0);
  const Trace again = read_trace(nlohmann::json::parse(trace_to_text(trace)), "recorded.json");
  EXPECT_EQ(again.steps[0].items, trace.steps[0].items);
}

TEST(TraceRecorder, AnMoeRunWhoseRanksRouteDifferentlyKeepsPerRankEvents) {
  DistributedRunOptions options;
  options.model = "moe-tiny";
  options.seed = 1;
  options.world = 4;
  options.steps = 1;
  options.config.zero.stage = 3;
  options.config.zero.leaf_modules = {"moe"};  // the leaf policy lets the ZeRO-3 run itself finish
  const DistributedRunResult run = run_distributed(options);
  const Trace trace = record_training_trace(options, run.sim.event_log());
  EXPECT_TRUE(trace.divergent());
  EXPECT_EQ(trace.divergent_ranks(), 4);
  EXPECT_NO_THROW(read_trace(nlohmann::json::parse(trace_to_text(trace)), "moe.json"));
}

}  // namespace
}  // namespace zero3
