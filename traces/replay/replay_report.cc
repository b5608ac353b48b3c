// Building the replay report from a replay's ranks, collectives and findings.
#include "traces/replay/replay_report.h"

#include <algorithm>
#include <map>

#include "core/tensor/allocator.h"
#include "core/tensor/dtype.h"
#include "core/sharding/partition.h"
#include "traces/replay/memory_estimates.h"

namespace zero3 {

namespace {

nlohmann::json moment_json(const PeakMoment& moment) {
  return {{"bytes", moment.bytes}, {"at_s", moment.at_s}, {"step", moment.step}, {"phase", moment.phase},
          {"module", moment.module}};
}

nlohmann::json model_json(const Trace& trace, int world) {
  std::vector<int64_t> own(trace.modules.size(), 0);
  int64_t shard_elements = 0, padding = 0, last_rank_owned = 0;
  nlohmann::json zero_sized = nlohmann::json::array(), sub_world = nlohmann::json::array();
  for (const TraceParam& param : trace.params) {
    const int64_t numel = shape_numel(param.shape);
    own[static_cast<size_t>(param.owner)] += numel;
    shard_elements += shard_numel(numel, world);
    padding += shard_numel(numel, world) * world - numel;
    last_rank_owned += shard_range(numel, world, world - 1).owned();
    if (numel == 0) zero_sized.push_back(param.name);
    else if (numel < world) sub_world.push_back(param.name);
  }
  const size_t largest = static_cast<size_t>(std::max_element(own.begin(), own.end()) - own.begin());
  return {{"parameters", trace.parameter_elements()},
          {"parameter_tensors", trace.params.size()},
          {"largest_module", {{"name", trace.modules[largest].name}, {"parameters", own[largest]}}},
          {"shard_elements_per_rank", shard_elements},
          {"padding_elements", padding},
          {"last_rank_owned_elements", last_rank_owned},
          {"zero_sized_params", zero_sized},
          {"sub_world_params", sub_world},
          {"shard_world", world},
          {"note", "every rank holds ceil(numel / W) elements of each parameter (W: shard_world, the world or "
                   "HSDP's block); the last ranks own fewer real elements (the rest is zero padding), so shard bytes "
                   "are equal on every rank"}};
}

// Whether the largest per-rank peak fits the device, said for every replay: null (not false) when
// the hardware has no memory size, so a reader cannot mistake "unknown" for "does not fit".
// The peak is judged against the device less its reserve (the CUDA context, the allocator's
// fragmentation: hardware_catalog.h), and the verdict says by how much it fits or misses.
nlohmann::json verdict_json(int64_t peak_bytes, const HardwareChoice& hardware) {
  const bool known = hardware.memory_bytes > 0;
  const double peak = static_cast<double>(peak_bytes);
  const double usable = hardware.usable_bytes();
  const double reserve = hardware.memory_bytes - usable;
  return {{"fits", known ? nlohmann::json(peak <= usable) : nlohmann::json(nullptr)},
          {"peak_bytes", peak_bytes},
          {"capacity_bytes", known ? nlohmann::json(hardware.memory_bytes) : nlohmann::json(nullptr)},
          {"usable_bytes", known ? nlohmann::json(usable) : nlohmann::json(nullptr)},
          {"margin_bytes", known ? nlohmann::json(usable - peak) : nlohmann::json(nullptr)},
          {"reserve", {{"bytes", reserve},
                       {"context_bytes", hardware.reserve_context_bytes},
                       {"fragmentation_fraction", hardware.reserve_fragmentation_fraction},
                       {"source", hardware.reserve_source}}},
          {"fraction", known ? nlohmann::json(peak / hardware.memory_bytes) : nlohmann::json(nullptr)},
          {"hardware", hardware.name},
          {"assumed", hardware.assumed}};
}

nlohmann::json memory_json(const ShapeReplayResult& result, const HardwareChoice& hardware) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankReplay& rank : result.ranks) {
    nlohmann::json categories;
    for (int category = 0; category < kMemoryCategoryCount; ++category) {
      categories[memory_category_name(static_cast<MemoryCategory>(category))] =
          moment_json(rank.peaks[static_cast<size_t>(category)]);
    }
    ranks.push_back({{"rank", rank.rank}, {"peak_total", moment_json(rank.peak_total)}, {"categories", categories}});
  }
  int64_t peak_bytes = 0;
  for (const RankReplay& rank : result.ranks) peak_bytes = std::max(peak_bytes, rank.peak_total.bytes);
  nlohmann::json out = {{"ranks_simulated", result.simulation == "symmetric" ? "rank 0 stands for every rank" : "every rank"},
                        {"per_rank", ranks}};
  if (hardware.memory_bytes > 0) {  // older than `verdict`; kept for the scripts that read them
    out["device_memory_bytes"] = hardware.memory_bytes;
    out["fits_device_memory"] = static_cast<double>(peak_bytes) <= hardware.usable_bytes();
  }
  out["verdict"] = verdict_json(peak_bytes, hardware);
  return out;
}

