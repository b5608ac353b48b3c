// Findings written up (finding_writeup.h).
#include "tools/cli/finding_writeup.h"

#include <cstdio>

namespace zero3 {

namespace {

std::string shape_text(const nlohmann::json& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + shape[i].dump();
  return text + "]";
}

std::string layers_text(const nlohmann::json& layers);

std::string layer_text(const nlohmann::json& layer) {
  const std::string type = layer.value("type", "?");
  std::string text = type;
  if (type == "linear" || type == "unused_linear") {
    text += "(" + layer.value("out", nlohmann::json(0)).dump() + (layer.value("bias", true) ? "" : ", no bias") + ")";
  } else if (type == "tied_linear") {
    text += "(" + layer.value("tie_to", std::string("?")) + "'s weight" + (layer.value("transpose", false) ? ", transposed" : "") +
            (layer.value("bias", false) ? ", bias" : "") + ")";
  } else if (type == "scale" || type == "bias") {
    text += " " + shape_text(layer.value("shape", nlohmann::json::array()));
  } else if (type == "raw_scale") {
    text += layer.contains("param") ? "(reads " + layer.value("param", std::string("?")) + ")"
                                    : " " + shape_text(layer.value("shape", nlohmann::json::array()));
  } else if (type == "moe") {
    text += "(" + layer.value("experts", nlohmann::json(0)).dump() + " experts, hidden " +
            layer.value("hidden", nlohmann::json(0)).dump() + ")";
  } else if (type == "embedding") {
    text += "(dim " + layer.value("dim", nlohmann::json(0)).dump() + ")";
  } else if (type == "causal_self_attention") {
    text += "(" + layer.value("heads", nlohmann::json(1)).dump() + " heads" +
            (layer.value("bias", true) ? "" : ", no qkv bias") + (layer.value("proj_bias", true) ? "" : ", no proj bias") +
            ")";
  } else if (type == "swiglu") {
    text += "(hidden " + layer.value("hidden", nlohmann::json(0)).dump() + (layer.value("bias", false) ? ", bias" : "") + ")";
  } else if (layer.contains("layers")) {
    if (type == "repeat") text += " x" + layer.value("times", nlohmann::json(1)).dump();
    text += "[" + layers_text(layer["layers"]) + "]";
  }
  if (!layer.value("requires_grad", true)) text += " frozen";
  return text;
}

std::string layers_text(const nlohmann::json& layers) {
  std::string text;
  for (const auto& layer : layers) text += (text.empty() ? "" : ", ") + layer_text(layer);
  return text;
}

std::string plural(int64_t count, const std::string& noun, const std::string& nouns = "") {
  return std::to_string(count) + " " + (count == 1 ? noun : nouns.empty() ? noun + "s" : nouns);
}

// The framework as the shrunk case ran it: DeepSpeed's stage is part of what a maintainer reads first.
std::string framework_name(const std::string& target, int zero_stage) {
  if (target == "deepspeed") return "DeepSpeed ZeRO-" + std::to_string(zero_stage);
  if (target == "fsdp2") return "FSDP2 (fully_shard)";
  if (target == "torch") return "DistributedDataParallel";
  return "the framework";
}

// What the unsharded reference says, for the "expected" line.
std::string expected_text(const TargetFinding& finding) {
  switch (finding.verdict.kind) {
    case TargetVerdictKind::crash:
      return "training completes: the same model, data and AdamW train without an error in plain PyTorch on one process.";
    case TargetVerdictKind::hang:
      return "every rank finishes its steps (the unsharded run takes well under a second).";
    case TargetVerdictKind::silent_divergence:
      return "the losses, gradient norms and final weights of the same model trained unsharded in plain PyTorch "
             "(the second number of each pair above).";
    case TargetVerdictKind::memory_growth:
      return "each rank holds the same tensor bytes after every step from the second on (AdamW's moments are made "
             "in the first step; the frameworks' healthy runs hold the same bytes to the byte from then on).";
    default:
      return "the unsharded reference's numbers.";
  }
}

}  // namespace

std::string model_sentence(const TargetCase& target_case) {
  const nlohmann::json json = target_case_json(target_case);
  const nlohmann::json& model = json.at("model");
  const FuzzCase& run = target_case.run;
  const std::string input = model.contains("vocab") ? "tokens (vocab " + model["vocab"].dump() + ", context " +
                                                          model.value("context", nlohmann::json(1)).dump() + ")"
                                                    : "input width " + model.value("input_width", nlohmann::json(0)).dump();
  std::string text = input + ": " +
                     layers_text(model.value("layers", nlohmann::json::array())) + " (" +
                     model.value("loss", std::string("mse")) + " loss); W=" + std::to_string(run.world) + ", " +
                     plural(run.steps, "step") + " of " + plural(run.config.gradient_accumulation_steps, "micro-step") +
                     " of " + plural(run.config.micro_batch_size, "row");
  const nlohmann::json& zero = json.at("zero");
  if (!zero.value("leaf_modules", nlohmann::json::array()).empty()) text += "; leaf modules " + zero["leaf_modules"].dump();
  if (zero.value("shard_group_size", 0) > 0) text += "; HSDP blocks of " + zero["shard_group_size"].dump();
  if (model.dump().find("raw_scale") != std::string::npos) {
    text += "; raw reads through " + target_case.raw_access + (target_case.raw_gradient ? " (with gradient)" : "");
  }
  return text;
}

std::string issue_markdown(const FindingWriteup& writeup) {
  const TargetFinding& finding = *writeup.finding;
  const std::string framework = framework_name(writeup.target, finding.shrunk.run.config.zero.stage);
  std::string title = writeup.upstream != nullptr ? writeup.upstream->title
                                                  : framework + ": " + finding.verdict.signature;
  std::string text = "# " + title + "\n\n";
  text += "Found by zero3's differential fuzz (`zero3 fuzz --target " + writeup.target + "`) and shrunk to the case below.\n\n";
  text += "- **Versions:** " + writeup.versions + "; CPU, gloo, " + plural(finding.shrunk.run.world, "process", "processes") + ".\n";
  text += "- **Minimal case:** " + model_sentence(finding.shrunk) + ".\n";
  text += "- **Upstream:** " + upstream_status_line(writeup.upstream, *writeup.table) + ".\n";
  if (writeup.upstream != nullptr) {
    for (const UpstreamLink& link : writeup.upstream->upstream) {
      text += "  - " + link.url + " (" + link.kind + ", " + link.state + "): " + link.title + " — " + link.relation + "\n";
    }
  }
  text += "\n## Observed\n\n```\n" + finding.verdict.message.substr(0, 3000) + "\n```\n\n";
  text += "## Expected\n\n" + expected_text(finding) + "\n\n";
  text += "## Reproduce\n\n";
  if (!writeup.script_path.empty()) {
    text += "Standalone: torch and " + std::string(writeup.target == "deepspeed" ? "DeepSpeed" : "torch.distributed") +
            " only, weights and data drawn from a seed; exit 1 when the failure reproduces (checked by running it "
            "alone before it was saved).\n\n```python\n" + writeup.script_text + "```\n\n";
    if (!writeup.script_output.empty()) text += "Its output:\n\n```\n" + writeup.script_output + "\n```\n\n";
  } else {
    text += "No standalone script: " + writeup.no_script_why + "\n\n";
  }
  text += "## Mechanism\n\n";
  if (writeup.upstream != nullptr) {
    text += writeup.upstream->mechanism + " (" + writeup.upstream->evidence + ")\n";
  } else {
    text += "Not triaged yet.\n";
  }
  return text;
}

}  // namespace zero3
