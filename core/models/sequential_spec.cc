// Sequential model spec: one builder per layer type, widths flowing from layer to layer.
#include "core/models/sequential_spec.h"

#include <cmath>
#include <map>

#include "core/nn/activation.h"
#include "core/nn/attention.h"
#include "core/nn/broadcast_layers.h"
#include "core/base/errors.h"
#include "core/nn/embedding.h"
#include "core/base/json_reader.h"
#include "core/nn/layer_norm.h"
#include "core/nn/linear.h"
#include "core/nn/moe.h"
#include "core/nn/repeat.h"
#include "core/nn/residual.h"
#include "core/nn/rms_norm.h"
#include "core/nn/swiglu.h"
#include "core/nn/tied_linear.h"
#include "core/nn/unused_linear.h"

namespace zero3 {

namespace {

constexpr int64_t kExpertsMax = 4096;
constexpr int64_t kRepeatMax = 1024;
// Every training batch holds micro_batch x input_width dense features: a width the teacher data
// could never fill in memory is refused at the spec, not by an allocation failure mid-run.
constexpr int64_t kInputWidthMax = int64_t{1} << 20;
// A token model's batch holds micro_batch x context ids, and its logits rows x vocab: the same bound.
constexpr int64_t kContextMax = int64_t{1} << 20;
constexpr int64_t kVocabMax = int64_t{1} << 24;
constexpr int64_t kHeadsMax = int64_t{1} << 20;

struct BuiltLayer {
  std::unique_ptr<Layer> layer;
  int64_t width;  // the output width
};

// Scaled so that activations keep unit scale whatever the width (a width of 0 is legal).
float fan_in_std(int64_t in_features) {
  return 1.0f / std::sqrt(static_cast<float>(std::max<int64_t>(in_features, 1)));
}

// The candidates an error lists: the first 12 names and "...", or "none so far".
std::string listed_names(const std::map<std::string, Parameter*>& names) {
  std::vector<std::string> words;
  for (const auto& [name, unused] : names) {
    if (words.size() == 12) {
      words.push_back("...");
      break;
    }
    words.push_back(name);
  }
  return words.empty() ? "none so far" : join_words(words);
}

class SequentialBuilder {
 public:
  // `sequence_length`: the tokens of one example (a token model's context; 1 for feature vectors),
  // which attention needs to see rows as sequences. `vocab` > 0: a token model, whose layers.0 is
  // the embedding.
  SequentialBuilder(int64_t sequence_length, int64_t vocab) : sequence_length_(sequence_length), vocab_(vocab) {}
  std::unique_ptr<Sequential> sequence(const SpecNode& list, const std::string& prefix, int64_t width,
                                       int64_t* out_width);
  const std::map<std::string, Parameter*>& parameters() const { return parameters_; }

 private:
  // A layer with its parameters frozen when the spec says "requires_grad": false.
  BuiltLayer layer(const SpecNode& node, const std::string& name, int64_t width);
  BuiltLayer unfrozen_layer(const SpecNode& node, const std::string& name, int64_t width);
  BuiltLayer linear(const SpecNode& node, int64_t width);
  BuiltLayer tied_linear(const SpecNode& node, int64_t width);
  BuiltLayer broadcast(const SpecNode& node, const std::string& type, int64_t width);
  BuiltLayer raw_scale(const SpecNode& node, int64_t width);
  BuiltLayer body_layer(const SpecNode& node, const std::string& type, const std::string& name, int64_t width);
  BuiltLayer moe(const SpecNode& node, int64_t width);
  BuiltLayer embedding(const SpecNode& node, const std::string& name);
  BuiltLayer attention(const SpecNode& node, int64_t width);
  // Records the subtree's parameters and 2-D weights under the names finalize() will give them.
  void remember(const Module& module, const std::string& name);