nlohmann::json model_states_json(const Trace& trace, const TrainConfig& config, const HardwareChoice& hardware,
                                 const ShapeReplayResult& result, const nlohmann::json& model) {
  const RankReplay& rank = result.ranks.at(0);
  auto peak = [&](MemoryCategory category) { return rank.peaks[static_cast<size_t>(category)].bytes; };
  const int64_t param_shard = peak(MemoryCategory::param_shard), grad_shard = peak(MemoryCategory::grad_shard);
  const int64_t optimizer = peak(MemoryCategory::optimizer_state);
  const int64_t host_param_shard = peak(MemoryCategory::host_param_shard);
  const int64_t host_optimizer = peak(MemoryCategory::host_optimizer_state);
  const int64_t measured = param_shard + grad_shard + optimizer + host_param_shard + host_optimizer;
  const int64_t shard_elements = model.at("shard_elements_per_rank").get<int64_t>();
  const int world = result.world;
  const int gpus_per_node = std::min(hardware.gpus_per_node, world);
  const int nodes = (world + gpus_per_node - 1) / gpus_per_node;
  nlohmann::json estimates = nlohmann::json::array();
  for (const DeepSpeedEstimate& estimate : deepspeed_zero3_estimates(
           trace.parameter_elements(), model.at("largest_module").at("parameters").get<int64_t>(), gpus_per_node, nodes)) {
    estimates.push_back({{"offload", estimate.offload}, {"gpu_bytes", estimate.gpu_bytes}, {"cpu_bytes", estimate.cpu_bytes}});
  }
  return {
      {"measured_bytes_per_rank", measured},
      {"measured", {{"param_shard", param_shard}, {"grad_shard", grad_shard}, {"optimizer_state", optimizer},
                    {"host_param_shard", host_param_shard}, {"host_optimizer_state", host_optimizer}}},
      {"device_bytes_per_rank", param_shard + grad_shard + optimizer},
      {"host_bytes_per_rank", host_param_shard + host_optimizer},
      {"host_bytes_per_node", (host_param_shard + host_optimizer) * gpus_per_node},
      {"offload",
       {{"optimizer", offload_device_name(config.zero.offload_optimizer)},
        {"param", offload_device_name(config.zero.offload_param)},
        {"device_to_host_bytes_per_step", rank.device_to_host_bytes / std::max<int64_t>(result.steps, 1)},
        {"host_to_device_bytes_per_step", rank.host_to_device_bytes / std::max<int64_t>(result.steps, 1)}}},
      {"measured_bytes_per_shard_element", shard_elements ? static_cast<double>(measured) / shard_elements : 0.0},
      {"zero_paper_bytes_per_rank",
       zero_paper_stage3_bytes(trace.parameter_elements(), static_cast<int>(model.at("shard_world").get<int64_t>()))},
      {"zero_paper_widths_on_our_shards_bytes", 16 * shard_elements},
      {"gradient_width_difference_bytes", grad_shard - 2 * shard_elements},
      {"compute_dtype", config.bf16 ? "bf16" : "f32"},
      {"explanation",
       "The ZeRO paper counts 2 (fp16 parameters) + 2 (fp16 gradients) + 12 (fp32 master weights, momentum, "
       "variance) bytes per parameter, divided by W. This engine holds the parameter shard in the compute dtype, "
       "the optimizer state at 12 bytes, and accumulates gradient shards in f32 (4 bytes, not 2), so with bf16 "
       "it holds 2 + 4 + 12 = 18 bytes per shard element. zero_paper_widths_on_our_shards_bytes applies the "
       "paper's 16 bytes to our padded shards: it differs from the paper's formula only by padding. "
       "DeepSpeed's own estimator also uses 18 bytes per parameter, plus 4 bytes per element of the largest "
       "layer."},
      {"deepspeed_estimator",
       {{"function", "estimate_zero3_model_states_mem_needs (zero_init=True, additional_buffer_factor=1.5)"},
        {"gpus_per_node", gpus_per_node},
        {"nodes", nodes},
        {"largest_layer_params", model.at("largest_module").at("parameters")},
        {"estimates", estimates}}}};
}

