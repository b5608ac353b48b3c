// Judging runner answers (target_verdict.h).
#include "props/target/target_verdict.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <random>
#include <regex>
#include <set>

#include "core/base/errors.h"
#include "core/models/model_zoo.h"
#include "core/tensor/safetensors.h"
#include "props/target/memory_verdict.h"
#include "sim/distributed_training.h"

namespace zero3 {

namespace {

// A gradient's rounding noise: float32 sums of O(1) values leave ~1e-8 per element where the exact
// gradient is 0, and a norm over a model's elements 1.4e-6 (measured in a torch control case);
// below kGradientNoise a gradient (or a norm) is taken for noise.
constexpr double kGradientNoise = 1e-5;

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.9g", value);
  return text;
}

std::map<std::string, Tensor> weights_file(const std::string& path) {
  std::map<std::string, Tensor> weights;
  for (NamedTensor& named : read_safetensors(path).tensors) weights[named.name] = std::move(named.tensor);
  return weights;
}

struct WeightError {
  double error = 0.0;  // ||ours - reference|| / (||reference - initial|| + 1e-6 sqrt(n)) over the compared elements
  double limit = 0.0;  // the tolerance for it
  int64_t compared = 0;
};

// The difference as a fraction of how far training moved the tensor (zero3py.oracle.compare's
// weight_errors), over the elements whose gradient (`gradient`, when given) rose above the noise.
WeightError weight_error(const Tensor& ours, const Tensor& reference, const Tensor& initial,
                         const std::vector<float>* gradient, double tolerance) {
  const std::vector<float> a = ours.to_floats(), b = reference.to_floats(), start = initial.to_floats();
  WeightError result{.limit = tolerance};
  double difference = 0.0, moved = 0.0, smallest = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < b.size(); ++i) {
    if (gradient != nullptr) {
      if (i >= gradient->size() || (*gradient)[i] < kGradientNoise) continue;
      smallest = std::min(smallest, static_cast<double>((*gradient)[i]));
    }
    result.compared++;
    difference += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    moved += (static_cast<double>(b[i]) - start[i]) * (static_cast<double>(b[i]) - start[i]);
  }
  result.error = std::sqrt(difference) / (std::sqrt(moved) + 1e-6 * std::sqrt(static_cast<double>(result.compared)));
  if (gradient != nullptr && result.compared > 0) result.limit = std::max(tolerance, 1e-7 / smallest);
  return result;
}

// A loss or norm: a number, or "nan", "inf", "-inf" (JSON has no non-finite numbers).
double protocol_number(const nlohmann::json& value) {
  if (value.is_string()) {
    const std::string text = value.get<std::string>();
    if (text == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (text == "inf" || text == "-inf") return (text == "inf" ? 1 : -1) * std::numeric_limits<double>::infinity();
  }
  return value.get<double>();  // anything else: json's type_error, a broken runner
}

// A runner's side of an answer: {"losses", "grad_norms", "weights": PATH}.
RunSummary summary_of(const nlohmann::json& side) {
  RunSummary summary;
  for (const auto& loss : side.at("losses")) summary.losses.push_back(protocol_number(loss));
  for (const auto& norm : side.at("grad_norms")) summary.grad_norms.push_back(protocol_number(norm));
  summary.weights = weights_file(side.at("weights").get<std::string>());
  return summary;
}

std::string rank_failures(const nlohmann::json& ranks, std::string* signature) {
  std::string text;
  for (const auto& rank : ranks) {
    const std::string state = rank.value("state", "");
    if (state == "ok") continue;
    std::string line = "rank " + std::to_string(rank.value("rank", -1)) + ": ";
    if (state == "exception") {
      const std::string type = rank.value("exception_type", "?"), message = rank.value("message", "");
      line += type + ": " + message;
      if (signature->empty()) {
        *signature = "crash " + type + ": " + stable_fragment(message);
        if (rank.contains("where")) *signature += " at " + rank.value("where", "");
      }
    } else if (state == "signal") {
      line += "died of " + rank.value("signal", "a signal");
      if (signature->empty()) *signature = "crash " + rank.value("signal", "signal");
    } else if (state == "exit") {
      line += "exited with code " + std::to_string(rank.value("exit_code", -1));
      if (signature->empty()) *signature = "crash exit";
    } else {
      line += state;
    }
    text += (text.empty() ? "" : "\n") + line;
  }
  return text;
}

std::string describe(const Breach& breach) {
  return breach.quantity == "loss" || breach.quantity == "gradient norm" ? breach.detail
                                                                         : breach.quantity + ": " + breach.detail;
}

}  // namespace