  std::map<std::string, Parameter*> weights_;     // module name -> its 2-D "weight"
  std::map<std::string, Parameter*> parameters_;  // parameter name -> parameter
  int64_t sequence_length_;
  int64_t vocab_;
};

std::unique_ptr<Sequential> SequentialBuilder::sequence(const SpecNode& list, const std::string& prefix,
                                                        int64_t width, int64_t* out_width) {
  auto layers = std::make_unique<Sequential>();
  const size_t count = list.array_size();
  for (size_t i = 0; i < count; ++i) {
    const std::string name = prefix + "." + std::to_string(i);
    BuiltLayer built = layer(list.at(i), name, width);
    remember(*built.layer, name);
    layers->append(std::move(built.layer));
    width = built.width;
  }
  *out_width = width;
  return layers;
}

BuiltLayer SequentialBuilder::layer(const SpecNode& node, const std::string& name, int64_t width) {
  BuiltLayer built = unfrozen_layer(node, name, width);
  const SpecNode requires_grad = node.at("requires_grad");
  // Read only when written, so that specs without it resolve as they always have.
  if (requires_grad.present() && !requires_grad.boolean()) {
    const std::vector<Parameter*> own = built.layer->all_parameters();
    if (own.empty()) requires_grad.fail("expected a layer that owns a parameter to freeze; this one owns none");
    for (Parameter* param : own) param->set_requires_grad(false);
  }
  return built;
}

BuiltLayer SequentialBuilder::unfrozen_layer(const SpecNode& node, const std::string& name, int64_t width) {
  node.require_object("a layer");
  const std::string type = node.at("type").one_of(sequential_layer_types());
  const std::string what = "a " + type + " layer";
  if (type == "linear" || type == "unused_linear") {
    node.expect_object({"type", "out", "bias", "requires_grad"}, what);
    return linear(node, width);
  }
  if (type == "tied_linear") {
    node.expect_object({"type", "tie_to", "transpose", "bias", "requires_grad"}, what);
    return tied_linear(node, width);
  }
  if (type == "gelu" || type == "relu") {
    node.expect_object({"type"}, what);
    return {std::make_unique<Activation>(type == "gelu" ? ActivationKind::gelu : ActivationKind::relu), width};
  }
  if (type == "layer_norm") {
    node.expect_object({"type", "requires_grad"}, what);
    if (width < 1) node.fail("a layer_norm needs an input width of at least 1, got 0");
    return {std::make_unique<LayerNorm>(width), width};
  }
  if (type == "rms_norm") {
    node.expect_object({"type", "requires_grad"}, what);
    if (width < 1) node.fail("an rms_norm needs an input width of at least 1, got 0");
    return {std::make_unique<RmsNorm>(width), width};
  }
  if (type == "swiglu") {
    node.expect_object({"type", "hidden", "bias", "requires_grad"}, what);
    const int64_t hidden = node.at("hidden").integer(0);
    const bool has_bias = node.at("bias").boolean_or(false);
    return {std::make_unique<SwiGlu>(width, hidden, has_bias, fan_in_std(width), fan_in_std(hidden)), width};
  }
  if (type == "scale" || type == "bias") {
    node.expect_object({"type", "shape", "requires_grad"}, what);
    return broadcast(node, type, width);
  }
  if (type == "raw_scale") {
    node.expect_object({"type", "param", "shape", "requires_grad"}, what);
    return raw_scale(node, width);
  }
  if (type == "moe") {
    node.expect_object({"type", "experts", "hidden", "requires_grad"}, what);
    return moe(node, width);
  }
  if (type == "embedding") {
    node.expect_object({"type", "dim", "requires_grad"}, what);
    return embedding(node, name);
  }
  if (type == "causal_self_attention") {
    node.expect_object({"type", "heads", "bias", "proj_bias", "requires_grad"}, what);
    return attention(node, width);
  }
  node.expect_object(type == "repeat" ? std::vector<std::string>{"type", "times", "layers"}
                                      : std::vector<std::string>{"type", "layers"},
                     what);
  return body_layer(node, type, name, width);
}

BuiltLayer SequentialBuilder::linear(const SpecNode& node, int64_t width) {
  const int64_t out = node.at("out").integer(0);
  const bool has_bias = node.at("bias").boolean_or(true);
  if (node.at("type").text() == "unused_linear") {
    return {std::make_unique<UnusedLinear>(width, out, has_bias, fan_in_std(width)), width};
  }
  return {std::make_unique<Linear>(width, out, has_bias, fan_in_std(width)), out};
}

BuiltLayer SequentialBuilder::tied_linear(const SpecNode& node, int64_t width) {
  const SpecNode tie_to = node.at("tie_to");
  const std::string target = tie_to.text();
  const auto found = weights_.find(target);
  if (found == weights_.end()) {
    tie_to.fail_expected("the name of an earlier module with a 2-D weight (" + listed_names(weights_) + ")");
  }
  const bool transposed = node.at("transpose").boolean_or(false);
  const bool has_bias = node.at("bias").boolean_or(false);
  auto layer = std::make_unique<TiedLinear>(*found->second, transposed, has_bias);
  if (layer->in_features() != width) {
    node.fail("expected an input width of " + std::to_string(layer->in_features()) + " to use " + target +
              ".weight " + shape_str(found->second->shape()) + (transposed ? " transposed" : "") + ", got width " +
              std::to_string(width));
  }
  const int64_t out = layer->out_features();
  return {std::move(layer), out};
}

BuiltLayer SequentialBuilder::broadcast(const SpecNode& node, const std::string& type, int64_t width) {
  const SpecNode shape_node = node.at("shape");
  const Shape shape = shape_node.shape();
  const auto out = broadcast_layer_width(width, shape);
  if (!out) {
    shape_node.fail_expected("[n] or [n, 1] with n equal to the input width " + std::to_string(width) +
                             " or 1 (any n when the width is 1)");
  }
  if (type == "scale") return {std::make_unique<Scale>(shape), *out};
  return {std::make_unique<Bias>(shape), *out};
}

BuiltLayer SequentialBuilder::raw_scale(const SpecNode& node, int64_t width) {
  const SpecNode param_node = node.at("param");
  const SpecNode shape_node = node.at("shape");
  if (param_node.present() == shape_node.present()) {
    node.fail("expected exactly one of \"param\" (another module's parameter) and \"shape\" (its own)");
  }
  std::unique_ptr<RawScale> layer;
  if (shape_node.present()) {
    layer = std::make_unique<RawScale>(shape_node.shape());
  } else {
    const std::string name = param_node.text();
    const auto found = parameters_.find(name);
    if (found == parameters_.end()) {
      param_node.fail_expected("the name of an earlier parameter (" + listed_names(parameters_) + ")");
    }
    layer = std::make_unique<RawScale>(*found->second);
  }
  const Shape& shape = layer->target().shape();
  const auto out = broadcast_layer_width(width, shape);
  if (!out) {
    (shape_node.present() ? shape_node : param_node)
        .fail("expected a parameter of shape [n] or [n, 1] with n equal to the input width " + std::to_string(width) +
              " or 1 (any n when the width is 1), got " + shape_str(shape));
  }
  return {std::move(layer), *out};
}

BuiltLayer SequentialBuilder::body_layer(const SpecNode& node, const std::string& type, const std::string& name,
                                         int64_t width) {
  const int64_t times = type == "repeat" ? node.at("times").integer(1, kRepeatMax) : 1;
  const SpecNode body_node = node.at("layers");
  int64_t body_width = 0;
  auto body = sequence(body_node, name + ".layers", width, &body_width);
  const bool keeps_width = type == "residual" || type == "repeat";
  if (keeps_width && body_width != width) {
    body_node.fail("expected layers that keep the width " + std::to_string(width) + " (a " + type +
                   " feeds its input forward), got width " + std::to_string(body_width));
  }
  if (type == "repeat") return {std::make_unique<Repeat>(std::move(body), times), width};
  if (type == "residual") return {std::make_unique<Skip>(SkipKind::residual, std::move(body)), width};
  if (type == "concat") return {std::make_unique<Skip>(SkipKind::concat, std::move(body)), width + body_width};
  return {std::make_unique<Skip>(SkipKind::sum_residual, std::move(body)), width};
}

BuiltLayer SequentialBuilder::moe(const SpecNode& node, int64_t width) {
  const int64_t experts = node.at("experts").integer(1, kExpertsMax);
  const int64_t hidden = node.at("hidden").integer(0);
  return {std::make_unique<Moe>(width, experts, hidden, fan_in_std(width)), width};
}

BuiltLayer SequentialBuilder::embedding(const SpecNode& node, const std::string& name) {
  if (vocab_ == 0 || name != "layers.0") {
    node.at("type").fail("an embedding takes token ids: it can only be layers.0 of a model with a \"vocab\"");
  }
  const int64_t dim = node.at("dim").integer(0);
  return {std::make_unique<TokenEmbedding>(vocab_, dim, fan_in_std(dim)), dim};
}

BuiltLayer SequentialBuilder::attention(const SpecNode& node, int64_t width) {
  const SpecNode heads_node = node.at("heads");
  const int64_t heads = heads_node.integer(1, kHeadsMax);
  if (width % heads != 0) {
    heads_node.fail("expected a number of heads that divides the input width " + std::to_string(width) + ", got " +
                    std::to_string(heads));
  }
  const AttentionOptions options{.qkv_bias = node.at("bias").boolean_or(true),
                                 .proj_bias = node.at("proj_bias").boolean_or(true),
                                 .rows_per_sequence = sequence_length_};
  // GPT-2's N(0, 0.02): the key bias moves scores by a per-row constant, so its gradient is 0 but for
  // rounding, which AdamW scales up to lr-sized steps; small projections keep that rounding small.
  constexpr float kGpt2InitStd = 0.02f;
  return {std::make_unique<CausalSelfAttention>(width, heads, kGpt2InitStd, kGpt2InitStd, options), width};
}

void SequentialBuilder::remember(const Module& module, const std::string& name) {
  for (const auto& param : module.parameters()) {
    parameters_[name + "." + param->local_name()] = param.get();
    if (param->local_name() == "weight" && param->shape().size() == 2) weights_[name] = param.get();
  }
  for (const auto& child : module.children()) remember(*child, name + "." + child->local_name());
}

}  // namespace

const std::vector<std::string>& sequential_layer_types() {
  static const std::vector<std::string> types = {
      "linear", "tied_linear", "unused_linear", "gelu", "relu", "layer_norm", "scale", "bias", "raw_scale",
      "residual", "concat", "sum_residual", "repeat", "moe", "embedding", "causal_self_attention", "rms_norm", "swiglu"};
  return types;
}

std::unique_ptr<SequentialModel> build_sequential_model(const SpecNode& spec) {
  spec.expect_object({"zero3_model_spec", "name", "kind", "input_width", "vocab", "context", "loss", "layers",
                      "checkpoint_activations"},
                     "a sequential model spec");
  const SpecNode vocab_node = spec.at("vocab");
  const bool tokens = vocab_node.present();
  TokenShape token_shape;
  int64_t input_width = 0;
  if (tokens) {
    if (spec.at("input_width").present()) {
      spec.at("input_width").fail("a token model (with \"vocab\") reads \"context\" token ids per example; expected "
                                  "no input_width");
    }
    token_shape = {.vocab = vocab_node.integer(1, kVocabMax), .context = spec.at("context").integer(1, kContextMax)};
  } else {
    if (spec.at("context").present()) spec.at("context").fail("expected \"context\" only with a \"vocab\"");
    input_width = spec.at("input_width").integer(0, kInputWidthMax);
  }
  const std::string loss_name = spec.at("loss").one_of({"mse", "cross_entropy"});
  if (tokens && loss_name != "cross_entropy") {
    spec.at("loss").fail_expected("\"cross_entropy\" (a token model predicts the next token)");
  }
  const SpecNode layers = spec.at("layers");
  if (tokens) {
    const SpecNode first = layers.at(size_t{0});
    const bool embedding_first = layers.array_size() > 0 && first.value().is_object() &&
                                 first.value().value("type", nlohmann::json()) == "embedding";
    if (!embedding_first) first.fail_expected("an embedding layer first: a token model's input is token ids");
  }
  int64_t output_width = 0;
  SequentialBuilder builder(tokens ? token_shape.context : 1, token_shape.vocab);
  auto stack = builder.sequence(layers, "layers", input_width, &output_width);
  if (output_width < 1) {
    layers.fail("expected the last layer to output at least 1 value per example for the " + loss_name +
                " loss, got width 0");
  }
  if (tokens && output_width != token_shape.vocab) {
    layers.fail("expected the last layer to output one logit per token of the vocab (" +
                std::to_string(token_shape.vocab) + "), got width " + std::to_string(output_width));
  }
  const SequentialLoss loss = loss_name == "mse" ? SequentialLoss::mse : SequentialLoss::cross_entropy;
  auto model = std::make_unique<SequentialModel>(std::move(stack), loss, input_width, output_width, token_shape);
  // tie_to and param resolved names before finalize() assigned them; both must agree.
  for (const auto& [name, param] : builder.parameters()) {
    ZERO3_CHECK(param->name() == name, "spec name " + name + " became " + param->name());
  }
  return model;
}

}  // namespace zero3