// Elements of the whole buffer: `bytes` is already sized at the collective's own group (a
// block's gather holds G blocks, not W).
int64_t collective_elements(const TraceCollective& call) {
  DType dtype = DType::f32;
  if (!parse_dtype(call.dtype, &dtype)) return 0;
  return call.bytes / dtype_bytes(dtype);
}

// Buffer bytes of the last step's collectives (as predicted_step_s, the steady state) by the level
// of the group each ran on, and by group. FORMAT.md, "Replay report".
nlohmann::json levels_json(const ShapeReplayResult& result) {
  const int64_t last_step = result.steps - 1;
  std::map<std::string, nlohmann::json> by_group;
  int64_t intra_bytes = 0;
  int64_t inter_bytes = 0;
  for (const TraceCollective& call : result.collectives.at(0)) {
    if (call.step != last_step) continue;
    (call.level == "intra-node" ? intra_bytes : inter_bytes) += call.bytes;
    nlohmann::json& group = by_group[call.group];
    if (group.is_null()) group = {{"level", call.level}, {"count", 0}, {"buffer_bytes", 0}, {"time_s", 0.0}};
    group["count"] = group["count"].get<int64_t>() + 1;
    group["buffer_bytes"] = group["buffer_bytes"].get<int64_t>() + call.bytes;
    group["time_s"] = group["time_s"].get<double>() + call.duration_s;
  }
  return {{"step", last_step},
          {"intra_node_bytes", intra_bytes},
          {"inter_node_bytes", inter_bytes},
          {"by_group", by_group},
          {"note", "buffer bytes (the whole gathered / scattered / reduced buffer, as by_op counts them) of rank 0's "
                   "collectives in the last step, split by the level of the group each ran on: intra-node when all "
                   "the group's ranks lie in one node (priced on NVLink), else inter-node (priced on the network)"}};
}

nlohmann::json communication_json(const Trace& trace, const ShapeReplayResult& result) {
  std::map<std::string, nlohmann::json> by_op;
  int64_t sharded_elements = 0;
  for (const TraceCollective& call : result.collectives.at(0)) {
    nlohmann::json& op = by_op[call.op];
    if (op.is_null()) op = {{"count", 0}, {"buffer_bytes", 0}, {"elements", 0}, {"time_s", 0.0}};
    op["count"] = op["count"].get<int64_t>() + 1;
    op["buffer_bytes"] = op["buffer_bytes"].get<int64_t>() + call.bytes;
    op["elements"] = op["elements"].get<int64_t>() + collective_elements(call);
    op["time_s"] = op["time_s"].get<double>() + call.duration_s;
    if (call.op == "all_gather" || call.op == "reduce_scatter") sharded_elements += collective_elements(call);
  }
  const double steps = static_cast<double>(std::max<int64_t>(result.steps, 1));
  const double ddp_elements = 2.0 * static_cast<double>(trace.parameter_elements());
  return {{"rank", 0},
          {"by_op", by_op},
          {"ddp_volume_elements_per_step", ddp_elements},
          {"zero3_volume_elements_per_step", static_cast<double>(sharded_elements) / steps},
          {"ratio_to_ddp", ddp_elements > 0 ? static_cast<double>(sharded_elements) / steps / ddp_elements : 0.0},
          {"bytes_per_step_by_level", levels_json(result)},
          {"note", "volumes in elements of the gathered / scattered buffers, so dtypes do not blur the ratio: "
                   "DDP all-reduces 2Ψ per step; ZeRO-3 gathers Ψ in forward and again in backward and "
                   "reduce-scatters Ψ (the paper's 3Ψ = 1.5x), less what persistent or reused parameters save"}};
}