const char* target_verdict_name(TargetVerdictKind kind) {
  switch (kind) {
    case TargetVerdictKind::agree: return "agree";
    case TargetVerdictKind::crash: return "crash";
    case TargetVerdictKind::hang: return "hang";
    case TargetVerdictKind::silent_divergence: return "silent_divergence";
    case TargetVerdictKind::memory_growth: return "memory_growth";
    case TargetVerdictKind::reference_disagreement: return "reference_disagreement";
    case TargetVerdictKind::unsupported: return "unsupported";
  }
  return "?";
}

std::map<std::string, Tensor> initial_weights(const TargetCase& target_case) {
  BuiltModel built = build_model_from_spec(target_case.run.model_spec, "model_spec", {.seed = target_case.run.seed});
  initialize_model(built, target_case.run.seed);
  std::map<std::string, Tensor> weights;
  for (const Parameter* param : built.model->parameters()) weights[param->name()] = param->data;
  return weights;
}

namespace {

// How a probe retrains the case: the same global batch split over other ranks (rank r's rows are
// global rows r*B..(r+1)*B, so W' ranks of B' rows with W'B' = WB see the same data and sum it in
// another order), or from nudged initial weights.
struct Probe {
  int world = 0;  // 0: the case's
  int64_t micro_batch = 0;
  bool nudged = false;
};

DistributedRunResult zero3_reference_result(const TargetCase& target_case, const Probe& probe,
                                            const std::string& init_from = "") {
  DistributedRunOptions options = reference_options(target_case.run);
  // Flat DDP judges a framework's HSDP (within tolerance, as every target): the tree order is
  // zero3's own engine's oracle, and a probe at another world size may not hold the block.
  options.config.zero.shard_group_size = 0;
  options.init_from = init_from;
  if (probe.world > 0) {
    options.world = probe.world;
    options.config.micro_batch_size = probe.micro_batch;
  }
  DistributedRunResult result = run_distributed(options);
  if (!result.sim.all_ok()) {
    throw CorrectnessError("zero3's DDP reference failed on the case: " + result.sim.summary());
  }
  return result;
}

std::set<std::string> frozen_parameters(const TargetCase& target_case) {
  std::set<std::string> frozen;
  const BuiltModel built = build_model_from_spec(target_case.run.model_spec, "model_spec", {});
  for (const Parameter* param : built.model->parameters()) {
    if (!param->requires_grad()) frozen.insert(param->name());
  }
  return frozen;
}

// A file removed when this goes out of scope (an empty path: none).
struct RemovedOnExit {
  std::string path;
  ~RemovedOnExit() {
    if (!path.empty()) std::filesystem::remove(path);
  }
};

// `initial` with every trainable element moved 2 ulps up or down (seeded), written where
// run_distributed's init_from reads them; the caller removes the file.
std::string write_nudged_weights(const TargetCase& target_case, const std::map<std::string, Tensor>& initial,
                                 const std::set<std::string>& frozen) {
  std::mt19937_64 random(target_case.run.seed);
  std::vector<NamedTensor> tensors;
  for (const auto& [name, tensor] : initial) {
    std::vector<float> values = tensor.to_floats();
    if (!frozen.contains(name)) {
      for (float& value : values) {
        // 2 ulps of the value; a zero (biases start at 0) by 2^-30, about 1e-9.
        const float step = value != 0.0f ? std::abs(value) * 0x1p-22f : 0x1p-30f;
        value += (random() & 1) != 0 ? step : -step;
      }
    }
    tensors.push_back({name, Tensor::from_values(tensor.shape(), values)});
  }
  const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                     ("zero3-rounding-probe-" + std::to_string(::getpid()) + "-" +
                                      std::to_string(target_case.run.seed) + ".safetensors");
  write_safetensors(path.string(), tensors);
  return path.string();
}

RunSummary summary_of(const DistributedRunResult& result) {
  RunSummary summary;
  for (const StepStats& step : result.steps) {
    summary.losses.push_back(step.loss);
    summary.grad_norms.push_back(step.grad_norm);
  }
  for (size_t id = 0; id < result.final_state.size(); ++id) {
    summary.weights[result.param_names.at(id)] = result.final_state[id].master;
  }
  return summary;
}

void widen(std::vector<double>& spreads, size_t step, double difference) {
  if (spreads.size() <= step) spreads.resize(step + 1, 0.0);
  spreads[step] = std::max(spreads[step], difference);
}

// Widens `spread` to cover how far `moved` (a probe) went from `base`, tensor by tensor over the
// trainable ones (those `gradient_size` has: frozen tensors stay held to the plain tolerance).
void widen_spread(RunSummary::Spread& spread, const RunSummary& moved, const RunSummary& base,
                  const std::map<std::string, Tensor>& initial,
                  const std::map<std::string, std::vector<float>>& gradient_size) {
  for (size_t step = 0; step < moved.losses.size() && step < base.losses.size(); ++step) {
    widen(spread.losses, step, std::abs(moved.losses[step] - base.losses[step]));
  }
  for (size_t step = 0; step < moved.grad_norms.size() && step < base.grad_norms.size(); ++step) {
    widen(spread.grad_norms, step, std::abs(moved.grad_norms[step] - base.grad_norms[step]));
  }
  for (const auto& [name, weights] : base.weights) {
    const auto sizes = gradient_size.find(name);
    const auto probe = moved.weights.find(name);
    const auto start = initial.find(name);
    if (sizes == gradient_size.end() || probe == moved.weights.end() || start == initial.end() ||
        weights.numel() == 0 || probe->second.shape() != weights.shape()) {
      continue;
    }
    const WeightError error = weight_error(probe->second, weights, start->second, &sizes->second, 0.0);
    double& widest = spread.weights[name];
    widest = std::max(widest, error.error);
  }
}

}  // namespace

