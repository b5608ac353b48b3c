// The fit search (fit_advice.h).
#include "traces/replay/fit_advice.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>

#include "core/base/errors.h"

namespace zero3 {

namespace {

constexpr int64_t kLargestMicroBatch = 4096;  // the search stops doubling here
constexpr int kMaxWorldFactor = 8;            // "more ranks" tries 2x, 4x and 8x the world

struct Probe {
  const Trace& recorded;
  const HardwareChoice& hardware;
  const std::string& source;
  int* replays;

  FitProbe operator()(const std::string& lever, const std::string& change, const RunShape& shape,
                      ReplayOptions options) const {
    const Trace trace = rescale_trace(recorded, shape, source);
    options.on_progress = {};
    ++*replays;
    const ShapeReplayResult result = replay_trace(trace, options);
    FitProbe probe{.lever = lever, .change = change};
    for (const RankReplay& rank : result.ranks) probe.peak_bytes = std::max(probe.peak_bytes, rank.peak_total.bytes);
    const RankReplay& rank = result.ranks.at(0);
    if (!rank.step_end_s.empty()) probe.step_s = rank.step_end_s.back() - rank.step_start_s.back();
    const double tokens = static_cast<double>(trace.tokens) *
                          static_cast<double>(options.config.gradient_accumulation_steps) * result.world;
    probe.tokens_per_s = probe.step_s > 0.0 ? tokens / probe.step_s : 0.0;
    probe.fits = !result.failure && static_cast<double>(probe.peak_bytes) <= usable(options.world);
    return probe;
  }

