// `zero3 demo`: the main job in one command: trains gpt-tiny and shows that it learns.
#include <cstdio>
#include <memory>

#include "core/errors.h"
#include "tools/commands.h"
#include "tools/training_run.h"

namespace zero3 {

namespace {

void run_demo(uint64_t seed) {
  TrainOptions options;
  options.backend = "ref";
  options.model = "gpt-tiny";
  options.steps = 150;
  options.seed = seed;
  options.log_every = 25;
  const TrainOutcome outcome = run_training(options);
  std::printf("\nloss curve (%lld steps):\n%s", static_cast<long long>(options.steps), loss_curve(outcome.steps, 60, 8).c_str());
  const double first = outcome.steps.front().loss;
  const double last = outcome.steps.back().loss;
  if (outcome.unigram_entropy_nats) {
    std::printf("The model went from %.3f to %.3f nats; a model ignoring context would sit at %.3f.\n", first, last,
                *outcome.unigram_entropy_nats);
  }
  // The demo's promise is a falling loss; anything else is a correctness failure, not a shrug.
  if (!(last < first)) throw CorrectnessError("the demo's loss did not fall (" + std::to_string(first) + " -> " +
                                              std::to_string(last) + ")");
}

}  // namespace

void add_demo_command(CLI::App& app) {
  auto seed = std::make_shared<uint64_t>(1);
  CLI::App* command = app.add_subcommand("demo", "Train gpt-tiny and show the loss falling (exit 2 if it does not)");
  command->add_option("--seed", *seed, "seed for initialisation and data")->capture_default_str();
  command->callback([seed] { run_demo(*seed); });
}

}  // namespace zero3
