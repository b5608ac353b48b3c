// The memory verdict of a target case that asked for it (case.json `measure_memory`, PROTOCOL.md
// "Memory"): a rank whose tensor memory grows from step to step with nothing new to hold.
//
// Each rank answers, per optimizer step, `held_bytes` (live tensor bytes when the step ends) and
// `peak_bytes` (the most during it). Healthy training holds the same bytes to the byte from the
// second step on (the first creates AdamW's moments and the frameworks' lazy buffers), while its
// peaks carry transient spikes of up to one collective bucket that gloo frees late; measured on
// 1,160 healthy rank-runs of three frameworks and 136 leaking ones (PROTOCOL.md). So a leak is held
// bytes that grow at every step after the second, with the last peak above the second step's.
//
//   if (auto growth = memory_growth(answer["framework"])) std::puts(growth->c_str());
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace zero3 {

// The fewest steps the rule can judge: two comparisons after the second step.
constexpr int64_t kMemoryStepsMin = 4;

// What grew, naming the rank and its per-step bytes; nullopt when no rank grows or the answer
// carries no measurement. json exceptions when the fields are not lists of per-step integers.
std::optional<std::string> memory_growth(const nlohmann::json& framework);

}  // namespace zero3