  double usable(int) const { return hardware.usable_bytes(); }
};

// The type of the most numerous module that has children, the outermost of equally numerous ones
// (a transformer's block, Block or LlamaDecoderLayer, not the attention inside it): what a user
// checkpoints. "" when every module type is unique.
std::string repeated_block_type(const Trace& trace) {
  std::map<std::string, int> children;
  for (const TraceModule& module : trace.modules) {
    const size_t dot = module.name.rfind('.');
    if (!module.name.empty()) children[dot == std::string::npos ? "" : module.name.substr(0, dot)]++;
  }
  struct Seen {
    int count = 0;
    size_t depth = SIZE_MAX;  // the fewest dots in a name of this type
  };
  std::map<std::string, Seen> types;
  for (const TraceModule& module : trace.modules) {
    if (module.name.empty() || !children.count(module.name)) continue;
    Seen& seen = types[module.type];
    seen.count++;
    seen.depth = std::min(seen.depth, static_cast<size_t>(std::count(module.name.begin(), module.name.end(), '.')));
  }
  std::string best;
  Seen best_seen{.count = 1, .depth = 0};
  for (const auto& [type, seen] : types) {
    if (seen.count > best_seen.count || (seen.count == best_seen.count && seen.depth < best_seen.depth)) {
      best = type;
      best_seen = seen;
    }
  }
  return best;
}

HardwareProfile profile_at(const HardwareChoice& hardware, int world) {
  if (hardware.file.is_null()) return hardware.profile;
  return hardware_from_json(hardware.file, hardware.name, world).profile;
}

}  // namespace

FitAdvice advise_fit(const Trace& recorded, const RunShape& shape, const ReplayOptions& options,
                     const HardwareChoice& hardware, const std::string& source) {
  FitAdvice advice;
  const Probe probe{recorded, hardware, source, &advice.replays};
  const FitProbe asked = probe("as asked", "", shape, options);
  advice.fits = asked.fits;
  if (hardware.memory_bytes <= 0) return advice;  // nothing to fit into
  const int64_t batch = shape.batch > 0 ? shape.batch : recorded.batch;
  if (recorded.batch > 0) {
    // The largest micro-batch that fits, the rest of the run as asked: grow by doubling while it
    // fits, then bisect between the last that fit and the first that did not.
    auto at = [&](int64_t micro_batch) {
      RunShape changed = shape;
      changed.batch = micro_batch;
      return probe("micro-batch", "--micro-batch " + std::to_string(micro_batch), changed, options);
    };
    int64_t fits_at = 0, fails_at = 0;
    FitProbe best{};
    if (asked.fits) {
      fits_at = batch;
      best = asked;
      best.lever = "micro-batch";
      best.change = "--micro-batch " + std::to_string(batch);
      for (int64_t next = batch * 2; next <= kLargestMicroBatch; next *= 2) {
        const FitProbe grown = at(next);
        if (!grown.fits) {
          fails_at = next;
          break;
        }
        fits_at = next;
        best = grown;
      }
    } else {
      fails_at = batch;
    }
    if (fails_at == 0) fails_at = kLargestMicroBatch + 1;
    while (fails_at - fits_at > 1) {
      const int64_t middle = fits_at + (fails_at - fits_at) / 2;
      const FitProbe tried = at(middle);
      if (tried.fits) {
        fits_at = middle;
        best = tried;
      } else {
        fails_at = middle;
      }
    }
    advice.largest_micro_batch = fits_at;
    advice.at_largest = best;
  }
  if (asked.fits) return advice;
  // Each single lever, the rest as asked.
  const TrainConfig& config = options.config;
  auto with = [&](const std::string& lever, const std::string& change, auto&& edit) {
    ReplayOptions changed = options;
    edit(changed);
    try {
      check_lever_combinations(changed.config, "the " + lever + " lever");
      check_group_sizes(changed.config, changed.world, "the " + lever + " lever");
    } catch (const InputError&) {
      return;  // a lever that does not combine with the rest is no advice
    }
    advice.levers.push_back(probe(lever, change, shape, changed));
  };
  const std::string block = repeated_block_type(recorded);
  if (config.checkpoint_modules.empty() && !block.empty()) {
    with("activation checkpointing", "--checkpoint-activations " + block,
         [&](ReplayOptions& o) { o.config.checkpoint_modules = {block}; });
  }
  if (config.zero.offload_optimizer == OffloadDevice::none && config.zero.stage >= 1) {
    with("offload optimizer", "--offload-optimizer cpu",
         [](ReplayOptions& o) { o.config.zero.offload_optimizer = OffloadDevice::cpu; });
  }
  if (config.zero.offload_param == OffloadDevice::none && config.zero.stage == 3) {
    with("offload parameters", "--offload-param cpu", [](ReplayOptions& o) { o.config.zero.offload_param = OffloadDevice::cpu; });
  }
  if (config.zero.stage < 3) {
    with("ZeRO stage 3", "--zero 3", [](ReplayOptions& o) { o.config.zero.stage = 3; });
  }
  if (config.zero.hpz_group_size > 1) {
    with("hpZ off", "--hpz 1", [](ReplayOptions& o) { o.config.zero.hpz_group_size = 1; });
  }
  if (config.zero.shard_group_size > 0) {
    with("HSDP off", "--shard-group " + std::to_string(options.world), [](ReplayOptions& o) { o.config.zero.shard_group_size = 0; });
  }
  for (int factor = 2; factor <= kMaxWorldFactor; factor *= 2) {
    const int world = options.world * factor;
    size_t before = advice.levers.size();
    with("more ranks", "--ranks " + std::to_string(world), [&](ReplayOptions& o) {
      o.world = world;
      o.hardware = profile_at(hardware, world);
    });
    if (advice.levers.size() > before && advice.levers.back().fits) break;  // the fewest ranks that fit
    if (advice.levers.size() > before && factor < kMaxWorldFactor) advice.levers.pop_back();
  }
  return advice;
}

nlohmann::json fit_advice_json(const FitAdvice& advice) {
  auto probe_json = [](const FitProbe& probe) {
    return nlohmann::json{{"lever", probe.lever}, {"change", probe.change}, {"fits", probe.fits},
                          {"peak_bytes", probe.peak_bytes}, {"step_s", probe.step_s},
                          {"tokens_per_s", probe.tokens_per_s}};
  };
  nlohmann::json levers = nlohmann::json::array();
  for (const FitProbe& probe : advice.levers) levers.push_back(probe_json(probe));
  return {{"fits", advice.fits},
          {"largest_micro_batch", advice.largest_micro_batch < 0 ? nlohmann::json(nullptr)
                                                                 : nlohmann::json(advice.largest_micro_batch)},
          {"at_largest_micro_batch", advice.largest_micro_batch > 0 ? probe_json(advice.at_largest) : nlohmann::json(nullptr)},
          {"levers", levers},
          {"replays", advice.replays},
          {"note", "each probe is the run replayed again with that one change (the largest micro-batch: the rest as "
                   "asked), judged against the device less its reserve"}};
}

std::string fit_advice_lines(const FitAdvice& advice) {
  char text[256];
  auto numbers = [&](const FitProbe& probe) {
    std::snprintf(text, sizeof text, "peak %.1f GB, step %.3f s, %.0f tokens/s", static_cast<double>(probe.peak_bytes) / 1e9,
                  probe.step_s, probe.tokens_per_s);
    return std::string(text);
  };
  std::string out;
  if (advice.largest_micro_batch == 0) {
    out += "no micro-batch fits: not even 1 sequence per rank\n";
  } else if (advice.largest_micro_batch > 0) {
    out += "largest micro-batch that fits: " + std::to_string(advice.largest_micro_batch) +
           (advice.largest_micro_batch >= kLargestMicroBatch ? " (or more: the search stops there)" : "") + " (" +
           numbers(advice.at_largest) + ")\n";
  }
  if (advice.fits || advice.levers.empty()) return out;
  std::string fitting, not_enough;
  for (const FitProbe& probe : advice.levers) {
    (probe.fits ? fitting : not_enough) += "  " + probe.change + " (" + probe.lever + "): " + numbers(probe) + "\n";
  }
  if (!fitting.empty()) out += "would fit with one change:\n" + fitting;
  if (!not_enough.empty()) out += "would still not fit with:\n" + not_enough;
  return out;
}

}  // namespace zero3
