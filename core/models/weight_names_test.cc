// Weights by name: zero3 and Hugging Face GPT-2 names round-trip every value, GPT-2's Conv1D
// weights are the transposes, the tied head and mask buffers are handled, and a file that does
// not fit lists what is missing, unexpected or of another shape.
#include "core/models/weight_names.h"

#include <filesystem>
#include <unistd.h>

#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "core/models/model_zoo.h"

namespace zero3 {
namespace {

std::string temp_path(const std::string& tag) {
  return (std::filesystem::temp_directory_path() / ("zero3_weights_" + tag + "_" + std::to_string(getpid()))).string();
}

std::vector<Tensor> values_of(const Model& model) {
  std::vector<Tensor> values;
  for (const Parameter* param : model.parameters()) values.push_back(param->data);
  return values;
}

TEST(WeightNames, BothNamingsRoundTripEveryParameterBitForBit) {
  for (const WeightNames names : {WeightNames::zero3, WeightNames::hf_gpt2}) {
    BuiltModel source = build_model("gpt-tiny", {});
    initialize_model(source, 3);
    const std::string path = temp_path(weight_names_name(names));
    write_safetensors(path, weights_for_saving(*source.model, values_of(*source.model), names, DType::f32));
    BuiltModel target = build_model("gpt-tiny", {.init_from = path, .init_names = weight_names_name(names)});
    initialize_model(target, 99);  // other seeded values, all overwritten from the file
    for (size_t i = 0; i < source.model->parameters().size(); ++i) {
      EXPECT_EQ(target.model->parameters()[i]->data.to_floats(), source.model->parameters()[i]->data.to_floats())
          << weight_names_name(names) << " " << source.model->parameters()[i]->name();
    }
    std::filesystem::remove(path);
  }
}

TEST(WeightNames, GptTwoNamesAndConvOneDLayouts) {
  BuiltModel built = build_model("gpt-tiny", {});
  initialize_model(built, 3);
  const std::vector<NamedTensor> saved =
      weights_for_saving(*built.model, values_of(*built.model), WeightNames::hf_gpt2, DType::f32);
  const SafetensorsFile file{saved, {}};
  ASSERT_NE(file.find("transformer.wte.weight"), nullptr);
  ASSERT_NE(file.find("transformer.ln_f.bias"), nullptr);
  const Tensor* c_attn = file.find("transformer.h.1.attn.c_attn.weight");
  ASSERT_NE(c_attn, nullptr);
  EXPECT_EQ(c_attn->shape(), (Shape{32, 96})) << "Conv1D stores [in, out]";
  const Parameter* qkv = nullptr;
  for (const Parameter* param : built.model->parameters()) {
    if (param->name() == "h.1.attn.qkv.weight") qkv = param;
  }
  ASSERT_NE(qkv, nullptr);
  // Element [out = 5, in = 7] of zero3's Linear is element [7, 5] of GPT-2's Conv1D.
  EXPECT_EQ(c_attn->to_floats()[7 * 96 + 5], qkv->data.to_floats()[5 * 32 + 7]);
  EXPECT_NE(file.find("transformer.h.0.mlp.c_fc.bias"), nullptr);
  EXPECT_EQ(file.find("lm_head.weight"), nullptr) << "the head is tied: not written";
}

TEST(WeightNames, ATiedHeadAndMaskBuffersAreAcceptedAnUntiedHeadIsNot) {
  BuiltModel built = build_model("gpt-tiny", {});
  initialize_model(built, 3);
  std::vector<NamedTensor> tensors =
      weights_for_saving(*built.model, values_of(*built.model), WeightNames::hf_gpt2, DType::f32);
  const Tensor wte = *SafetensorsFile{tensors, {}}.find("transformer.wte.weight");
  tensors.push_back({"lm_head.weight", wte});
  tensors.push_back({"transformer.h.0.attn.bias", Tensor::zeros({1, 1, 16, 16})});
  const std::string path = temp_path("tied");
  write_safetensors(path, tensors);
  EXPECT_NO_THROW(load_initial_weights(*built.model, path, WeightNames::hf_gpt2));
  tensors[tensors.size() - 2].tensor = Tensor::zeros(wte.shape());
  write_safetensors(path, tensors);
  try {
    load_initial_weights(*built.model, path, WeightNames::hf_gpt2);
    FAIL() << "an untied head was accepted";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("lm_head.weight (differs from transformer.wte.weight"), std::string::npos)
        << error.what();
  }
  std::filesystem::remove(path);
}

TEST(WeightNames, AFileThatDoesNotFitListsMissingUnexpectedAndMisshapenTensors) {
  BuiltModel built = build_model("gpt-tiny", {});
  initialize_model(built, 3);
  std::vector<NamedTensor> tensors =
      weights_for_saving(*built.model, values_of(*built.model), WeightNames::zero3, DType::bf16);
  const std::vector<float> before = built.model->parameters()[0]->data.to_floats();
  tensors.erase(tensors.begin() + 2);                       // h.0.ln_1.weight missing
  tensors[0].tensor = Tensor::zeros({64, 31});              // wte.weight of another shape
  tensors.push_back({"extra.weight", Tensor::zeros({2})});  // unexpected
  const std::string path = temp_path("unfit");
  write_safetensors(path, tensors);
  try {
    load_initial_weights(*built.model, path, WeightNames::zero3);
    FAIL() << "an unfitting file was loaded";
  } catch (const InputError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find(path + ": does not fit"), std::string::npos) << message;
    EXPECT_NE(message.find("missing:\n    h.0.ln_1.weight [32]"), std::string::npos) << message;
    EXPECT_NE(message.find("wte.weight: [64, 31], expected [64, 32]"), std::string::npos) << message;
    EXPECT_NE(message.find("unexpected:\n    extra.weight [2]"), std::string::npos) << message;
  }
  EXPECT_EQ(built.model->parameters()[0]->data.to_floats(), before) << "nothing assigned from a refused file";
  std::filesystem::remove(path);
}

TEST(WeightNames, GptTwoNamesOnASequentialModelAreRefused) {
  BuiltModel built = build_model("mlp-tiny", {});
  initialize_model(built, 3);
  EXPECT_THROW(weights_for_saving(*built.model, values_of(*built.model), WeightNames::hf_gpt2, DType::f32), InputError);
  EXPECT_THROW(parse_weight_names("gpt2"), InputError);
}

}  // namespace
}  // namespace zero3
