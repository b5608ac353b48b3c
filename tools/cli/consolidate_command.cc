// `zero3 consolidate DIR OUT`: a sharded checkpoint rewritten as one full f32 state (a world-1
// checkpoint) that the reference trainer, and any world size, loads; or, with --format
// safetensors, the full weights in one safetensors file (zero3's or Hugging Face GPT-2's names).
#include <cstdio>
#include <filesystem>
#include <memory>

#include "core/base/errors.h"
#include "core/models/model_zoo.h"
#include "core/models/weight_names.h"
#include "core/tensor/safetensors.h"
#include "core/training/checkpoint.h"
#include "tools/cli/commands.h"

namespace zero3 {

namespace {

struct ConsolidateFlags {
  std::string dir, out;
  std::string format;  // unset: from the output's name (consolidate_format)
  std::string names = "zero3";
  std::string dtype = "f32";
};

// The master weights only (no moments): what `--init-from` and other frameworks read.
void consolidate_to_safetensors(const ConsolidateFlags& flags) {
  if (std::filesystem::is_directory(flags.out)) {
    throw InputError(flags.out + ": is a directory; --format safetensors writes one file");
  }
  const Checkpoint checkpoint = read_checkpoint(checkpoint_dir_to_read(flags.dir));
  const BuiltModel built =
      build_model_from_spec(checkpoint.manifest.model_spec, flags.dir + "/metadata.json at /model_spec", {});
  std::vector<Tensor> masters;
  for (const OptimizerSlot& slot : checkpoint.full) masters.push_back(slot.master);
  const DType dtype = flags.dtype == "bf16" ? DType::bf16 : DType::f32;
  const std::vector<NamedTensor> tensors =
      weights_for_saving(*built.model, masters, parse_weight_names(flags.names), dtype);
  write_safetensors(flags.out, tensors,
                    {{"format", "pt"},
                     {"zero3_names", flags.names},
                     {"zero3_model_spec", checkpoint.manifest.model_spec.dump()}});
  std::printf("consolidated %s (step %lld) into %s: %zu tensors, %s master weights, %s names; start from it with "
              "--init-from %s%s\n",
              flags.dir.c_str(), static_cast<long long>(checkpoint.manifest.step), flags.out.c_str(), tensors.size(),
              flags.dtype.c_str(), flags.names.c_str(), flags.out.c_str(),
              flags.names == "zero3" ? "" : (" --names " + flags.names).c_str());
}

// Without --format, an output named *.safetensors gets that format (a folder of that name is what
// nobody means), and anything else a checkpoint folder. Said on the terminal either way.
std::string consolidate_format(const ConsolidateFlags& flags) {
  if (!flags.format.empty()) return flags.format;
  const bool safetensors = std::filesystem::path(flags.out).extension() == ".safetensors";
  std::printf("format: %s (from the output's name; --format %s for the other)\n",
              safetensors ? "safetensors" : "checkpoint", safetensors ? "checkpoint" : "safetensors");
  return safetensors ? "safetensors" : "checkpoint";
}

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
  auto flags = std::make_shared<ConsolidateFlags>();
  CLI::App* command = app.add_subcommand(
      "consolidate",
      "Rewrite a sharded checkpoint as one full f32 state (a world-1 checkpoint) after validating every shard,\n"
      "or (--format safetensors) as the full weights in one safetensors file\n"
      "Example: zero3 consolidate ckpt/ full/ && zero3 train --backend ref --load-checkpoint full/ --steps 20\n"
      "Example: zero3 consolidate ckpt/ model.safetensors --format safetensors --names hf-gpt2");
  command->add_option("dir", flags->dir, "the checkpoint directory")->required();
  command->add_option("out", flags->out, "where to write: a directory (checkpoint) or a file (safetensors)")->required();
  command->add_option("--format", flags->format,
                      "checkpoint: master weights and AdamW moments, loadable with --load-checkpoint; safetensors: "
                      "the master weights, loadable with --init-from and by PyTorch / Hugging Face. Default: "
                      "safetensors when out ends in .safetensors, else checkpoint")
      ->check(CLI::IsMember({"checkpoint", "safetensors"}));
  command->add_option("--names", flags->names, "safetensors: zero3's names, or hf-gpt2 (gpt models)")
      ->check(CLI::IsMember({"zero3", "hf-gpt2"}))
      ->capture_default_str();
  command->add_option("--dtype", flags->dtype, "safetensors: f32 or bf16 (rounded to nearest even)")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  command->callback([flags] {
    flags->format = consolidate_format(*flags);
    if (flags->format == "safetensors") {
      consolidate_to_safetensors(*flags);
      return;
    }
    if (flags->names != "zero3" || flags->dtype != "f32") {
      throw InputError("--names and --dtype are for --format safetensors; a checkpoint keeps zero3's f32 state");
    }
    consolidate(flags->dir, flags->out);
  });
}

}  // namespace zero3
