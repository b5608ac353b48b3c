// Rescaling a trace to the run's micro-batch, sequence length and gradient accumulation, and the
// format's batch, seq_len and quadratic amounts.
#include "traces/format/trace_scaling.h"

#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "traces/replay/replay.h"

namespace zero3 {
namespace {

// Two sequences of 8 tokens; "attn" keeps 64 bytes that grow with tokens and 32 with seq_len^2,
// and computes 1000 flops, 400 of them quadratic.
nlohmann::json shaped_trace() {
  return nlohmann::json::parse(R"({
    "zero3_trace": 1, "name": "shaped", "dtype": "bf16", "batch": 2, "seq_len": 8,
    "modules": [["", "Net"], ["fc", "Linear"], ["attn", "Attention"]],
    "params": [[0, "fc.weight", [16, 16]], [1, "attn.weight", [16, 16]]],
    "steps": [{"ranks": "all", "repeat": 2, "events": [
      ["enter", ""], ["call", "fc", null, 512], ["call", "attn", {"linear": 600, "quadratic": 400},
      {"linear": 64, "quadratic": 32}], ["exit", ""], ["backward", 100], ["optimizer_step"]]}]
  })");
}

const TraceEvent& attn_call(const Trace& trace) { return trace.steps.at(0).items.at(2).event; }

std::string rescale_error(const nlohmann::json& json, const RunShape& shape) {
  try {
    rescale_trace(read_trace(json, "t.json"), shape, "t.json");
  } catch (const InputError& error) {
    return error.what();
  }
  return "";
}

TEST(TraceScaling, ReadsBatchSeqLenAndQuadraticAmounts) {
  const Trace trace = read_trace(shaped_trace(), "t.json");
  EXPECT_EQ(trace.batch, 2);
  EXPECT_EQ(trace.seq_len, 8);
  EXPECT_EQ(trace.tokens, 16);  // derived: batch x seq_len
  EXPECT_EQ(attn_call(trace).flops, 1000.0);
  EXPECT_EQ(attn_call(trace).flops_quadratic, 400.0);
  EXPECT_EQ(attn_call(trace).activation_bytes, 96);
  EXPECT_EQ(attn_call(trace).activation_quadratic_bytes, 32);
  const Trace again = read_trace(trace_to_json(trace), "again.json");
  EXPECT_EQ(trace_to_json(again), trace_to_json(trace));
  EXPECT_EQ(attn_call(again), attn_call(trace));
}

TEST(TraceScaling, RejectsAHalfGivenOrInconsistentShape) {
  nlohmann::json half = shaped_trace();
  half.erase("seq_len");
  try {
    read_trace(half, "t.json");
    FAIL() << "batch without seq_len was accepted";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("at /batch"), std::string::npos) << error.what();
  }
  nlohmann::json disagreeing = shaped_trace();
  disagreeing["tokens"] = 15;
  try {
    read_trace(disagreeing, "t.json");
    FAIL() << "tokens disagreeing with batch x seq_len was accepted";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("batch x seq_len = 16"), std::string::npos) << error.what();
  }
}

TEST(TraceScaling, BatchScalesEverythingLinearly) {
  const Trace trace = rescale_trace(read_trace(shaped_trace(), "t.json"), {.batch = 8}, "t.json");
  EXPECT_EQ(trace.batch, 8);
  EXPECT_EQ(trace.tokens, 64);
  EXPECT_EQ(attn_call(trace).flops, 4000.0);
  EXPECT_EQ(attn_call(trace).activation_bytes, 384);
  EXPECT_EQ(trace.steps[0].items[1].event.activation_bytes, 2048);  // fc
  EXPECT_EQ(trace.steps[0].items[4].event.activation_bytes, 400);   // the loss's, at backward
}

// A module's output is one row per token: it grows with the batch and with the sequence length
// alike, never with its square.
TEST(TraceScaling, OutputBytesGrowWithTokens) {
  nlohmann::json json = shaped_trace();
  json["steps"][0]["events"][1] = {"call", "fc", nullptr, 512, {{"output_bytes", 256}}};
  const Trace recorded = read_trace(json, "t.json");
  const int64_t bytes = recorded.steps[0].items[1].event.output_bytes;
  const Trace doubled = rescale_trace(recorded, {.batch = 2 * recorded.batch}, "t.json");
  EXPECT_EQ(doubled.steps[0].items[1].event.output_bytes, 2 * bytes);
  const Trace longer = rescale_trace(recorded, {.seq_len = 4 * recorded.seq_len}, "t.json");
  EXPECT_EQ(longer.steps[0].items[1].event.output_bytes, 4 * bytes);
  EXPECT_EQ(attn_call(longer).output_bytes, 0);  // not said: stays unsaid
}

