// `zero3 consolidate DIR OUT`: a sharded checkpoint rewritten as one full f32 state (a world-1
// checkpoint) that the reference trainer, and any world size, loads.
#include <cstdio>
#include <filesystem>
#include <memory>

#include "core/training/checkpoint.h"
#include "core/base/errors.h"
#include "tools/commands.h"

namespace zero3 {

namespace {

void consolidate(const std::string& dir, const std::string& out) {
  std::error_code error;
  if (std::filesystem::exists(out) && std::filesystem::equivalent(dir, out, error)) {
    throw InputError(out + ": is the checkpoint being consolidated; write the consolidated state elsewhere");
  }
  consolidate_checkpoint(dir, out);
  const Checkpoint written = read_checkpoint(out);
  int64_t elements = 0;
  for (const CheckpointParam& param : written.manifest.params) elements += shape_numel(param.shape);
  std::printf(
      "consolidated %s (step %lld) into %s: %zu parameters, %lld elements, f32 master weights and AdamW "
      "moments; load it with --load-checkpoint %s\n",
      dir.c_str(), static_cast<long long>(written.manifest.step), out.c_str(), written.manifest.params.size(),
      static_cast<long long>(elements), out.c_str());
}

}  // namespace

void add_consolidate_command(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  CLI::App* command = app.add_subcommand(
      "consolidate",
      "Rewrite a sharded checkpoint as one full f32 state (a world-1 checkpoint) after validating every shard\n"
      "Example: zero3 consolidate ckpt/ full/ && zero3 train --backend ref --load-checkpoint full/ --steps 20");
  command->add_option("dir", *dir, "the checkpoint directory")->required();
  command->add_option("out", *out, "the directory to write the consolidated checkpoint to")->required();
  command->callback([dir, out] { consolidate(*dir, *out); });
}

}  // namespace zero3