RunSummary zero3_reference_run(const TargetCase& target_case) {
  const DistributedRunResult result = zero3_reference_result(target_case, {});
  RunSummary summary = summary_of(result);
  // A frozen parameter must not move at all: all of it is compared, at the plain tolerance.
  const std::set<std::string> frozen = frozen_parameters(target_case);
  for (size_t id = 0; id < result.final_state.size(); ++id) {
    const std::string& name = result.param_names.at(id);
    if (frozen.contains(name)) continue;
    summary.gradient_size[name] = largest_gradient_bounds(result.final_state[id], target_case.run.config.adamw.beta2);
  }
  const std::map<std::string, Tensor> initial = initial_weights(target_case);
  const int world = target_case.run.world;
  const int64_t rows = world * target_case.run.config.micro_batch_size;
  std::vector<Probe> probes;
  if (world > 1) probes.push_back({.world = 1, .micro_batch = rows, .nudged = false});
  if (rows > 1 && rows != world) probes.push_back({.world = static_cast<int>(rows), .micro_batch = 1, .nudged = false});
  probes.push_back({.world = 0, .micro_batch = 0, .nudged = true});
  for (const Probe& probe : probes) {
    const RemovedOnExit nudged{probe.nudged ? write_nudged_weights(target_case, initial, frozen) : ""};
    const RunSummary moved = summary_of(zero3_reference_result(target_case, probe, nudged.path));
    widen_spread(summary.rounding_spread, moved, summary, initial, summary.gradient_size);
  }
  return summary;
}

