// `zero3 demo`: the main job in one command. gpt-tiny trains with ZeRO-3 on 4 simulated ranks,
// is checked bit for bit against the DDP reference, and the summary shows what sharding bought:
// memory per rank against the unsharded reference and communication against DDP's.
#include <cstdio>
#include <memory>

#include "core/base/errors.h"
#include "tools/cli/commands.h"
#include "tools/runs/progress.h"
#include "tools/runs/training_run.h"

namespace zero3 {

namespace {

constexpr int kDemoRanks = 4;

int64_t model_state_bytes(const nlohmann::json& rank_peaks) {
  return rank_peaks.at("param_shard").get<int64_t>() + rank_peaks.at("grad_shard").get<int64_t>() +
         rank_peaks.at("optimizer_state").get<int64_t>();
}

// Per-rank bytes on the wire of ring collectives: all-gather and reduce-scatter send (W-1)/W of
// their buffer, all-reduce twice that.
double wire_bytes(const nlohmann::json& collectives, int world) {
  const double share = static_cast<double>(world - 1) / world;
  double total = 0.0;
  for (const auto& [op, totals] : collectives.items()) {
    const double bytes = totals.at("bytes").get<double>();
    total += (op == "all_reduce" ? 2.0 : 1.0) * share * bytes;
  }
  return total;
}

void print_summary(const TrainOutcome& outcome) {
  const nlohmann::json& report = outcome.backend_report;
  std::printf("\nloss curve (%zu steps):\n%s", outcome.steps.size(), loss_curve(outcome.steps, 60, 8).c_str());
  if (outcome.unigram_entropy_nats) {
    std::printf("loss %.3f -> %.3f nats; a model ignoring context would sit at %.3f.\n", outcome.steps.front().loss,
                outcome.steps.back().loss, *outcome.unigram_entropy_nats);
  }
  const int64_t sharded = model_state_bytes(report.at("memory_per_rank").at(0));
  const int64_t unsharded = model_state_bytes(report.at("ddp_memory_per_rank").at(0));
  std::printf("model state per rank (params + grads + AdamW): ZeRO-3 %lld bytes vs DDP %lld bytes (%.2fx less)\n",
              static_cast<long long>(sharded), static_cast<long long>(unsharded),
              static_cast<double>(unsharded) / static_cast<double>(sharded));
  const nlohmann::json& peaks = report.at("memory_per_rank").at(0);
  const auto bytes = [&](const char* category) { return static_cast<long long>(peaks.at(category).get<int64_t>()); };
  std::printf("peaks on rank 0: gathered parameters %lld, full gradients %lld, activations %lld, total %lld bytes "
              "(DDP total %lld)\n",
              bytes("gathered_param"), bytes("grad"), bytes("activation"), bytes("total"),
              static_cast<long long>(report.at("ddp_memory_per_rank").at(0).at("total").get<int64_t>()));
  const double zero3_wire = wire_bytes(report.at("collectives"), kDemoRanks);
  const double ddp_wire = wire_bytes(report.at("ddp_collectives"), kDemoRanks);
  std::printf("communication per rank: ZeRO-3 %.0f bytes vs DDP %.0f bytes = %.2fx (the ZeRO paper: 1.5x)\n",
              zero3_wire, ddp_wire, zero3_wire / ddp_wire);
  std::printf("ZeRO-3 and DDP agree bit for bit: %s\n", report.at("bitwise_equal_to_ddp").get<bool>() ? "yes" : "no");
}

void run_demo(uint64_t seed, int64_t steps) {
  TrainOptions options;
  options.backend = "sim";
  options.model = "gpt-tiny";
  options.steps = steps;
  options.seed = seed;
  options.ranks = kDemoRanks;
  options.log_every = 25;
  options.check = true;
  // Every parameter sharded, fetched per module and released after it (no persistent ones, no
  // reuse), so the demo shows ZeRO-3 proper; DeepSpeed's defaults would keep all of gpt-tiny's
  // small parameters gathered.
  TrainConfig config;
  config.zero.persistence_threshold = 0;
  config.zero.max_reuse_distance = 0;
  options.base_config = config;
  const TrainOutcome outcome = run_training(options);
  print_summary(outcome);
  // The demo's promise is a falling loss; anything else is a correctness failure, not a shrug.
  const double first = outcome.steps.front().loss;
  const double last = outcome.steps.back().loss;
  if (!(last < first)) {
    throw CorrectnessError("the demo's loss did not fall (" + std::to_string(first) + " -> " + std::to_string(last) + ")");
  }
}

}  // namespace

void add_demo_command(CLI::App& app) {
  auto seed = std::make_shared<uint64_t>(1);
  auto steps = std::make_shared<int64_t>(100);
  CLI::App* command = app.add_subcommand(
      "demo",
      "Train gpt-tiny with ZeRO-3 on 4 simulated ranks, check it bit for bit against DDP, and show the\n"
      "loss curve, memory per rank and communication volume (exit 2 if the check fails or the loss does not fall)");
  command->add_option("--seed", *seed, "seed for initialisation, data and schedule")->capture_default_str();
  command->add_option("--steps", *steps, "optimizer steps")->check(CLI::Range(int64_t{2}, int64_t{1} << 20))->capture_default_str();
  command->callback([seed, steps] { run_demo(*seed, *steps); });
}

}  // namespace zero3