// Throughput of the last (steady-state) step: tokens per second over all ranks, and per GPU the
// model's flops per second (forward and backward, recompute excluded) against the device's peak
// (MFU), and with the recompute (HFU). Null where there is no step or no time.
nlohmann::json throughput_json(const Trace& trace, const TrainConfig& config, const ShapeReplayResult& result,
                               const HardwareChoice& hardware) {
  const RankReplay& rank = result.ranks.at(0);
  if (rank.step_end_s.empty() || rank.step_model_flops.empty()) return nullptr;
  const double step_s = rank.step_end_s.back() - rank.step_start_s.back();
  if (step_s <= 0.0) return nullptr;
  const double tokens = static_cast<double>(trace.tokens) * static_cast<double>(config.gradient_accumulation_steps) *
                        static_cast<double>(result.world);
  const double model_flops = rank.step_model_flops.back(), recompute_flops = rank.step_recompute_flops.back();
  const double peak = hardware.datasheet_peak_flops > 0 ? hardware.datasheet_peak_flops : hardware.profile.peak_flops;
  return {{"tokens_per_step", tokens},
          {"tokens_per_s", tokens / step_s},
          {"model_flops_per_gpu_per_step", model_flops},
          {"recompute_flops_per_gpu_per_step", recompute_flops},
          {"model_tflops_per_gpu", model_flops / step_s / 1e12},
          {"mfu", peak > 0.0 ? nlohmann::json(model_flops / step_s / peak) : nlohmann::json(nullptr)},
          {"hfu", peak > 0.0 ? nlohmann::json((model_flops + recompute_flops) / step_s / peak) : nlohmann::json(nullptr)},
          {"peak_flops", peak},
          {"note", "model flops: forward and backward (twice the forward) of what replay charges, 2 x tokens x each "
                   "matmul weight's elements plus attention's scores as the trace records them (about 6N + 12 L h s "
                   "per token), a checkpointed module's recompute left out; HFU counts the recompute too; both "
                   "over the device's peak, so they carry the profile's flops_efficiency as a ceiling"}};
}

nlohmann::json time_json(const ShapeReplayResult& result, const HardwareChoice& hardware) {
  const RankReplay& rank = result.ranks.at(0);
  nlohmann::json steps = nlohmann::json::array();
  for (size_t i = 0; i < rank.step_end_s.size(); ++i) {
    double communication_s = 0.0;
    for (const TraceCollective& call : result.collectives.at(0)) {
      if (call.step == static_cast<int64_t>(i)) communication_s += call.duration_s;
    }
    const double duration_s = rank.step_end_s[i] - rank.step_start_s[i];
    const double compute_s = rank.step_compute_s[i];
    const double offload_s = i < rank.step_offload_s.size() ? rank.step_offload_s[i] : 0.0;
    // The step's phases as a measured run reports them (zero3 train --report measured_phases):
    // forward spans, the optimizer step (with offload's copies and host AdamW), backward the rest.
    double forward_s = 0.0, optimizer_s = 0.0;
    for (const TimelineSpan& span : result.simulated(rank).compute) {
      if (span.start_s < rank.step_start_s[i] || span.end_s > rank.step_end_s[i]) continue;
      if (span.category == "phase" && span.name == "forward") forward_s += span.end_s - span.start_s;
      if (span.category == "optimizer" || span.category == "offload") optimizer_s += span.end_s - span.start_s;
    }
    const double recompute_s =
        i < rank.step_recompute_flops.size() ? compute_time_s(hardware.profile, rank.step_recompute_flops[i]) : 0.0;
    steps.push_back({{"step", i}, {"duration_s", duration_s}, {"compute_s", compute_s},
                     {"communication_s", communication_s}, {"offload_s", offload_s},
                     {"exposed_communication_s", std::max(0.0, duration_s - compute_s - offload_s)},
                     {"forward_s", forward_s}, {"backward_s", std::max(0.0, duration_s - forward_s - optimizer_s)},
                     {"recompute_s", recompute_s}, {"optimizer_s", optimizer_s}});
  }
  double slowest_s = 0.0;
  for (const RankReplay& other : result.ranks) {
    if (!other.step_end_s.empty()) slowest_s = std::max(slowest_s, other.step_end_s.back() - other.step_start_s.back());
  }
  return {{"steps", steps},
          {"predicted_step_s", steps.empty() ? 0.0 : steps.back().at("duration_s").get<double>()},
          {"slowest_rank_last_step_s", slowest_s},
          {"hardware", {{"name", hardware.name}, {"link", hardware.link}, {"assumed", hardware.assumed},
                        {"profile", hardware.profile.to_json()}, {"profile_file", hardware.file}}},
          {"model", "compute: flops / (peak_flops x flops_efficiency) on the compute stream; collectives: ring "
                    "alpha-beta on one communication stream, a process group's on NVLink when its ranks share a "
                    "node and on the world's link otherwise; a module waits for its gathers, so communication "
                    "overlaps compute only as far as prefetching runs ahead. The last step follows the recorded "
                    "fetch order (prefetching on): it is the predicted steady-state step."}};
}

