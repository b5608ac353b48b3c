// `zero3 inspect MODEL`: the parameter table of a built-in or JSON model.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <vector>

#include "core/autograd/context.h"
#include "core/base/errors.h"
#include "core/models/gpt_model.h"
#include "core/models/model_zoo.h"
#include "core/tensor/safetensors.h"
#include "core/training/train_config.h"
#include "tools/cli/commands.h"

namespace zero3 {

namespace {

void list_models() {
  std::printf("built-in models:\n");
  for (const std::string& name : builtin_model_names()) {
    BuiltModel built = build_model(name, {});
    std::printf("  %-16s %14lld parameters\n", name.c_str(), static_cast<long long>(built.model->parameter_count()));
  }
}

void inspect_model(const std::string& name_or_path) {
  BuiltModel built = build_model(name_or_path, {});
  std::printf("%-4s  %-40s %-16s %12s  %s\n", "id", "name", "shape", "numel", "owner");
  for (const Parameter* param : built.model->parameters()) {
    std::printf("%-4lld  %-40s %-16s %12lld  %s\n", static_cast<long long>(param->id()), param->name().c_str(),
                shape_str(param->shape()).c_str(), static_cast<long long>(param->numel()),
                param->owner().display_name().c_str());
  }
  std::printf("%zu parameters, %lld elements (each parameter counted once, tied ones included)\n",
              built.model->parameters().size(), static_cast<long long>(built.model->parameter_count()));
  if (auto* gpt = dynamic_cast<GptModel*>(built.model.get())) {
    const GptConfig& config = gpt->gpt().config();
    std::printf("gpt: vocab %lld, context %lld, %lld layers, width %lld, %lld heads of %lld\n",
                static_cast<long long>(config.vocab), static_cast<long long>(config.context),
                static_cast<long long>(config.layers), static_cast<long long>(config.width),
                static_cast<long long>(config.heads), static_cast<long long>(config.width / std::max<int64_t>(1, config.heads)));
  }
  // The names --checkpoint-activations and zero3_leaf_modules take: a module type, or a dotted name.
  std::map<std::string, std::vector<std::string>> by_type;
  std::vector<const Module*> modules = {&built.model->root()};
  for (size_t i = 0; i < modules.size(); ++i) {
    for (const auto& child : modules[i]->children()) modules.push_back(child.get());
    if (i > 0) by_type[modules[i]->type()].push_back(modules[i]->name());
  }
  std::printf("module types (--checkpoint-activations and zero3_leaf_modules take a type or a dotted name):\n");
  for (const auto& [type, names] : by_type) {
    std::string listed;
    for (size_t i = 0; i < names.size() && i < 3; ++i) listed += (i ? ", " : "") + names[i];
    if (names.size() > 3) listed += ", ... " + names.back();
    std::printf("  %-20s x%-4zu %s\n", type.c_str(), names.size(), listed.c_str());
  }
}

struct DataDump {
  std::string path;
  uint64_t seed = 1;
  int64_t steps = 1;
  int64_t gas = 1;
  int64_t micro_batch = TrainConfig{}.micro_batch_size;
  int ranks = 1;
  std::string data_file;
  std::string logits_path;
  std::string init_from;
  std::string init_names = "zero3";
};

// The logits of a gpt for the first micro-batch (the weights from --init-from when given): the
// check, against Hugging Face's GPT2LMHeadModel on the same tokens, that zero3's GPT-2 is GPT-2.
void dump_logits(const std::string& name_or_path, const DataDump& dump) {
  BuiltModel built = build_model(name_or_path, {.seed = dump.seed,
                                                .data_file = dump.data_file,
                                                .micro_steps_per_step = dump.gas,
                                                .init_from = dump.init_from,
                                                .init_names = dump.init_names});
  auto* gpt = dynamic_cast<GptModel*>(built.model.get());
  if (!gpt) throw InputError("--dump-logits: " + name_or_path + " is not a gpt model");
  initialize_model(built, dump.seed);
  const Batch batch = built.data->batch(0, 0, 0, 1, dump.ranks * dump.micro_batch);
  Context ctx(cpu_kernels());
  const Tensor logits = gpt->gpt().forward(ctx, batch.inputs).value();
  write_safetensors(dump.logits_path, {{"inputs", batch.inputs}, {"logits", logits}},
                    {{"zero3_model", name_or_path}, {"init_from", dump.init_from}, {"names", dump.init_names}});
  std::printf("wrote the inputs %s and logits %s of the first micro-batch to %s\n", shape_str(batch.inputs.shape()).c_str(),
              shape_str(logits.shape()).c_str(), dump.logits_path.c_str());
}

// The global batch of every micro-step a run with these settings trains on (all ranks' examples in
// rank order, as the single-process reference sees them), for an outside framework to train on.
void dump_data(const std::string& name_or_path, const DataDump& dump) {
  const BuiltModel built =
      build_model(name_or_path, {.seed = dump.seed, .data_file = dump.data_file, .micro_steps_per_step = dump.gas});
  const std::vector<NamedTensor> tensors = global_batch_tensors(built, dump.steps, dump.gas, dump.ranks * dump.micro_batch);
  write_safetensors(dump.path, tensors,
                    {{"zero3_model", name_or_path}, {"seed", std::to_string(dump.seed)},
                     {"global_batch", std::to_string(dump.ranks * dump.micro_batch)},
                     {"data", built.data->description()}});
  std::printf("wrote %zu tensors (%lld steps x %lld micro-steps, global batch %lld = %d ranks x %lld) to %s\n",
              tensors.size(), static_cast<long long>(dump.steps), static_cast<long long>(dump.gas),
              static_cast<long long>(dump.ranks * dump.micro_batch), dump.ranks,
              static_cast<long long>(dump.micro_batch), dump.path.c_str());
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto model = std::make_shared<std::string>();
  auto list = std::make_shared<bool>(false);
  auto dump = std::make_shared<DataDump>();
  CLI::App* command = app.add_subcommand("inspect", "Print a model's parameter table (name, shape, numel, owner, id)\n"
                                                    "Example: zero3 inspect gpt2-124m");
  command->add_option("model", *model, "a built-in model name or a JSON spec file");
  command->add_flag("--list", *list, "list the built-in models");
  CLI::Option* dump_option = command->add_option(
      "--dump-data", dump->path,
      "write the training batches to this safetensors file instead: step{S}.micro{M}.inputs and .targets, the "
      "global batch of --ranks x --micro-batch examples, as `zero3 train` with the same flags trains on");
  command->add_option("--seed", dump->seed, "--dump-data, --dump-logits: the run's seed")->capture_default_str();
  command->add_option("--steps", dump->steps, "--dump-data: optimizer steps")
      ->needs(dump_option)->check(CLI::Range(int64_t{1}, int64_t{1} << 20))->capture_default_str();
  command->add_option("--gas", dump->gas, "--dump-data: micro-steps per step")
      ->needs(dump_option)->check(CLI::Range(int64_t{1}, int64_t{1} << 20))->capture_default_str();
  command->add_option("--micro-batch", dump->micro_batch, "--dump-data, --dump-logits: examples per rank per micro-step")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))->capture_default_str();
  command->add_option("--ranks", dump->ranks, "--dump-data, --dump-logits: ranks whose examples make the global batch")
      ->check(CLI::Range(1, 1 << 16))->capture_default_str();
  CLI::Option* logits_option = command->add_option(
      "--dump-logits", dump->logits_path,
      "gpt models: write the first micro-batch's inputs and the model's logits for them to this safetensors file");
  command->add_option("--data", dump->data_file, "--dump-data, --dump-logits: the --data file of the run")
      ->check(CLI::ExistingFile);
  command->add_option("--init-from", dump->init_from, "--dump-logits: the weights (safetensors) to run")
      ->needs(logits_option)->check(CLI::ExistingFile);
  command->add_option("--names", dump->init_names, "--dump-logits: names in the --init-from file: zero3 or hf-gpt2")
      ->needs(logits_option)->check(CLI::IsMember({"zero3", "hf-gpt2"}))->capture_default_str();
  command->callback([model, list, dump] {
    if (!dump->logits_path.empty()) {
      if (model->empty()) throw InputError("--dump-logits needs a model");
      dump_logits(*model, *dump);
      return;
    }
    if (!dump->path.empty()) {
      if (model->empty()) throw InputError("--dump-data needs a model");
      dump_data(*model, *dump);
      return;
    }
    if (*list || model->empty()) list_models();
    if (!model->empty()) inspect_model(*model);
  });
}

}  // namespace zero3
