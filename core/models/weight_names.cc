// Parameter names and layouts in and out of safetensors (weight_names.h).
#include "core/models/weight_names.h"

#include <map>
#include <optional>
#include <regex>
#include <set>

#include "core/base/errors.h"

namespace zero3 {

namespace {

struct ExternalName {
  std::string name;
  bool transposed = false;  // stored [in, out] (GPT-2's Conv1D)
};

// zero3's name of a GPT parameter -> GPT-2's, or nothing when it has no GPT-2 counterpart.
std::optional<ExternalName> hf_gpt2_name(const std::string& name) {
  static const std::regex block(R"(h\.(\d+)\.(ln_1|ln_2|attn\.qkv|attn\.proj|mlp\.fc|mlp\.proj)\.(weight|bias))");
  if (name == "wte.weight" || name == "wpe.weight" || name == "ln_f.weight" || name == "ln_f.bias") {
    return ExternalName{"transformer." + name, false};
  }
  std::smatch match;
  if (!std::regex_match(name, match, block)) return std::nullopt;
  static const std::map<std::string, std::string> layers = {{"ln_1", "ln_1"},           {"ln_2", "ln_2"},
                                                            {"attn.qkv", "attn.c_attn"}, {"attn.proj", "attn.c_proj"},
                                                            {"mlp.fc", "mlp.c_fc"},      {"mlp.proj", "mlp.c_proj"}};
  const std::string layer = match[2];
  const bool conv1d_weight = layer != "ln_1" && layer != "ln_2" && match[3] == "weight";
  return ExternalName{"transformer.h." + match[1].str() + "." + layers.at(layer) + "." + match[3].str(), conv1d_weight};
}

ExternalName external_name(const Parameter& param, WeightNames names) {
  if (names == WeightNames::zero3) return {param.name(), false};
  const std::optional<ExternalName> mapped = hf_gpt2_name(param.name());
  if (!mapped) {
    throw InputError("--names hf-gpt2: parameter '" + param.name() +
                     "' has no GPT-2 name (hf-gpt2 names fit gpt models only; use --names zero3)");
  }
  return *mapped;
}

Tensor transpose_2d(const Tensor& matrix) {
  const int64_t rows = matrix.shape()[0], columns = matrix.shape()[1];
  const std::vector<float> values = matrix.to_floats();
  std::vector<float> out(values.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < columns; ++c) out[static_cast<size_t>(c * rows + r)] = values[static_cast<size_t>(r * columns + c)];
  }
  return Tensor::from_values({columns, rows}, out);
}

Shape reversed(const Shape& shape) { return {shape.rbegin(), shape.rend()}; }

std::string shape_text(const Shape& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// Not weights: GPT-2's causal-mask buffers, and the LM head tied to wte (checked separately).
bool skipped_buffer(const std::string& name) {
  static const std::regex mask(R"(transformer\.h\.\d+\.attn\.(bias|masked_bias))");
  return std::regex_match(name, mask);
}

}  // namespace

WeightNames parse_weight_names(const std::string& text) {
  if (text == "zero3") return WeightNames::zero3;
  if (text == "hf-gpt2") return WeightNames::hf_gpt2;
  throw InputError("--names " + text + ": expected zero3 or hf-gpt2");
}

const char* weight_names_name(WeightNames names) { return names == WeightNames::hf_gpt2 ? "hf-gpt2" : "zero3"; }

void load_initial_weights(Model& model, const std::string& path, WeightNames names) {
  const SafetensorsFile file = read_safetensors(path);
  std::vector<std::string> missing, wrong_shape;
  std::set<std::string> used;
  std::vector<std::pair<Parameter*, Tensor>> assignments;
  for (Parameter* param : model.parameters()) {
    const ExternalName external = external_name(*param, names);
    const Tensor* stored = file.find(external.name);
    if (!stored) {
      missing.push_back(external.name + " " + shape_text(external.transposed ? reversed(param->shape()) : param->shape()));
      continue;
    }
    used.insert(external.name);
    const Shape expected = external.transposed ? reversed(param->shape()) : param->shape();
    if (stored->shape() != expected) {
      wrong_shape.push_back(external.name + ": " + shape_text(stored->shape()) + ", expected " + shape_text(expected));
      continue;
    }
    const Tensor values = Tensor::from_values(stored->shape(), stored->to_floats());
    assignments.emplace_back(param, external.transposed ? transpose_2d(values) : values);
  }
  std::vector<std::string> unexpected;
  for (const NamedTensor& named : file.tensors) {
    if (used.count(named.name) || (names == WeightNames::hf_gpt2 && skipped_buffer(named.name))) continue;
    if (names == WeightNames::hf_gpt2 && named.name == "lm_head.weight") {
      const Tensor* wte = file.find("transformer.wte.weight");
      if (wte && wte->shape() == named.tensor.shape() && wte->to_floats() == named.tensor.to_floats()) continue;
      unexpected.push_back("lm_head.weight (differs from transformer.wte.weight: zero3's head is tied to it)");
      continue;
    }
    unexpected.push_back(named.name + " " + shape_text(named.tensor.shape()));
  }
  if (!missing.empty() || !wrong_shape.empty() || !unexpected.empty()) {
    std::string message = path + ": does not fit the model's parameters (--names " +
                          std::string(weight_names_name(names)) + ")";
    const auto list = [&](const char* what, const std::vector<std::string>& items) {
      if (items.empty()) return;
      message += "\n  " + std::string(what) + ":";
      for (const std::string& item : items) message += "\n    " + item;
    };
    list("missing", missing);
    list("of another shape", wrong_shape);
    list("unexpected", unexpected);
    throw InputError(message);
  }
  for (auto& [param, values] : assignments) {
    param->data = values.reshape(param->shape());
  }
}

std::vector<NamedTensor> weights_for_saving(const Model& model, const std::vector<Tensor>& values, WeightNames names,
                                            DType dtype) {
  std::vector<NamedTensor> out;
  for (const Parameter* param : model.parameters()) {
    const ExternalName external = external_name(*param, names);
    const Tensor& full = values.at(static_cast<size_t>(param->id()));
    Tensor stored = Tensor::from_values(full.shape(), full.to_floats());
    if (external.transposed) stored = transpose_2d(stored);
    out.push_back({external.name, Tensor::from_values(stored.shape(), stored.to_floats(), dtype)});
  }
  return out;
}

}  // namespace zero3
