// Bad model specs: every error class names the source, the JSON path and what was expected.
#include "core/models/model_spec.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "core/base/json_reader.h"
#include "core/models/model_zoo.h"
#include "core/models/spec_error_test_support.h"

namespace zero3 {
namespace {

const char* kLayersPrefix = R"({"zero3_model_spec": 1, "kind": "sequential", "input_width": 8, "loss": "mse", "layers": )";

std::string sequential(const std::string& layers) { return kLayersPrefix + layers + "}"; }

TEST(ModelSpec, CheckpointActivationsNamesModulesTheModelHas) {
  const BuiltModel built = build_model_from_spec(
      nlohmann::json::parse(R"({"zero3_model_spec": 1, "kind": "gpt", "vocab": 8, "context": 4, "layers": 2,
                                "heads": 1, "width": 4, "checkpoint_activations": ["transformer_block"]})"),
      "specs/gpt.json", {});
  EXPECT_EQ(checkpointed_names(built, {"h.0.mlp"}), (std::vector<std::string>{"transformer_block", "h.0.mlp"}));
  expect_mentions(spec_error(R"({"zero3_model_spec": 1, "kind": "gpt", "vocab": 8, "context": 4, "layers": 1,
                                 "heads": 1, "width": 4, "checkpoint_activations": ["block"]})"),
                  {"specs/bad.json: at /checkpoint_activations: 'block' is neither", "transformer_block"});
}

TEST(ModelSpec, NegativeWidthNamesSourcePathAndExpectation) {
  const std::string message = spec_error(sequential(
      R"([{"type": "linear", "out": 4}, {"type": "gelu"}, {"type": "linear", "out": 4}, {"type": "linear", "out": -2}])"));
  EXPECT_EQ(message, "specs/bad.json: at /layers/3/out: expected a non-negative integer, got -2");
}

TEST(ModelSpec, WrongTypeNamesTheValueFound) {
  expect_mentions(spec_error(R"({"zero3_model_spec": 1, "kind": "sequential", "input_width": "8", "loss": "mse",
                                 "layers": []})"),
                  {"specs/bad.json", "/input_width", "expected a non-negative integer", "got \"8\""});
  expect_mentions(spec_error(sequential(R"([{"type": "linear", "out": 4, "bias": "yes"}])")),
                  {"specs/bad.json", "/layers/0/bias", "expected true or false", "got \"yes\""});
}

TEST(ModelSpec, UnknownKeyIsNamedWithTheAllowedKeys) {
  expect_mentions(spec_error(sequential(R"([{"type": "linear", "outt": 4}])")),
                  {"specs/bad.json", "/layers/0/outt", "unknown key \"outt\"", "allowed keys: type, out, bias"});
  expect_mentions(spec_error(R"({"zero3_model_spec": 1, "kind": "gpt", "vocab": 8, "context": 4, "layers": 1,
                                 "heads": 1, "width": 4, "widht": 4})"),
                  {"specs/bad.json", "/widht", "unknown key \"widht\"", "vocab, context, layers, heads, width"});
}

TEST(ModelSpec, UnknownLayerTypeListsTheKnownTypes) {
  expect_mentions(spec_error(sequential(R"([{"type": "linear", "out": 4}, {"type": "conv"}])")),
                  {"specs/bad.json", "/layers/1/type", "expected one of linear, tied_linear", "moe", "got \"conv\""});
}

TEST(ModelSpec, MissingVersionIsRejected) {
  expect_mentions(spec_error(R"({"kind": "sequential", "input_width": 8, "loss": "mse", "layers": []})"),
                  {"specs/bad.json", "/zero3_model_spec", "missing", "version 1"});
}

TEST(ModelSpec, NewerVersionIsRejected) {
  expect_mentions(spec_error(R"({"zero3_model_spec": 2, "kind": "sequential", "input_width": 8, "loss": "mse",
                                 "layers": [{"type": "linear", "out": 1}]})"),
                  {"specs/bad.json", "/zero3_model_spec", "version 2 is newer than this build supports", "version 1"});
}

TEST(ModelSpec, TieToANonexistentModuleListsTheCandidates) {
  expect_mentions(spec_error(sequential(
                      R"([{"type": "linear", "out": 4}, {"type": "gelu"}, {"type": "tied_linear", "tie_to": "layers.9"}])")),
                  {"specs/bad.json", "/layers/2/tie_to", "an earlier module with a 2-D weight", "layers.0",
                   "got \"layers.9\""});
}