// A recorded run's collectives against the replay's, when both describe the same world: the
// replay must issue exactly what the engine issued while recording.
nlohmann::json recorded_collectives_json(const Trace& trace, const TrainConfig& config, const ShapeReplayResult& result) {
  if (trace.collectives.empty()) return nullptr;
  if (trace.world != result.world) {
    return {{"compared", false}, {"reason", "recorded at " + std::to_string(trace.world) + " ranks, replayed at " +
                                                std::to_string(result.world)}};
  }
  if (trace.run) {
    std::vector<std::string> warnings;
    TrainConfig recorded = parse_train_config(trace.run->config, "run/config", &warnings);
    recorded.zero.stage = config.zero.stage;
    if (train_config_to_json(recorded) != train_config_to_json(config)) {
      return {{"compared", false}, {"reason", "replayed with a different config than the run was recorded with"}};
    }
  }
  // The simulator forms process groups with an exchange at setup that the symmetric replay, which
  // knows the groups from their sizes, does without: the training steps' collectives are compared.
  auto steps_only = [](std::vector<TraceCollective> calls) {
    std::erase_if(calls, [](const TraceCollective& call) { return call.phase == "setup"; });
    return calls;
  };
  const std::vector<TraceCollective> recorded = steps_only(trace.collectives.at(0));
  const std::vector<TraceCollective> replayed = steps_only(result.collectives.at(0));
  auto same = [](const TraceCollective& a, const TraceCollective& b) {
    return a.op == b.op && a.dtype == b.dtype && a.count == b.count && a.module == b.module && a.phase == b.phase &&
           a.group == b.group;
  };
  size_t first = 0;
  while (first < recorded.size() && first < replayed.size() && same(recorded[first], replayed[first])) ++first;
  const bool equal = first == recorded.size() && first == replayed.size();
  auto describe_call = [](const std::vector<TraceCollective>& calls, size_t index) -> std::string {
    if (index >= calls.size()) return "<none>";
    const TraceCollective& call = calls[index];
    return call.op + " " + call.dtype + " count=" + std::to_string(call.count) + " module '" + call.module + "' " +
           call.phase + (call.group == "world" ? "" : " on the " + call.group + " group");
  };
  nlohmann::json out = {{"compared", true}, {"recorded", recorded.size()}, {"replayed", replayed.size()}, {"equal", equal}};
  if (!equal) {
    out["first_difference"] = "#" + std::to_string(first) + ": recorded " + describe_call(recorded, first) +
                              ", replayed " + describe_call(replayed, first);
  }
  return out;
}

nlohmann::json checks_json(const Trace& trace, const TrainConfig& config, const ShapeReplayResult& result,
                           int64_t invalidations) {
  std::map<std::string, nlohmann::json> findings;
  for (const Finding& finding : result.findings) {
    nlohmann::json& kind = findings[finding.kind];
    if (kind.is_null()) kind = {{"count", 0}, {"first", nlohmann::json::array()}};
    kind["count"] = kind["count"].get<int64_t>() + 1;
    if (kind["first"].size() < 10) {
      kind["first"].push_back({{"rank", finding.rank}, {"step", finding.step}, {"module", finding.module},
                               {"param", finding.param}, {"detail", finding.detail}});
    }
  }
  nlohmann::json failure = nullptr;
  if (result.failure) {
    failure = {{"kind", result.failure->kind}, {"message", result.failure->message}, {"exit_code", result.failure->exit_code}};
  }
  return {{"failure", failure}, {"findings", findings}, {"trace_invalidations", invalidations},
          {"rank_divergent_trace", trace.divergent()}, {"recorded_collectives", recorded_collectives_json(trace, config, result)},
          {"exit_code", result.exit_code()}};
}

}  // namespace

nlohmann::json replay_report(const Trace& trace, const TrainConfig& config, const HardwareChoice& hardware,
                             const ShapeReplayResult& result) {
  // HSDP shards over its blocks, not the world: shard sizes, padding and the paper's figure at G.
  const nlohmann::json model = model_json(trace, config.zero.shard_ranks(result.world));
  nlohmann::json report = {{"zero3_replay_report", 1},
                           {"trace", trace.name},
                           {"simulation", result.simulation},
                           {"world", result.world},
                           {"steps", result.steps},
                           {"model", model},
                           {"memory", memory_json(result, hardware)},
                           {"model_states", model_states_json(trace, config, hardware, result, model)},
                           {"communication", communication_json(trace, result)},
                           {"time", time_json(result, hardware)},
                           {"throughput", throughput_json(trace, config, result, hardware)},
                           {"checks", checks_json(trace, config, result, result.ranks.at(0).counters.trace_invalidations)}};
  const EngineCounters& counters = result.ranks.at(0).counters;
  report["engine_counters"] = {{"gathers", counters.gathers}, {"reduce_scatters", counters.reduce_scatters},
                               {"prefetched_params", counters.prefetched_params},
                               {"live_elements_peak", counters.live_elements_peak},
                               {"external_registrations", counters.external_registrations}};
  return report;
}

}  // namespace zero3
