// Realizing layer draws as a valid sequential model spec (see spec_realizer.h). Module and
// parameter names follow core/models/MODEL_SPEC.md, so that tie_to and param name earlier layers.
#include "props/spec_realizer.h"

#include <optional>

#include "core/nn/broadcast_layers.h"

namespace zero3 {

const char* layer_kind_name(LayerKind kind) {
  switch (kind) {
    case LayerKind::linear: return "linear";
    case LayerKind::tied_linear: return "tied_linear";
    case LayerKind::unused_linear: return "unused_linear";
    case LayerKind::gelu: return "gelu";
    case LayerKind::relu: return "relu";
    case LayerKind::layer_norm: return "layer_norm";
    case LayerKind::scale: return "scale";
    case LayerKind::bias: return "bias";
    case LayerKind::raw_scale: return "raw_scale";
    case LayerKind::residual: return "residual";
    case LayerKind::concat: return "concat";
    case LayerKind::sum_residual: return "sum_residual";
    case LayerKind::repeat: return "repeat";
    case LayerKind::moe: return "moe";
    case LayerKind::causal_self_attention: return "causal_self_attention";
    case LayerKind::rms_norm: return "rms_norm";
    case LayerKind::swiglu: return "swiglu";
  }
  return "unknown";
}

bool has_body(LayerKind kind) {
  return kind == LayerKind::residual || kind == LayerKind::concat || kind == LayerKind::sum_residual ||
         kind == LayerKind::repeat;
}

namespace {

struct Weight2d {
  std::string module;
  int64_t out = 0;
  int64_t in = 0;
};

struct VectorParam {
  std::string name;
  Shape shape;
};

class SpecRealizer {
 public:
  explicit SpecRealizer(const RealizeOptions& options) : options_(options) {}
  // Appends the realized draws to `layers` (names prefix.N), moving `width` along.
  void sequence(const std::vector<LayerDraw>& draws, const std::string& prefix, int64_t& width,
                nlohmann::json& layers);
  nlohmann::json linear_layer(const std::string& name, int64_t out, bool bias, int64_t& width);
  nlohmann::json moe_layer(const std::string& name, int64_t experts, int64_t hidden, int64_t width);
  nlohmann::json embedding_layer(const TokenDraw& tokens, int64_t dim);
  nlohmann::json head_layer(const TokenDraw& tokens, const std::string& name, int64_t dim, int64_t& width);
  bool realized_moe() const { return realized_moe_; }

 private:
  std::optional<nlohmann::json> layer(const LayerDraw& draw, const std::string& name, int64_t& width);
  std::optional<nlohmann::json> unfrozen_layer(const LayerDraw& draw, const std::string& name, int64_t& width);
  nlohmann::json tied_linear(const LayerDraw& draw, const std::string& name, int64_t& width);
  nlohmann::json broadcast(const LayerDraw& draw, const std::string& name, int64_t& width);
  nlohmann::json raw_scale(const LayerDraw& draw, const std::string& name, int64_t& width);
  nlohmann::json body_layer(const LayerDraw& draw, const std::string& name, int64_t& width);
  nlohmann::json attention(const LayerDraw& draw, const std::string& name, int64_t width);
  void add_weight(const std::string& module, int64_t out, int64_t in, bool bias);