TEST(ModelSpec, NestedModulesAreNamedByTheirJsonPaths) {
  const nlohmann::json spec = nlohmann::json::parse(sequential(
      R"([{"type": "residual", "layers": [{"type": "linear", "out": 8}]},
          {"type": "tied_linear", "tie_to": "layers.0.layers.0", "bias": true},
          {"type": "raw_scale", "param": "layers.1.bias"}])"));
  BuiltModel built = build_model_from_spec(spec, "nested.json", {});
  EXPECT_EQ(built.model->parameter("layers.0.layers.0.weight").shape(), (Shape{8, 8}));
  EXPECT_EQ(built.model->parameter("layers.1.bias").shape(), (Shape{8}));
  EXPECT_EQ(built.model->parameters().size(), 3u);
}

TEST(ModelSpec, RawScaleNeedsExactlyOneOfParamAndShapeAndAKnownParameter) {
  expect_mentions(spec_error(sequential(R"([{"type": "raw_scale", "param": "layers.0.scale", "shape": [1]}])")),
                  {"specs/bad.json", "/layers/0", "exactly one of \"param\""});
  expect_mentions(spec_error(sequential(R"([{"type": "scale", "shape": [8]}, {"type": "raw_scale", "param": "layers.0.scal"}])")),
                  {"specs/bad.json", "/layers/1/param", "layers.0.scale", "got \"layers.0.scal\""});
}

TEST(ModelSpec, MissingRequiredKeyNamesItsPath) {
  expect_mentions(spec_error(sequential(R"([{"type": "linear"}])")),
                  {"specs/bad.json", "/layers/0/out", "missing; expected a non-negative integer"});
}

TEST(ModelSpec, BodyThatChangesTheWidthOfAResidualIsRejected) {
  expect_mentions(spec_error(sequential(R"([{"type": "residual", "layers": [{"type": "linear", "out": 3}]}])")),
                  {"specs/bad.json", "/layers/0/layers", "keep the width 8", "got width 3"});
}

TEST(ModelSpec, ScaleShapeThatDoesNotBroadcastIsRejected) {
  expect_mentions(spec_error(sequential(R"([{"type": "scale", "shape": [3]}])")),
                  {"specs/bad.json", "/layers/0/shape", "input width 8", "got [3]"});
}

TEST(ModelSpec, HeadsThatDoNotDivideTheWidthAreRejected) {
  expect_mentions(spec_error(R"({"zero3_model_spec": 1, "kind": "gpt", "vocab": 8, "context": 4, "layers": 1,
                                 "heads": 3, "width": 4})"),
                  {"specs/bad.json", "/heads", "a divisor of the width 4", "got 3"});
}

TEST(ModelSpec, ZeroWidthOutputIsRejectedForTheLoss) {
  expect_mentions(spec_error(sequential(R"([{"type": "linear", "out": 0}])")),
                  {"specs/bad.json", "/layers", "at least 1 value per example", "got width 0"});
}

TEST(ModelSpec, ErrorsFromAFileNameTheFile) {
  const auto path = std::filesystem::temp_directory_path() / ("zero3_spec_" + std::to_string(getpid()) + ".json");
  std::ofstream(path) << sequential(R"([{"type": "linear", "out": -1}])");
  try {
    build_model(path.string(), {});
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& error) {
    expect_mentions(error.what(), {path.string(), "/layers/0/out"});
  }
  std::ofstream(path) << "{\"zero3_model_spec\": 1,";
  try {
    build_model(path.string(), {});
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& error) {
    expect_mentions(error.what(), {path.string(), "JSON"});
  }
  std::filesystem::remove(path);
}

// Sizes whose element counts would overflow 64 bits are refused at the spec (tools/e2e/input_fuzz.py
// found `inspect` printing a wrapped-around total and UBSan the signed overflow behind it).
TEST(ModelSpec, SizesPastWhatSixtyFourBitsCountAreRefusedAtTheirPath) {
  expect_mentions(spec_error(R"({"zero3_model_spec": 1, "kind": "gpt", "vocab": 8, "context": 4, "layers": 1,
                                 "heads": 2, "width": 1073741824})"),
                  {"specs/bad.json", "/width", "up to 1048576"});
  expect_mentions(spec_error(sequential(R"([{"type": "scale", "shape": [2147483647, 2147483647, 2147483647]}])")),
                  {"specs/bad.json", "/layers/0/shape", "at most 2^48 elements"});
  expect_mentions(spec_error(R"({"zero3_model_spec": 1, "kind": "sequential", "input_width": 2097152, "loss": "mse",
                                 "layers": [{"type": "linear", "out": 1}]})"),
                  {"specs/bad.json", "/input_width", "up to 1048576"});
  // 2^20 widths, 4096 experts of 2^31 - 1 hidden units: each shape fits, the model does not.
  expect_mentions(spec_error(R"({"zero3_model_spec": 1, "kind": "sequential", "input_width": 1048576, "loss": "mse",
                                 "layers": [{"type": "moe", "experts": 4096, "hidden": 2147483647}]})"),
                  {"specs/bad.json", "at /", "at most 2^50 parameter elements"});
}

