// `zero3 train`: train a model on the reference, the simulator or GPUs.
#include <memory>

#include "tools/cli/commands.h"
#include "tools/runs/training_run.h"

namespace zero3 {

void add_train_command(CLI::App& app) {
  auto options = std::make_shared<TrainOptions>();
  CLI::App* command = app.add_subcommand(
      "train",
      "Train a model. Prints the seed, every derived option and a replay command, then one line per step.\n"
      "Example: zero3 train --backend ref --model gpt-tiny --steps 200 --report run.json");
  add_train_options(*command, *options);
  command->callback([options] { run_training(*options); });
}

}  // namespace zero3