Breach first_breach(const RunSummary& ours, const RunSummary& reference,
                    const std::map<std::string, Tensor>& initial, const RunSummary& zero3,
                    const TargetTolerance& tolerance) {
  const RunSummary::Spread& spread = zero3.rounding_spread;
  const auto allowed_spread = [](const std::vector<double>& spreads, size_t step) {
    return step < spreads.size() ? kSpreadMargin * spreads[step] : 0.0;
  };
  if (ours.losses.size() != reference.losses.size() || ours.grad_norms.size() != reference.grad_norms.size()) {
    return {"step count", std::to_string(ours.losses.size()) + " steps answered, the reference has " +
                              std::to_string(reference.losses.size())};
  }
  for (size_t step = 0; step < reference.losses.size(); ++step) {
    const double loss_error = std::abs(ours.losses[step] - reference.losses[step]);
    const bool loss_off = !(loss_error <= tolerance.loss * std::max(std::abs(reference.losses[step]), 1e-12) +
                                              allowed_spread(spread.losses, step));
    // Norms below kGradientNoise are rounding noise of a zero gradient, equal whatever their ratio.
    const double norm_error = std::abs(ours.grad_norms[step] - reference.grad_norms[step]);
    const bool norm_off = !(norm_error <= tolerance.grad_norm * std::abs(reference.grad_norms[step]) + kGradientNoise +
                                              allowed_spread(spread.grad_norms, step));
    if (loss_off || norm_off) {
      return {loss_off ? "loss" : "gradient norm",
              "step " + std::to_string(step) + ": loss " + number(ours.losses[step]) + " vs reference " +
                  number(reference.losses[step]) + ", grad norm " + number(ours.grad_norms[step]) + " vs " +
                  number(reference.grad_norms[step])};
    }
  }
  for (const auto& [name, expected] : reference.weights) {
    const auto found = ours.weights.find(name);
    if (found == ours.weights.end()) return {"final weights", name + " is missing"};
    if (found->second.shape() != expected.shape()) {
      return {"final weights", name + " has shape " + shape_str(found->second.shape()) + ", the reference " +
                                   shape_str(expected.shape())};
    }
    const auto start = initial.find(name);
    if (expected.numel() == 0 || start == initial.end()) continue;
    const auto sizes = zero3.gradient_size.find(name);
    WeightError error = weight_error(found->second, expected, start->second,
                                     sizes == zero3.gradient_size.end() ? nullptr : &sizes->second, tolerance.weights);
    if (const auto noise = spread.weights.find(name); noise != spread.weights.end()) {
      error.limit = std::max(error.limit, kSpreadMargin * noise->second);
    }
    if (error.compared > 0 && !(error.error <= error.limit)) {
      char text[64];
      std::snprintf(text, sizeof(text), "%.1e (allowed %.1e)", error.error, error.limit);
      return {"final weights", name + " differs by " + text + " of its update"};
    }
  }
  if (ours.weights.size() != reference.weights.size()) return {"final weights", "a tensor the reference does not have"};
  return {};
}

TargetTolerance target_tolerance(const TargetCase& target_case) {
  if (!target_case.run.config.bf16) return {};
  return {.loss = 1e-2, .grad_norm = 5e-2, .weights = 0.3};
}