// A module's inputs grow with tokens as its output does; its transient peaks as its kept bytes do,
// their quadratic parts (eager attention's probabilities) with the sequence length once more.
TEST(TraceScaling, InputsAndTransientPeaksGrowAsWhatTheyMeasure) {
  nlohmann::json json = shaped_trace();
  json["steps"][0]["events"][1] = {"call", "fc", nullptr, 512,
                                   {{"input_bytes", 64}, {"forward_transient", {{"linear", 100}, {"quadratic", 40}}},
                                    {"backward_transient", 30}}};
  const Trace recorded = read_trace(json, "t.json");
  const Trace longer = rescale_trace(recorded, {.seq_len = 2 * recorded.seq_len}, "t.json");
  const TraceEvent& event = longer.steps[0].items[1].event;
  EXPECT_EQ(event.input_bytes, 2 * 64);
  EXPECT_EQ(event.forward_transient_quadratic_bytes, 4 * 40);
  EXPECT_EQ(event.forward_transient_bytes, 2 * 100 + 4 * 40);
  EXPECT_EQ(event.backward_transient_bytes, 2 * 30);
  const Trace wider = rescale_trace(recorded, {.batch = 3 * recorded.batch}, "t.json");
  EXPECT_EQ(wider.steps[0].items[1].event.forward_transient_bytes, 3 * 140);
}

TEST(TraceScaling, SequenceLengthGrowsTheQuadraticPartTwiceAsFast) {
  const Trace trace = rescale_trace(read_trace(shaped_trace(), "t.json"), {.seq_len = 16}, "t.json");
  EXPECT_EQ(trace.tokens, 32);
  EXPECT_EQ(attn_call(trace).flops, 600.0 * 2 + 400.0 * 4);
  EXPECT_EQ(attn_call(trace).flops_quadratic, 1600.0);
  EXPECT_EQ(attn_call(trace).activation_bytes, 64 * 2 + 32 * 4);
}

TEST(TraceScaling, AccumulationRepeatsTheMicroStepBeforeTheOptimizerStep) {
  const Trace once = read_trace(shaped_trace(), "t.json");
  const Trace trace = rescale_trace(once, {.micro_steps = 4}, "t.json");
  EXPECT_EQ(micro_steps_of(once.steps[0]), 1);
  EXPECT_EQ(micro_steps_of(trace.steps[0]), 4);
  EXPECT_EQ(trace.steps[0].items.size(), 4 * 5 + 1u);
  EXPECT_EQ(trace.steps[0].items.back().event.kind, EventKind::optimizer_step);
  // The engine sees four micro-steps: each reduce-scatters its gradients.
  ReplayOptions options;
  options.world = 2;
  options.config.bf16 = true;
  const ShapeReplayResult one = replay_trace(once, options);
  const ShapeReplayResult four = replay_trace(trace, options);
  EXPECT_EQ(four.ranks[0].counters.reduce_scatters, 4 * one.ranks[0].counters.reduce_scatters);
}

TEST(TraceScaling, RefusesWhatTheTraceCannotSay) {
  nlohmann::json unshaped = shaped_trace();
  unshaped.erase("batch");
  unshaped.erase("seq_len");
  const std::string batch = rescale_error(unshaped, {.batch = 4});
  EXPECT_NE(batch.find("t.json: at /batch"), std::string::npos) << batch;
  EXPECT_NE(batch.find("record_torch_trace.py"), std::string::npos) << batch;
  EXPECT_EQ(rescale_error(unshaped, {.micro_steps = 3}), "");  // accumulation needs no shape

  const Trace twice = rescale_trace(read_trace(shaped_trace(), "t.json"), {.micro_steps = 2}, "t.json");
  try {
    rescale_trace(twice, {.micro_steps = 3}, "t.json");
    FAIL() << "a two-micro-step step was rescaled to three";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("at /steps/0: the step was recorded with 2 micro-steps"),
              std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace zero3