// A file of 100,000 nested arrays used to overflow the stack (nlohmann's dump and destructor
// recurse); now it is an InputError naming where the nesting passed the bound.
TEST(ModelSpec, NestingPastTheBoundIsAnInputErrorNamingThePath) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  try {
    parse_json_text(R"({"zero3_model_spec": 1, "layers": [)" + deep + "]}", "specs/deep.json");
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& error) {
    expect_mentions(error.what(), {"specs/deep.json", "at /layers/0/0/0", "at most 100 nested"});
  }
  EXPECT_NO_THROW(parse_json_text(std::string(100, '[') + std::string(100, ']'), "specs/ok.json"));
}

// A number past double's range made nlohmann's parser throw out_of_range, which left every reader as
// an internal error (exit 2; CI input fuzz seed 2921047652 case 46 wrote 0.00010703894E691818123).
TEST(ModelSpec, ANumberPastDoublesRangeIsAnInputErrorNamingItsPath) {
  const auto error_of = [](const std::string& text) {
    try {
      parse_json_text(text, "specs/huge.json");
    } catch (const InputError& error) {
      return std::string(error.what());
    }
    ADD_FAILURE() << "expected InputError for " << text;
    return std::string();
  };
  expect_mentions(error_of(R"({"layers": [{"out": 1}, {"out": 2E400}]})"),
                  {"specs/huge.json", "at /layers/1/out", "double's range"});
  expect_mentions(error_of(R"({"betas": [0.9, -1e99999]})"), {"specs/huge.json", "at /betas/1:", "double's range"});
  expect_mentions(error_of("1e400"), {"specs/huge.json", "at /:", "double's range"});
}

TEST(ModelSpec, UnknownNameListsTheBuiltins) {
  try {
    build_model("no-such-model", {});
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& error) {
    expect_mentions(error.what(), {"no-such-model", "gpt-tiny", "mlp-tiny", "zero-sized"});
  }
  EXPECT_THROW(builtin_model_spec("no-such-model"), InputError);
}

TEST(ModelSpec, EveryExampleInModelSpecMdBuildsAndMatchesItsBuiltin) {
  const auto doc = std::filesystem::path(ZERO3_MODELS_DIR) / "MODEL_SPEC.md";
  std::ifstream file(doc);
  ASSERT_TRUE(file) << doc;
  std::string line, block;
  bool in_block = false;
  int examples = 0;
  while (std::getline(file, line)) {
    if (line == "```json") {
      in_block = true;
      block.clear();
    } else if (in_block && line == "```") {
      in_block = false;
      const nlohmann::json spec = nlohmann::json::parse(block);
      SCOPED_TRACE(spec.dump());
      build_model_from_spec(spec, doc.string(), {});
      const std::string name = spec["name"];
      const auto builtins = builtin_model_names();
      if (std::find(builtins.begin(), builtins.end(), name) != builtins.end()) {
        EXPECT_EQ(spec, builtin_model_spec(name));
      }
      ++examples;
    } else if (in_block) {
      block += line + "\n";
    }
  }
  EXPECT_EQ(examples, 5);
}

TEST(ModelSpec, ResolvedSpecRecordsEveryDefault) {
  BuiltModel built = build_model("mlp-tiny", {});
  EXPECT_EQ(built.spec["zero3_model_spec"], 1);
  EXPECT_EQ(built.spec["name"], "mlp-tiny");
  for (const auto& layer : built.spec["layers"]) {
    if (layer["type"] == "linear") {
      EXPECT_EQ(layer["bias"], true) << layer.dump();
    }
  }
  const nlohmann::json spec = nlohmann::json::parse(sequential(R"([{"type": "linear", "out": 2}])"));
  EXPECT_EQ(build_model_from_spec(spec, "dir/my-model.json", {}).spec["name"], "my-model");
}

}  // namespace
}  // namespace zero3