TargetVerdict judge_answer(const nlohmann::json& answer, const RunSummary& zero3_reference,
                           const std::map<std::string, Tensor>& initial, const std::string& runner,
                           const TargetTolerance& tolerance) {
  const auto broken = [&](const std::string& why) {
    return BackendError("the runner '" + runner + "' " + why + ": " + answer.dump().substr(0, 1500));
  };
  if (!answer.is_object() || !answer.contains("status") || !answer["status"].is_string()) {
    throw broken("answered outside the protocol (no status)");
  }
  const std::string status = answer["status"];
  if (status == "error") throw broken("answered error");
  if (status == "unsupported") {
    return {.kind = TargetVerdictKind::unsupported, .message = answer.value("message", ""), .signature = ""};
  }
  try {
    TargetVerdict verdict;
    if (status == "crash") {
      verdict.kind = TargetVerdictKind::crash;
      verdict.message = rank_failures(answer.at("ranks"), &verdict.signature);
      if (verdict.signature.empty()) verdict.signature = "crash";
      return verdict;
    }
    if (status == "hang") {
      verdict.kind = TargetVerdictKind::hang;
      // A runner may call ranks stuck before the limit when all of them sat idle (PROTOCOL.md).
      double idle_s = 0.0;
      for (const auto& rank : answer.value("ranks", nlohmann::json::array())) {
        if (rank.value("state", "") == "stuck") idle_s = std::max(idle_s, rank.value("idle_s", 0.0));
      }
      verdict.message = "ranks " + answer.at("stuck").dump() +
                        (idle_s > 0.0 ? " sat idle, waiting on each other, for " + std::to_string(static_cast<int>(idle_s)) + " s"
                                      : " did not finish within the case's timeout");
      // Where each stuck rank waits (the runner's faulthandler dump, PROTOCOL.md's `waits_in`).
      for (const auto& rank : answer.value("ranks", nlohmann::json::array())) {
        if (rank.value("state", "") == "stuck" && !rank.value("waits_in", "").empty()) {
          verdict.message += "\nrank " + std::to_string(rank.value("rank", -1)) + " waits in " +
                             rank.value("waits_in", "");
        }
      }
      verdict.signature = "hang";
      return verdict;
    }
    if (status != "ok") throw broken("answered an unknown status");
    const nlohmann::json& reference_side = answer.at("reference");
    if (reference_side.contains("unsupported")) {
      return {.kind = TargetVerdictKind::unsupported,
              .message = "the runner's reference: " + reference_side["unsupported"].get<std::string>(),
              .signature = ""};
    }
    if (reference_side.contains("error")) {
      const std::string error = reference_side["error"].get<std::string>();
      return {.kind = TargetVerdictKind::reference_disagreement,
              .message = "the runner's unsharded reference raised where zero3's DDP reference trained: " + error,
              .signature = "reference_error " + error.substr(0, error.find(':')) + ": " + stable_fragment(error)};
    }
    const RunSummary reference = summary_of(reference_side);
    // The runner's reference summed again in the frameworks' order (each rank's rows apart): the
    // spread of the runner's own kernels, which zero3's probes cannot see (PROTOCOL.md).
    RunSummary judged_by = zero3_reference;
    const bool has_probe = reference_side.contains("order_probe");
    const RunSummary order_probe = has_probe ? summary_of(reference_side.at("order_probe")) : RunSummary{};
    if (has_probe) widen_spread(judged_by.rounding_spread, order_probe, reference, initial, zero3_reference.gradient_size);
    const Breach divergence =
        first_breach(summary_of(answer.at("framework")), reference, initial, judged_by, tolerance);
    if (divergence.found()) {
      return {.kind = TargetVerdictKind::silent_divergence,
              .message = "the framework trained without an error, off its unsharded reference: " + describe(divergence),
              .signature = "silent_divergence in the " + divergence.quantity};
    }
    // The framework trained right; did it keep what it no longer needs?
    if (const auto growth = memory_growth(answer.at("framework"))) {
      return {.kind = TargetVerdictKind::memory_growth, .message = *growth, .signature = "memory_growth in the held bytes"};
    }
    // Against the runner's float64 run when there is one: zero3's f32 may be as far from it as
    // torch's f32 is, ten times over. The two f32 runs use different kernels, so a gradient that
    // is rounding noise (a layer_norm over features with zero variance, a logit shift under
    // cross-entropy) is different noise on each side, which AdamW steps by up to lr and later
    // steps carry on; zero3's probes cannot see torch's noise, but torch's distance from the
    // exact run measures it.
    RunSummary exact_judge = zero3_reference;
    const bool has_exact = reference_side.contains("float64");
    const RunSummary exact = has_exact ? summary_of(reference_side.at("float64")) : reference;
    if (has_exact) {
      widen_spread(exact_judge.rounding_spread, reference, exact, initial, zero3_reference.gradient_size);
      // The order probe is a second sample of the same noise: an ill-conditioned case (cross-entropy
      // near uniform, gradients AdamW normalizes) moved 2.5e-5 under a row reorder where its f32
      // run happened to land 5e-6 from float64, and zero3's f32 8e-5 (torch control, seed 972468404).
      if (has_probe) {
        widen_spread(exact_judge.rounding_spread, order_probe, reference, initial, zero3_reference.gradient_size);
      }
    }
    const Breach disagreement = first_breach(exact, zero3_reference, initial, exact_judge, tolerance);
    if (disagreement.found()) {
      return {.kind = TargetVerdictKind::reference_disagreement,
              .message = std::string(has_exact ? "the runner's float64 reference" : "the runner's unsharded reference") +
                         " against zero3's DDP reference: " + describe(disagreement),
              .signature = "reference_disagreement in the " + disagreement.quantity};
    }
    return verdict;
  } catch (const nlohmann::json::exception& error) {
    throw broken(std::string("answered outside the protocol (") + error.what() + ")");
  }
}

std::string stable_fragment(const std::string& message) {
  static const std::regex identifier(R"(\b[A-Z][A-Z_]{7,}\b)");
  std::smatch match;
  if (std::regex_search(message, match, identifier)) return match.str();
  static const std::regex words(R"([A-Za-z][A-Za-z ]{7,}[A-Za-z])");
  std::string longest;
  for (auto it = std::sregex_iterator(message.begin(), message.end(), words); it != std::sregex_iterator(); ++it) {
    if (it->str().size() > longest.size()) longest = it->str();
  }
  return longest.empty() ? message.substr(0, 80) : longest;
}

}  // namespace zero3