  RealizeOptions options_;
  std::vector<Weight2d> weights_;     // earlier modules with a 2-D weight, for tie_to
  std::vector<VectorParam> vectors_;  // earlier [n] and [n, 1] parameters, for raw_scale's param
  bool realized_moe_ = false;
};

// [n] or [n, 1] with n the width or 1; on width 1 any n, the draw's size (0 included).
Shape broadcast_shape(const LayerDraw& draw, int64_t width) {
  const int64_t n = width == 1 ? draw.size : (draw.pick % 4 < 2 ? width : 1);
  return draw.pick % 2 == 0 ? Shape{n} : Shape{n, 1};
}

void SpecRealizer::sequence(const std::vector<LayerDraw>& draws, const std::string& prefix, int64_t& width,
                            nlohmann::json& layers) {
  for (const LayerDraw& draw : draws) {
    if (has_body(draw.kind) && draw.splice) {
      sequence(draw.body, prefix, width, layers);
      continue;
    }
    const std::string name = prefix + "." + std::to_string(layers.size());
    if (std::optional<nlohmann::json> realized = layer(draw, name, width)) layers.push_back(*realized);
  }
}

// Whether a realized layer owns a parameter that "requires_grad" could freeze.
bool owns_parameter(const nlohmann::json& layer) {
  const std::string type = layer.at("type");
  if (type == "tied_linear") return layer.at("bias").get<bool>();
  if (type == "raw_scale") return layer.contains("shape");
  return type == "linear" || type == "unused_linear" || type == "layer_norm" || type == "scale" || type == "bias" ||
         type == "moe" || type == "causal_self_attention" || type == "embedding" || type == "rms_norm" ||
         type == "swiglu";
}

std::optional<nlohmann::json> SpecRealizer::layer(const LayerDraw& draw, const std::string& name, int64_t& width) {
  std::optional<nlohmann::json> realized = unfrozen_layer(draw, name, width);
  if (realized && draw.frozen && owns_parameter(*realized)) (*realized)["requires_grad"] = false;
  return realized;
}

std::optional<nlohmann::json> SpecRealizer::unfrozen_layer(const LayerDraw& draw, const std::string& name,
                                                           int64_t& width) {
  switch (draw.kind) {
    case LayerKind::linear: return linear_layer(name, draw.size, draw.flag, width);
    case LayerKind::unused_linear: {
      int64_t unchanged = width;
      nlohmann::json json = linear_layer(name, draw.size, draw.flag, unchanged);
      json["type"] = "unused_linear";
      return json;
    }
    case LayerKind::tied_linear: return tied_linear(draw, name, width);
    case LayerKind::gelu:
    case LayerKind::relu: return nlohmann::json{{"type", layer_kind_name(draw.kind)}};
    case LayerKind::layer_norm:
      if (width == 0) return std::nullopt;  // a layer_norm needs at least one feature
      vectors_.push_back({name + ".weight", {width}});
      vectors_.push_back({name + ".bias", {width}});
      return nlohmann::json{{"type", "layer_norm"}};
    case LayerKind::scale:
    case LayerKind::bias: return broadcast(draw, name, width);
    case LayerKind::raw_scale: return raw_scale(draw, name, width);
    case LayerKind::moe:
      if (!options_.moe) return std::nullopt;
      return moe_layer(name, draw.count, draw.size, width);
    case LayerKind::residual:
    case LayerKind::concat:
    case LayerKind::sum_residual:
    case LayerKind::repeat: return body_layer(draw, name, width);
    case LayerKind::causal_self_attention: return attention(draw, name, width);
    case LayerKind::rms_norm:
      if (width == 0) return std::nullopt;  // an rms_norm needs at least one feature
      vectors_.push_back({name + ".weight", {width}});
      return nlohmann::json{{"type", "rms_norm"}};
    case LayerKind::swiglu: {
      // The draw's size is the hidden width (0 and smaller-than-W included), its flag the bias.
      add_weight(name + ".gate", draw.size, width, draw.flag);
      add_weight(name + ".up", draw.size, width, draw.flag);
      add_weight(name + ".down", width, draw.size, draw.flag);
      return nlohmann::json{{"type", "swiglu"}, {"hidden", draw.size}, {"bias", draw.flag}};
    }
  }
  return std::nullopt;
}

void SpecRealizer::add_weight(const std::string& module, int64_t out, int64_t in, bool bias) {
  weights_.push_back({module, out, in});
  // A weight over one input feature is a column too: a raw read of it collapses any width to 0
  // against its placeholder, as a frozen base's projection read by an adapter would.
  if (in == 1) vectors_.push_back({module + ".weight", {out, 1}});
  if (bias) vectors_.push_back({module + ".bias", {out}});
}

nlohmann::json SpecRealizer::linear_layer(const std::string& name, int64_t out, bool bias, int64_t& width) {
  add_weight(name, out, width, bias);
  width = out;
  return {{"type", "linear"}, {"out", out}, {"bias", bias}};
}

nlohmann::json SpecRealizer::tied_linear(const LayerDraw& draw, const std::string& name, int64_t& width) {
  struct Candidate {
    const Weight2d* weight;
    bool transpose;
  };
  std::vector<Candidate> candidates;
  for (const Weight2d& weight : weights_) {
    if (weight.in == width) candidates.push_back({&weight, false});
    if (weight.out == width) candidates.push_back({&weight, true});
  }
  // Nothing earlier fits this width: the draw becomes a plain linear.
  if (candidates.empty()) return linear_layer(name, draw.size, draw.flag, width);
  const Candidate& chosen = candidates[static_cast<size_t>(draw.pick) % candidates.size()];
  const bool bias = draw.count % 2 == 0;
  width = chosen.transpose ? chosen.weight->in : chosen.weight->out;
  if (bias) vectors_.push_back({name + ".bias", {width}});
  return {{"type", "tied_linear"}, {"tie_to", chosen.weight->module}, {"transpose", chosen.transpose}, {"bias", bias}};
}

nlohmann::json SpecRealizer::broadcast(const LayerDraw& draw, const std::string& name, int64_t& width) {
  const Shape shape = broadcast_shape(draw, width);
  const std::string local = draw.kind == LayerKind::scale ? "scale" : "bias";
  vectors_.push_back({name + "." + local, shape});
  width = *broadcast_layer_width(width, shape);
  return {{"type", local}, {"shape", shape}};
}

nlohmann::json SpecRealizer::raw_scale(const LayerDraw& draw, const std::string& name, int64_t& width) {
  if (options_.raw_foreign && draw.flag) {
    std::vector<const VectorParam*> candidates;
    std::vector<const VectorParam*> columns;  // [n, 1]: against its placeholder any width collapses to 0
    for (const VectorParam& param : vectors_) {
      if (!broadcast_layer_width(width, param.shape)) continue;
      candidates.push_back(&param);
      if (param.shape.size() == 2) columns.push_back(&param);
    }
    // An even pick wants a read that collapses to width 0 against a placeholder (the silent trap):
    // at width 1 any target does, wider only a column; without one it reads its own parameter.
    const auto& pool = draw.pick % 2 == 0 && width != 1 ? columns : candidates;
    if (!pool.empty()) {
      const VectorParam& target = *pool[static_cast<size_t>(draw.pick / 2) % pool.size()];
      width = *broadcast_layer_width(width, target.shape);
      return {{"type", "raw_scale"}, {"param", target.name}};
    }
  }
  const Shape shape = broadcast_shape(draw, width);
  vectors_.push_back({name + ".scale", shape});
  width = *broadcast_layer_width(width, shape);
  return {{"type", "raw_scale"}, {"shape", shape}};
}

nlohmann::json SpecRealizer::body_layer(const LayerDraw& draw, const std::string& name, int64_t& width) {
  const std::vector<LayerDraw> body_draws = draw.body.empty() ? std::vector<LayerDraw>{{.kind = LayerKind::gelu}}
                                                               : draw.body;
  const std::string prefix = name + ".layers";
  nlohmann::json body = nlohmann::json::array();
  int64_t body_width = width;
  sequence(body_draws, prefix, body_width, body);
  const bool keeps_width = draw.kind == LayerKind::residual || draw.kind == LayerKind::repeat;
  if (keeps_width && body_width != width) {
    // The body must return to its input width: project back with a linear.
    body.push_back(linear_layer(prefix + "." + std::to_string(body.size()), width, true, body_width));
  }
  nlohmann::json json = {{"type", layer_kind_name(draw.kind)}, {"layers", body}};
  if (draw.kind == LayerKind::repeat) json["times"] = draw.count;
  if (draw.kind == LayerKind::concat) width += body_width;
  return json;
}

// The most heads up to the draw's count that divide the width (any count divides width 0).
nlohmann::json SpecRealizer::attention(const LayerDraw& draw, const std::string& name, int64_t width) {
  int64_t heads = std::max<int64_t>(draw.count, 1);
  while (width % heads != 0) --heads;
  const bool qkv_bias = draw.flag, proj_bias = draw.pick % 2 == 0;
  add_weight(name + ".qkv", 3 * width, width, qkv_bias);
  add_weight(name + ".proj", width, width, proj_bias);
  return {{"type", "causal_self_attention"}, {"heads", heads}, {"bias", qkv_bias}, {"proj_bias", proj_bias}};
}

nlohmann::json SpecRealizer::embedding_layer(const TokenDraw& tokens, int64_t dim) {
  add_weight("layers.0", tokens.vocab, dim, false);
  nlohmann::json json = {{"type", "embedding"}, {"dim", dim}};
  if (tokens.frozen_embedding) json["requires_grad"] = false;
  return json;
}

// The LM head: tied to the embedding (GPT-2's) when the rows are back at its width, else a linear.
nlohmann::json SpecRealizer::head_layer(const TokenDraw& tokens, const std::string& name, int64_t dim,
                                        int64_t& width) {
  if (tokens.tied_head && width == dim) {
    width = tokens.vocab;
    return {{"type", "tied_linear"}, {"tie_to", "layers.0"}, {"transpose", false}, {"bias", false}};
  }
  // On rows of width 0 the logits would be the bias alone, the same for every token: starting at 0,
  // they make the softmax exactly uniform, and where the targets are balanced its gradient is 0 but
  // for rounding, which AdamW turns into lr-sized steps that differ between any two references.
  // Without a bias the logits stay 0 and no gradient exists at all.
  return linear_layer(name, tokens.vocab, /*bias=*/width > 0, width);
}

nlohmann::json SpecRealizer::moe_layer(const std::string& name, int64_t experts, int64_t hidden, int64_t width) {
  realized_moe_ = true;
  add_weight(name + ".gate", experts, width, true);
  for (int64_t e = 0; e < experts; ++e) {
    const std::string expert = name + ".experts." + std::to_string(e);
    add_weight(expert + ".fc", hidden, width, true);
    add_weight(expert + ".proj", width, hidden, true);
  }
  return {{"type", "moe"}, {"experts", experts}, {"hidden", hidden}};
}

}  // namespace

nlohmann::json realize_model_spec(int64_t input_width, bool cross_entropy, const std::vector<LayerDraw>& draws,
                                  const RealizeOptions& options, const TokenDraw& tokens) {
  SpecRealizer realizer(options);
  nlohmann::json layers = nlohmann::json::array();
  int64_t width = input_width;
  if (tokens.vocab > 0) layers.push_back(realizer.embedding_layer(tokens, input_width));
  realizer.sequence(draws, "layers", width, layers);
  if (options.require_moe && !realizer.realized_moe()) {
    layers.push_back(realizer.moe_layer("layers." + std::to_string(layers.size()), 2, 2, width));
  }
  const std::string last = "layers." + std::to_string(layers.size());
  if (tokens.vocab > 0) {
    layers.push_back(realizer.head_layer(tokens, last, input_width, width));
  } else if (width < 1) {
    layers.push_back(realizer.linear_layer(last, 2, true, width));
  }
  nlohmann::json spec = {{"zero3_model_spec", 1}, {"name", "fuzz"}, {"kind", "sequential"}};
  if (tokens.vocab > 0) {
    spec["vocab"] = tokens.vocab;
    spec["context"] = tokens.context;
  } else {
    spec["input_width"] = input_width;
  }
  spec["loss"] = cross_entropy || tokens.vocab > 0 ? "cross_entropy" : "mse";
  spec["layers"] = layers;
  return spec;
}

}  // namespace zero3
