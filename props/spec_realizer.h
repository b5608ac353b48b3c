// Turning generated layer draws into a valid sequential model spec (core/models/MODEL_SPEC.md).
//
// A draw is a raw choice — a kind, a size, a count, a pick, a flag and a body — that RapidCheck
// generates and shrinks freely. Realization adapts each draw to the width it meets (a tied_linear
// picks an earlier weight that fits, a residual body gets a projection back to its width, a
// layer_norm on width 0 is dropped), so every draw list is a valid model and every shrunk draw
// list is a smaller valid model.
//
//   std::vector<LayerDraw> draws = {{.kind = LayerKind::linear, .size = 0}, {.kind = LayerKind::gelu}};
//   nlohmann::json spec = realize_model_spec(8, /*cross_entropy=*/false, draws, {});
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace zero3 {

enum class LayerKind : uint8_t {
  linear, tied_linear, unused_linear, gelu, relu, layer_norm, scale, bias, raw_scale,
  residual, concat, sum_residual, repeat, moe, causal_self_attention, rms_norm, swiglu,
};
const char* layer_kind_name(LayerKind kind);  // the spec's "type"
bool has_body(LayerKind kind);

struct LayerDraw {
  LayerKind kind = LayerKind::linear;
  int64_t size = 1;   // out of a linear, hidden of an moe, n of a broadcast shape on width 1
  int64_t count = 1;  // times of a repeat, experts of an moe, bias of a tied_linear (even), heads at most
  int64_t pick = 0;   // which earlier weight or parameter; which broadcast shape; attention's proj bias (even)
  bool flag = false;  // bias of a linear or of attention's qkv; a raw_scale on another layer's parameter
  bool frozen = false;  // "requires_grad": false, where the realized layer owns a parameter
  bool splice = false;  // a container realized as its body's layers, in its place
  std::vector<LayerDraw> body{};
};

// A token model (MODEL_SPEC.md "vocab"): layers.0 an embedding of `input_width` dims, the draws on
// token rows, then a head to the vocab: tied to the embedding when the width allows and `tied_head`.
struct TokenDraw {
  int64_t vocab = 0;  // 0: a model on feature vectors
  int64_t context = 1;
  bool tied_head = true;
  bool frozen_embedding = false;
};

struct RealizeOptions {
  bool moe = true;           // moe draws become moe layers (else they are dropped)
  bool raw_foreign = false;  // a raw_scale may read another layer's parameter (the broadcast trap)
  bool require_moe = false;  // append an moe layer when the draws realize none
  // Attention drawn among the layers, and half the models token models with transformer blocks
  // (generators.cc gen_model_spec). Off, the draws are exactly those of before it existed.
  bool transformer = false;
};

// Always a valid spec: the output width is at least 1 (a linear is appended when needed); a token
// model's is the vocab, and its loss cross-entropy whatever `cross_entropy` says.
nlohmann::json realize_model_spec(int64_t input_width, bool cross_entropy, const std::vector<LayerDraw>& draws,
                                  const RealizeOptions& options, const TokenDraw& tokens = {});

}  // namespace zero3
