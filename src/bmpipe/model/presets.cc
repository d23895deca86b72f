// Built-in model shapes, so that common models can be planned without a config.json.
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "bmpipe/core/json_cursor.h"
#include "bmpipe/model/model.h"

namespace bmpipe {

namespace internal {
std::string MoeWithoutExpertParallelismNote();  // defined in model.cc
}  // namespace internal

namespace {

// Llama-2/3 (Touvron et al. 2023; Meta's Llama 3 release): RoPE, RMSNorm, SwiGLU, no biases.
ModelSpec Llama(const std::string& name, int layers, int hidden, int heads, int kv_heads, int ffn, int vocab) {
  ModelSpec m;
  m.name = name;
  m.family = "llama";
  m.layers = layers;
  m.hidden = hidden;
  m.ffn = ffn;
  m.vocab = vocab;
  m.heads = heads;
  m.kv_heads = kv_heads;
  m.head_dim = hidden / heads;
  m.v_head_dim = m.head_dim;
  m.mlp = MlpKind::kSwiGlu;
  m.norm = NormKind::kRmsNorm;
  return m;
}

// GPT-3 style (Brown et al. 2020; Korthikanti et al. 2022): learned positions, LayerNorm, GELU
// MLP of width 4h, biases everywhere, dropout, and an LM head tied to the token embedding.
ModelSpec Gpt(const std::string& name, int layers, int hidden, int heads, int vocab) {
  ModelSpec m;
  m.name = name;
  m.family = "gpt";
  m.layers = layers;
  m.hidden = hidden;
  m.ffn = 4 * hidden;
  m.vocab = vocab;
  m.heads = heads;
  m.kv_heads = heads;
  m.head_dim = hidden / heads;
  m.v_head_dim = m.head_dim;
  m.mlp = MlpKind::kGelu;
  m.norm = NormKind::kLayerNorm;
  m.tied_embeddings = true;
  m.learned_positions = 2048;
  m.qkv_bias = true;
  m.linear_bias = true;
  m.dropout = true;
  return m;
}

ModelSpec Mixtral8x7b() {
  ModelSpec m = Llama("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000);
  m.family = "mixtral";
  m.moe.experts = 8;
  m.moe.top_k = 2;
  m.moe.ffn = 14336;
  m.moe.first_dense_layers = 0;
  m.not_modeled.push_back(internal::MoeWithoutExpertParallelismNote());
  return m;
}

std::vector<ModelSpec> AllPresets() {
  // The Korthikanti et al. (arXiv 2205.05198) shapes use Megatron's padded vocabulary of 51200;
  // gpt3-175b keeps GPT-2's 50257 tokens as in the GPT-3 paper.
  return {
      Llama("llama2-7b", 32, 4096, 32, 32, 11008, 32000),
      Llama("llama2-70b", 80, 8192, 64, 8, 28672, 32000),
      Llama("llama3-8b", 32, 4096, 32, 8, 14336, 128256),
      Llama("llama3-70b", 80, 8192, 64, 8, 28672, 128256),
      Llama("llama3-405b", 126, 16384, 128, 8, 53248, 128256),
      Gpt("gpt3-175b", 96, 12288, 96, 50257),
      Gpt("gpt-22b", 48, 6144, 64, 51200),
      Gpt("gpt-175b", 96, 12288, 96, 51200),
      Gpt("gpt-530b", 105, 20480, 128, 51200),
      Gpt("gpt-1t", 128, 25600, 160, 51200),
      Mixtral8x7b(),
  };
}

}  // namespace

std::vector<std::string> ModelPresetNames() {
  std::vector<std::string> names;
  for (const ModelSpec& m : AllPresets()) names.push_back(m.name);
  return names;
}

Result<ModelSpec> ModelPreset(const std::string& name) {
  for (ModelSpec& m : AllPresets()) {
    if (m.name == name) return std::move(m);
  }
  const std::vector<std::string> names = ModelPresetNames();
  return InvalidInput(
      fmt::format("unknown model preset '{}'; presets: {}{}", name, fmt::join(names, ", "), DidYouMean(name, names)));
}

}  // namespace bmpipe
