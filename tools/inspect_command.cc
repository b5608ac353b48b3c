// `zero3 inspect MODEL`: the parameter table of a built-in or JSON model.
#include <cstdio>
#include <memory>

#include "core/models/model_zoo.h"
#include "tools/commands.h"

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
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto model = std::make_shared<std::string>();
  auto list = std::make_shared<bool>(false);
  CLI::App* command = app.add_subcommand("inspect", "Print a model's parameter table (name, shape, numel, owner, id)\n"
                                                    "Example: zero3 inspect gpt2-124m");
  command->add_option("model", *model, "a built-in model name or a JSON spec file");
  command->add_flag("--list", *list, "list the built-in models");
  command->callback([model, list] {
    if (*list || model->empty()) list_models();
    if (!model->empty()) inspect_model(*model);
  });
}

}  // namespace zero3
