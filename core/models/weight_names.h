// Weights in and out of zero3 by name: the parameters of a model as safetensors tensors, under
// zero3's own names or Hugging Face GPT-2's (`--names hf-gpt2`, gpt models only):
//   wte.weight, wpe.weight          -> transformer.wte.weight, transformer.wpe.weight
//   h.N.ln_1.*, h.N.ln_2.*, ln_f.*  -> transformer.h.N.ln_1.*, ..., transformer.ln_f.*
//   h.N.attn.qkv.*                  -> transformer.h.N.attn.c_attn.*
//   h.N.attn.proj.*                 -> transformer.h.N.attn.c_proj.*
//   h.N.mlp.fc.*, h.N.mlp.proj.*    -> transformer.h.N.mlp.c_fc.*, transformer.h.N.mlp.c_proj.*
// GPT-2's c_attn, c_proj and c_fc are Conv1D layers that store their weight [in, out], the
// transpose of zero3's Linear [out, in]. The LM head is tied to the token embedding in both: a
// file may carry lm_head.weight only equal to transformer.wte.weight, and zero3 writes none. The
// attention-mask buffers some GPT-2 files carry (attn.bias, attn.masked_bias) are not weights and
// are skipped.
//
//   load_initial_weights(model, "gpt2.safetensors", WeightNames::hf_gpt2);   // --init-from
//   write_safetensors(out, weights_for_saving(model, masters, WeightNames::zero3, DType::f32));
#pragma once
#include <string>
#include <vector>

#include "core/nn/model.h"
#include "core/tensor/safetensors.h"

namespace zero3 {

enum class WeightNames { zero3, hf_gpt2 };
// "zero3" or "hf-gpt2"; InputError otherwise.
WeightNames parse_weight_names(const std::string& text);
const char* weight_names_name(WeightNames names);

// Overwrites every parameter's value with the file's tensor of the same (mapped) name and shape,
// f32 or bf16. InputError naming the file when a tensor is missing, unexpected, of another shape,
// or when the names do not fit this model; the model is left untouched then.
void load_initial_weights(Model& model, const std::string& path, WeightNames names);

// One tensor per parameter, in parameter-id order: `values[id]` (full f32 values) under its
// mapped name and layout, stored as `dtype`.
std::vector<NamedTensor> weights_for_saving(const Model& model, const std::vector<Tensor>& values, WeightNames names,
                                            DType dtype);

}  // namespace zero3
