// Measuring the machine's profile (calibrate.h).
#include "tools/bench/calibrate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <map>
#include <set>
#include <tuple>
#include <unistd.h>

#include "core/base/errors.h"
#include "core/base/stopwatch.h"
#include "core/models/model_zoo.h"
#include "core/nn/model.h"
#include "core/sharding/partition.h"
#include "sim/hardware_profile.h"
#include "traces/format/work_counting_kernels.h"

namespace zero3 {

namespace {

const CallSite kSite{.module = "calibrate", .params = {}, .step = -1, .phase = "calibrate"};

// Every rank runs `body` the same number of times: a probe of 3 runs, the slowest rank's time
// deciding how many make about `seconds`; the result is the slowest rank's mean over the fastest
// of 3 rounds, the time a collective step of W ranks would see.
template <class Body>
double time_together(Communicator& comm, double seconds, Body&& body) {
  const auto slowest = [&](double value) {
    Tensor t = Tensor::scalar(static_cast<float>(value));
    comm.all_reduce(t, ReduceOp::max, kSite);
    return static_cast<double>(t.item());
  };
  comm.barrier(kSite);
  Stopwatch probe;
  for (int i = 0; i < 3; ++i) body();
  const double probe_s = slowest(probe.seconds() / 3.0);
  const int64_t iterations = std::clamp<int64_t>(static_cast<int64_t>(seconds / 3.0 / std::max(probe_s, 1e-9)), 1, 100000);
  double best = 0.0;
  for (int round = 0; round < 3; ++round) {
    comm.barrier(kSite);
    Stopwatch watch;
    for (int64_t i = 0; i < iterations; ++i) body();
    const double mean = slowest(watch.seconds() / static_cast<double>(iterations));
    best = round == 0 ? mean : std::min(best, mean);
  }
  return best;
}

Tensor filled(const Shape& shape, float value) { return Tensor::full(shape, value); }

// Tokens per sequence: the spec's context (gpt and the sequential token models), else 1 (a row).
int64_t sequence_length(const BuiltModel& built) {
  return built.spec.is_object() ? built.spec.value("context", int64_t{1}) : 1;
}

struct GemmShape {
  int64_t m, n, k;
  auto key() const { return std::tie(m, n, k); }
  bool operator<(const GemmShape& other) const { return key() < other.key(); }
};

// The forward product and both backward ones of every 2-D parameter at T tokens.
std::set<GemmShape> model_gemm_shapes(const CalibrateOptions& options, int64_t& tokens) {
  const BuiltModel built = build_model(options.model, {.seed = 1});
  tokens = options.micro_batch * sequence_length(built);
  std::set<GemmShape> shapes;
  for (const Parameter* param : built.model->parameters()) {
    if (param->shape().size() != 2 || param->numel() == 0) continue;
    const int64_t out = param->shape()[0], in = param->shape()[1];
    shapes.insert({tokens, out, in});   // y = x W^T
    shapes.insert({tokens, in, out});   // dx = dy W
    shapes.insert({out, in, tokens});   // dW = dy^T x
  }
  if (shapes.empty()) throw InputError("bench calibrate: model '" + options.model + "' has no 2-D parameter to time GEMMs on");
  return shapes;
}

nlohmann::json measure_gemms(Communicator& comm, Kernels& kernels, const CalibrateOptions& options, std::ostream& progress,
                             double& flops_per_s) {
  int64_t tokens = 0;
  const std::set<GemmShape> shapes = model_gemm_shapes(options, tokens);
  nlohmann::json rows = nlohmann::json::array();
  double flops_total = 0.0, seconds_total = 0.0;
  for (const GemmShape& shape : shapes) {
    Tensor a = filled({shape.m, shape.k}, 0.5f), b = filled({shape.n, shape.k}, 0.25f), out = Tensor::zeros({shape.m, shape.n});
    const double seconds = time_together(comm, options.seconds_per_figure, [&] {
      kernels.matmul(a, false, b, true, out, 1, shape.m, shape.n, shape.k, false, 0.0f);
    });
    const double flops = 2.0 * static_cast<double>(shape.m) * static_cast<double>(shape.n) * static_cast<double>(shape.k);
    flops_total += flops;
    seconds_total += seconds;
    rows.push_back({{"m", shape.m}, {"n", shape.n}, {"k", shape.k}, {"seconds", seconds}, {"flops_per_s", flops / seconds}});
    if (comm.rank() == 0) progress << "  gemm " << shape.m << "x" << shape.n << "x" << shape.k << ": " << flops / seconds / 1e9
                                   << " GFLOP/s\n" << std::flush;
  }
  // The rate of the whole set: what a step made of exactly these products would sustain.
  flops_per_s = flops_total / seconds_total;
  return {{"tokens", tokens}, {"shapes", rows}, {"flops_per_s", flops_per_s}};
}

std::vector<int64_t> collective_sizes(int world) {
  std::vector<int64_t> sizes;
  for (int64_t bytes = int64_t{4} << 10; bytes <= (int64_t{16} << 20); bytes *= 4) sizes.push_back(bytes / world * world);
  return sizes;
}

nlohmann::json measure_collectives(Communicator& comm, const CalibrateOptions& options, std::ostream& progress,
                                   RingFit& fit) {
  const int world = comm.world();
  std::vector<CollectiveSample> samples;
  nlohmann::json rows = nlohmann::json::array();
  for (CollectiveOp op : {CollectiveOp::all_gather, CollectiveOp::reduce_scatter, CollectiveOp::all_reduce}) {
    for (int64_t bytes : collective_sizes(world)) {
      const int64_t whole = bytes / 4;
      Tensor whole_buffer = filled({whole}, 1.0f), block = filled({whole / world}, 1.0f);
      const double seconds = time_together(comm, options.seconds_per_figure, [&] {
        if (op == CollectiveOp::all_gather) comm.all_gather(block, whole_buffer, kSite);
        else if (op == CollectiveOp::reduce_scatter) comm.reduce_scatter(whole_buffer, block, ReduceOp::sum, kSite);
        else comm.all_reduce(whole_buffer, ReduceOp::sum, kSite);
      });
      samples.push_back({op, bytes, seconds});
      if (comm.rank() == 0) progress << "  " << collective_op_name(op) << " " << bytes << " B: " << seconds * 1e6 << " us\n"
                                     << std::flush;
    }
  }
  // The link is the all-gather's fit: data movement alone. The reductions also add on the CPU,
  // which the ring model has no term for; each op's own fit and how far the link's prices each
  // size are kept, so the gap shows.
  std::map<CollectiveOp, std::vector<CollectiveSample>> by_op;
  for (const CollectiveSample& sample : samples) by_op[sample.op].push_back(sample);
  fit = fit_ring_model(by_op.at(CollectiveOp::all_gather), world);
  HardwareProfile fitted{.bandwidth_bytes_per_s = fit.bytes_per_s, .latency_s = fit.latency_s};
  double worst_off = 0.0;
  for (const CollectiveSample& sample : samples) {
    const double priced = collective_time_s(fitted, sample.op, sample.bytes, world);
    worst_off = std::max(worst_off, std::abs(priced - sample.seconds) / sample.seconds);
    rows.push_back({{"op", collective_op_name(sample.op)}, {"bytes", sample.bytes}, {"seconds", sample.seconds},
                    {"priced_seconds", priced}});
  }
  nlohmann::json fits = nlohmann::json::object();
  for (const auto& [op, op_samples] : by_op) {
    const RingFit own = fit_ring_model(op_samples, world);
    fits[collective_op_name(op)] = {{"latency_s", own.latency_s}, {"bytes_per_s", own.bytes_per_s},
                                    {"worst_relative_error", own.worst_relative_error}};
  }
  fit.worst_relative_error = worst_off;
  return {{"world", world}, {"rows", rows}, {"fits", fits}, {"latency_s", fit.latency_s},
          {"bytes_per_s", fit.bytes_per_s}, {"worst_relative_error_of_the_link", worst_off}};
}

double measure_memory_bandwidth(Communicator& comm, Kernels& kernels, const CalibrateOptions& options) {
  const int64_t elements = int64_t{16} << 20;  // 64 MiB: past the caches of one core
  Tensor in = filled({elements}, 1.0f), out = Tensor::zeros({elements});
  const double seconds = time_together(comm, options.seconds_per_figure, [&] { kernels.copy(in, out); });
  return 2.0 * static_cast<double>(in.bytes()) / seconds;  // read and written
}

// The optimizer step as the engine runs it (core/zero3/zero3_step.cc) over one buffer of this
// rank's shard size (every trained parameter's shard, summed): a small model's shards sit in the
// caches, a large one's stream from memory, and the rates differ by several times between the two.
struct OptimizerRates {
  int64_t shard_elements = 0;
  double adamw_elements_per_s = 0.0;
  // The passes besides AdamW (replay_driver.cc optimizer_step_work): the norm's sum of squares
  // reads the gradient (4 B an element), the refresh casts the master into the compute shard
  // (4 + 4 B), the gradient is zeroed (4 B); their bytes over their time.
  double passes_bytes_per_s = 0.0;
};

OptimizerRates measure_optimizer(Communicator& comm, Kernels& kernels, const CalibrateOptions& options) {
  OptimizerRates rates;
  const BuiltModel built = build_model(options.model, {.seed = 1});
  for (const Parameter* param : built.model->parameters()) {
    if (param->requires_grad()) rates.shard_elements += shard_numel(param->numel(), comm.world());
  }
  const int64_t elements = std::max<int64_t>(rates.shard_elements, 1);
  Tensor master = filled({elements}, 1.0f), grad = filled({elements}, 0.01f), m = Tensor::zeros({elements}),
         v = Tensor::zeros({elements}), compute = Tensor::zeros({elements}), norm = Tensor::zeros({1});
  const double adamw_s =
      time_together(comm, options.seconds_per_figure, [&] { kernels.adamw(master, grad, m, v, {}); });
  rates.adamw_elements_per_s = static_cast<double>(elements) / adamw_s;
  const double passes_s = time_together(comm, options.seconds_per_figure, [&] {
    kernels.sum_of_squares_into({{&grad, 0, elements}}, norm, 0);
    kernels.copy(master, compute);
    kernels.fill(grad, 0.01f);  // the zeroing's bytes, with a value the next round can square
  });
  rates.passes_bytes_per_s = 16.0 * static_cast<double>(elements) / passes_s;
  return rates;
}

// The model's activation shapes, what its memory-bound kernels and transcendentals run over.
struct ActivationShapes {
  int64_t batch = 1, context = 1, tokens = 1, vocab = 0, heads = 0;
  std::set<int64_t> widths;  // every dimension of its 2-D parameters: [tokens, width] activations
};

ActivationShapes activation_shapes(const CalibrateOptions& options) {
  const BuiltModel built = build_model(options.model, {.seed = 1});
  ActivationShapes shapes;
  shapes.batch = options.micro_batch;
  shapes.context = sequence_length(built);
  shapes.tokens = shapes.batch * shapes.context;
  if (built.spec.is_object()) {
    shapes.vocab = built.spec.value("vocab", int64_t{0});
    shapes.heads = built.spec.value("heads", int64_t{0});
  }
  for (const Parameter* param : built.model->parameters()) {
    if (param->shape().size() == 2) shapes.widths.insert(param->shape().begin(), param->shape().end());
  }
  return shapes;
}

// One kernel at one shape: the work WorkCountingKernels counts for one call, and its time.
struct TimedKernel {
  std::string name;
  KernelWork work;
  double seconds = 0.0;
};

template <class Body>
TimedKernel time_kernel(Communicator& comm, Kernels& kernels, const CalibrateOptions& options, std::string name,
                        Body&& body) {
  WorkCountingKernels counting(kernels);
  body(counting);  // once, counted: the same bytes the recorder writes into a trace
  TimedKernel timed{.name = std::move(name), .work = counting.total(), .seconds = 0.0};
  timed.seconds = time_together(comm, options.seconds_per_figure, [&] { body(kernels); });
  return timed;
}

nlohmann::json rows_of(const std::vector<TimedKernel>& timed) {
  nlohmann::json rows = nlohmann::json::array();
  for (const TimedKernel& kernel : timed) {
    rows.push_back({{"kernel", kernel.name}, {"seconds", kernel.seconds}, {"bytes", kernel.work.bytes},
                    {"transcendentals", kernel.work.transcendentals}, {"calls", kernel.work.calls}});
  }
  return rows;
}

// The three rates that price a trace's recorded kernel work (traces/replay/kernel_rates.h),
// measured at the model's activation shapes through the real kernels: a call's overhead (a
// one-element scale), the memory bandwidth of memory-bound kernels (an add, a copy and a bias
// gradient's sum over [tokens, width] for each width, bytes over time less the calls' overhead),
// and transcendentals (GELU forward and backward at each hidden width, the cross-entropy over the
// vocabulary, the causal softmax over [batch x heads, context, context]: evaluations over time
// less the bytes' and calls' share).
nlohmann::json measure_kernel_work(Communicator& comm, Kernels& kernels, const CalibrateOptions& options,
                                   nlohmann::json& profile) {
  const ActivationShapes shapes = activation_shapes(options);
  Tensor one = filled({1}, 1.0f), one_out = Tensor::zeros({1});
  const TimedKernel call = time_kernel(comm, kernels, options, "scale [1]", [&](Kernels& k) { k.scale(one, 2.0f, one_out); });
  const double call_s = call.seconds;
  std::vector<TimedKernel> memory, transcendental;
  for (int64_t width : shapes.widths) {
    const std::string at = " [" + std::to_string(shapes.tokens) + ", " + std::to_string(width) + "]";
    Tensor a = filled({shapes.tokens, width}, 0.5f), b = filled({shapes.tokens, width}, 0.25f);
    Tensor out = Tensor::zeros({shapes.tokens, width}), bias_grad = Tensor::zeros({width});
    memory.push_back(time_kernel(comm, kernels, options, "add" + at, [&](Kernels& k) { k.binary(BinaryOp::add, a, b, out); }));
    memory.push_back(time_kernel(comm, kernels, options, "copy" + at, [&](Kernels& k) { k.copy(a, out); }));
    memory.push_back(time_kernel(comm, kernels, options, "sum_to_shape" + at, [&](Kernels& k) { k.sum_to_shape(a, bias_grad); }));
    if (width == shapes.vocab) continue;  // no activation function runs over the logits
    transcendental.push_back(time_kernel(comm, kernels, options, "gelu" + at, [&](Kernels& k) { k.unary(UnaryOp::gelu, a, out); }));
    transcendental.push_back(time_kernel(comm, kernels, options, "gelu_backward" + at,
                                         [&](Kernels& k) { k.unary_backward(UnaryOp::gelu, a, b, out); }));
  }
  Tensor logits, targets, loss = Tensor::zeros({}), probs, scores, probabilities;
  if (shapes.vocab > 0) {
    logits = filled({shapes.tokens, shapes.vocab}, 0.5f);
    targets = filled({shapes.tokens}, 1.0f);
    probs = Tensor::zeros({shapes.tokens, shapes.vocab});
    transcendental.push_back(time_kernel(comm, kernels, options, "cross_entropy [" + std::to_string(shapes.tokens) + ", " +
                                                                     std::to_string(shapes.vocab) + "]",
                                         [&](Kernels& k) { k.cross_entropy_forward(logits, targets, loss, probs); }));
  }
  if (shapes.heads > 0 && shapes.context > 1) {
    const Shape shape = {shapes.batch * shapes.heads, shapes.context, shapes.context};
    scores = filled(shape, 0.5f);
    probabilities = Tensor::zeros(shape);
    transcendental.push_back(time_kernel(comm, kernels, options, "causal_softmax " + shape_str(shape),
                                         [&](Kernels& k) { k.causal_softmax_forward(scores, probabilities); }));
  }
  double bytes = 0.0, memory_s = 0.0, memory_total_s = 0.0;
  for (const TimedKernel& kernel : memory) {
    bytes += kernel.work.bytes;
    memory_total_s += kernel.seconds;
    memory_s += kernel.seconds - static_cast<double>(kernel.work.calls) * call_s;
  }
  // Under load the tiny call can time as long as a small kernel: the bytes keep at least half.
  const double memory_bytes_per_s = bytes / std::max(memory_s, 0.5 * memory_total_s);
  double evaluations = 0.0, evaluation_s = 0.0, transcendental_total_s = 0.0;
  for (const TimedKernel& kernel : transcendental) {
    evaluations += kernel.work.transcendentals;
    transcendental_total_s += kernel.seconds;
    evaluation_s += kernel.seconds - kernel.work.bytes / memory_bytes_per_s - static_cast<double>(kernel.work.calls) * call_s;
  }
  // What the bytes and calls leave of the time is the evaluations'; if nothing is left (the
  // kernels were memory-bound), a hundredth of their time stands for it, and the source says so.
  const bool floored = evaluation_s < 0.01 * transcendental_total_s;
  evaluation_s = std::max(evaluation_s, 0.01 * transcendental_total_s);
  const std::string at = " at " + options.model + "'s activation shapes (" + std::to_string(shapes.tokens) +
                         " tokens per rank; measured.kernel_work: each kernel's time and counted work)";
  profile["kernel_call"] = {{"seconds", call_s}, {"source", "a one-element scale through the engine's kernels, per call"}};
  profile["memory_bandwidth"] = {
      {"bytes_per_s", memory_bytes_per_s},
      {"source", "read + written bytes (as the trace recorder counts them) over the time, less each call's overhead, of "
                 "an add, a copy and a bias gradient's sum over [tokens, width] for each width" + at}};
  if (evaluations > 0.0) {
    profile["transcendentals"] = {
        {"per_s", evaluations / evaluation_s},
        {"source", "exp / tanh / log evaluations over the time the bytes and calls leave of GELU forward and backward" +
                       std::string(shapes.vocab > 0 ? ", the cross-entropy" : "") +
                       (shapes.heads > 0 ? ", the causal softmax" : "") + at +
                       (floored ? "; the kernels were memory-bound, a hundredth of their time stands for the evaluations" : "")}};
  }
  return {{"call", rows_of({call})}, {"memory_bound", rows_of(memory)}, {"transcendental", rows_of(transcendental)}};
}

std::string today() {
  char text[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(text, sizeof(text), "%Y-%m-%d", std::gmtime(&now));
  return text;
}

}  // namespace

RingFit fit_ring_model(const std::vector<CollectiveSample>& samples, int world) {
  ZERO3_CHECK(world >= 2 && samples.size() >= 2, "a ring fit needs two ranks and two samples");
  // time = latency * s + x / bandwidth, weighted by 1 / time^2 so that every size counts alike.
  double ss = 0, sx = 0, xx = 0, st = 0, xt = 0;
  const auto terms = [&](const CollectiveSample& sample) {
    const double factor = sample.op == CollectiveOp::all_reduce ? 2.0 : 1.0;
    const double steps = factor * (world - 1);
    const double bytes = factor * static_cast<double>(world - 1) / world * static_cast<double>(sample.bytes);
    return std::pair{steps, bytes};
  };
  for (const CollectiveSample& sample : samples) {
    const auto [s, x] = terms(sample);
    const double w = 1.0 / (sample.seconds * sample.seconds);
    ss += w * s * s; sx += w * s * x; xx += w * x * x; st += w * s * sample.seconds; xt += w * x * sample.seconds;
  }
  const double det = ss * xx - sx * sx;
  double latency = det != 0 ? (st * xx - xt * sx) / det : 0.0;
  double inverse_bandwidth = det != 0 ? (ss * xt - sx * st) / det : 0.0;
  // A negative term is no physics: drop it and fit the other alone.
  if (latency < 0) { latency = 0; inverse_bandwidth = xt / xx; }
  if (inverse_bandwidth <= 0) { inverse_bandwidth = 1e-15; latency = st / ss; }
  RingFit fit{.latency_s = latency, .bytes_per_s = 1.0 / inverse_bandwidth};
  for (const CollectiveSample& sample : samples) {
    const auto [s, x] = terms(sample);
    const double predicted = latency * s + x * inverse_bandwidth;
    fit.worst_relative_error = std::max(fit.worst_relative_error, std::abs(predicted - sample.seconds) / sample.seconds);
  }
  return fit;
}

nlohmann::json calibrate_machine(Communicator& comm, Kernels& kernels, const CalibrateOptions& options,
                                 std::ostream& progress) {
  const int world = comm.world();
  const std::string how = "measured by zero3 bench calibrate --backend " + options.backend + " --ranks " +
                          std::to_string(world) + " on " + today() + ", every rank measuring at once";
  if (comm.rank() == 0) progress << "calibrate: GEMMs at the shapes of " << options.model << "\n" << std::flush;
  double flops_per_s = 0.0;
  const nlohmann::json gemms = measure_gemms(comm, kernels, options, progress, flops_per_s);
  if (comm.rank() == 0) progress << "calibrate: memory bandwidth and AdamW\n" << std::flush;
  const double memory_bytes_per_s = measure_memory_bandwidth(comm, kernels, options);
  const OptimizerRates optimizer = measure_optimizer(comm, kernels, options);
  nlohmann::json measured = {{"gemm", gemms}, {"memory_bytes_per_s", memory_bytes_per_s},
                             {"adamw_elements_per_s", optimizer.adamw_elements_per_s},
                             {"optimizer_shard_elements", optimizer.shard_elements},
                             {"optimizer_passes_bytes_per_s", optimizer.passes_bytes_per_s}};
  const std::string at_shard = " over " + std::to_string(optimizer.shard_elements) +
                               " f32 elements, this rank's shard of every trained parameter of " + options.model;
  if (comm.rank() == 0) progress << "calibrate: kernel calls, memory-bound kernels and transcendentals\n" << std::flush;
  nlohmann::json kernel_rates = nlohmann::json::object();
  measured["kernel_work"] = measure_kernel_work(comm, kernels, options, kernel_rates);
  const long pages = ::sysconf(_SC_PHYS_PAGES), page_bytes = ::sysconf(_SC_PAGE_SIZE);
  nlohmann::json profile = {
      {"name", "this machine, " + std::to_string(world) + " rank" + (world == 1 ? "" : "s") + " (" + options.backend + ")"},
      {"source", how},
      {"notes", "GEMMs are priced at the rate of the model's own shapes; a trace's recorded kernel work beyond "
                "them (FORMAT.md, \"Kernel work\") at memory_bandwidth, transcendentals and kernel_call."},
      {"peak_flops", flops_per_s},
      {"flops_efficiency", 1.0},
      {"memory_bytes", static_cast<double>(pages) * static_cast<double>(page_bytes) / world},
      {"gpus_per_node", world},
      {"host_link", {{"bytes_per_s", memory_bytes_per_s / 2.0},
                     {"source", "a 64 MiB copy, bytes moved one way per second: the host is the device here"}}},
      {"host_optimizer", {{"elements_per_s", optimizer.adamw_elements_per_s},
                          {"source", "AdamW (the engine's kernel)" + at_shard}}},
      {"optimizer", {{"elements_per_s", optimizer.adamw_elements_per_s},
                     {"source", "AdamW (the engine's kernel)" + at_shard + ": the device is this host"}}},
      {"optimizer_passes", {{"bytes_per_s", optimizer.passes_bytes_per_s},
                            {"source", "the optimizer step's passes besides AdamW (the norm's sum of squares, the "
                                       "refresh's cast, the gradient's zeroing: 16 B an element)" + at_shard}}},
  };
  if (options.measure_collectives && world >= 2) {
    if (comm.rank() == 0) progress << "calibrate: collectives over " << world << " ranks\n" << std::flush;
    RingFit fit;
    measured["collectives"] = measure_collectives(comm, options, progress, fit);
    const std::string source = "the ring model fitted to all_gather from 4 KiB to 16 MiB; it prices reduce_scatter "
                               "and all_reduce without their additions, the worst of all 21 sizes off by " +
                               std::to_string(static_cast<int>(std::lround(100 * fit.worst_relative_error))) +
                               " % (measured.collectives: each size, and each op's own fit)";
    // A fit under load can put the latency at 0 (its least-squares term went negative) or the
    // bandwidth past any machine's: kept inside what a profile accepts, and said so.
    const double latency_s = std::clamp(fit.latency_s, 1e-9, 1.0);
    const double bytes_per_s = std::clamp(fit.bytes_per_s, 1e6, 1e15);
    const std::string clamped = latency_s != fit.latency_s || bytes_per_s != fit.bytes_per_s
                                    ? "; clamped from the fit's latency " + std::to_string(fit.latency_s) +
                                          " s and bandwidth " + std::to_string(fit.bytes_per_s) + " B/s"
                                    : "";
    profile["nvlink"] = {{"bytes_per_s", bytes_per_s}, {"latency_s", latency_s}, {"source", source + clamped}};
    profile["infiniband"] = profile["nvlink"];
  } else {
    const HardwareProfile defaults;
    profile["nvlink"] = {{"bytes_per_s", defaults.bandwidth_bytes_per_s}, {"latency_s", defaults.latency_s},
                         {"source", world < 2 ? "not measured: one rank has no collective to move data"
                                              : "not measured (--backend sim): the simulator's default link"}};
    profile["infiniband"] = profile["nvlink"];
  }
  profile.update(kernel_rates);
  profile["measured"] = measured;
  return profile;
}

}  // namespace zero3
