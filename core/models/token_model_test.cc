// Sequential token models (MODEL_SPEC.md "Token models"): what the spec refuses, with the path and
// what was expected; the data and loss they train on; and that a built one learns the chain.
#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "core/models/markov_data.h"
#include "core/models/model_zoo.h"
#include "core/models/sequential_model.h"
#include "core/models/spec_error_test_support.h"

namespace zero3 {
namespace {

// Bad token specs, from the source their messages name.
std::string tokens_error(const std::string& spec_text) { return spec_error(spec_text, "specs/tokens.json"); }

std::string tokens(const std::string& layers, const std::string& extra = "") {
  return R"({"zero3_model_spec": 1, "kind": "sequential", "vocab": 6, "context": 3, "loss": "cross_entropy", )" +
         extra + R"("layers": )" + layers + "}";
}

TEST(TokenModel, TheFirstLayerMustBeTheEmbedding) {
  expect_mentions(tokens_error(tokens(R"([{"type": "linear", "out": 6}])")),
                  {"specs/tokens.json", "/layers/0", "an embedding layer first"});
  expect_mentions(tokens_error(tokens("[]")), {"/layers/0", "an embedding layer first"});
}

TEST(TokenModel, AnEmbeddingElsewhereIsRefused) {
  expect_mentions(tokens_error(tokens(R"([{"type": "embedding", "dim": 4}, {"type": "embedding", "dim": 6}])")),
                  {"/layers/1/type", "only be layers.0 of a model with a \"vocab\""});
  expect_mentions(tokens_error(R"({"zero3_model_spec": 1, "kind": "sequential", "input_width": 2, "loss": "mse",
                                  "layers": [{"type": "embedding", "dim": 2}]})"),
                  {"/layers/0/type", "only be layers.0"});
}

TEST(TokenModel, InputWidthContextAndLossMustFitATokenModel) {
  expect_mentions(tokens_error(tokens(R"([{"type": "embedding", "dim": 6}])", R"("input_width": 4, )")),
                  {"/input_width", "expected no input_width"});
  expect_mentions(tokens_error(R"({"zero3_model_spec": 1, "kind": "sequential", "input_width": 2, "context": 4,
                                  "loss": "mse", "layers": [{"type": "linear", "out": 1}]})"),
                  {"/context", "only with a \"vocab\""});
  expect_mentions(tokens_error(R"({"zero3_model_spec": 1, "kind": "sequential", "vocab": 6, "loss": "cross_entropy",
                                  "layers": [{"type": "embedding", "dim": 6}]})"),
                  {"/context", "missing"});
  expect_mentions(tokens_error(R"({"zero3_model_spec": 1, "kind": "sequential", "vocab": 6, "context": 2,
                                  "loss": "mse", "layers": [{"type": "embedding", "dim": 6}]})"),
                  {"/loss", "\"cross_entropy\" (a token model predicts the next token)"});
}

TEST(TokenModel, TheHeadMustGiveOneLogitPerToken) {
  expect_mentions(tokens_error(tokens(R"([{"type": "embedding", "dim": 4}, {"type": "linear", "out": 5}])")),
                  {"/layers", "one logit per token of the vocab (6)", "got width 5"});
}

TEST(TokenModel, AttentionHeadsMustDivideTheWidth) {
  expect_mentions(tokens_error(tokens(R"([{"type": "embedding", "dim": 4},
                                        {"type": "causal_self_attention", "heads": 3},
                                        {"type": "tied_linear", "tie_to": "layers.0"}])")),
                  {"/layers/1/heads", "divides the input width 4", "got 3"});
  expect_mentions(tokens_error(tokens(R"([{"type": "embedding", "dim": 4},
                                        {"type": "causal_self_attention", "heads": 2, "bais": true}])")),
                  {"/layers/1/bais", "unknown key", "proj_bias"});
}

TEST(TokenModel, TrainsOnTheMarkovChainOverItsVocabAndContext) {
  const BuiltModel built = build_model("transformer-tiny", {.seed = 3, .data_file = ""});
  const auto& data = dynamic_cast<const MarkovData&>(*built.data);
  const Batch batch = data.batch(0, 0, 0, 1, 2);
  EXPECT_EQ(batch.inputs.shape(), (Shape{2, 8}));
  EXPECT_EQ(batch.targets.shape(), (Shape{2, 8}));
  const auto& model = dynamic_cast<const SequentialModel&>(*built.model);
  EXPECT_EQ(model.tokens().vocab, 32);
  EXPECT_EQ(model.tokens().context, 8);
  EXPECT_EQ(model.output_width(), 32);
}

}  // namespace
}  // namespace zero3
