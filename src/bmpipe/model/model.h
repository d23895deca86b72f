// A transformer's shape: what the cost model needs to know about a model, and nothing about how
// it is trained. Read from a Hugging Face config.json or taken from a built-in preset.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bmpipe/core/document.h"
#include "bmpipe/core/error.h"

namespace bmpipe {

enum class MlpKind {
  kGelu,    // two matrices h x f and f x h with an elementwise activation (GPT, GPT-NeoX)
  kSwiGlu,  // three matrices: gate and up h x f, down f x h (Llama, Qwen, Mixtral, DeepSeek)
};

enum class NormKind { kLayerNorm, kRmsNorm };

// Multi-head latent attention (DeepSeek-V2/V3): low-rank query and key-value projections.
// All zero for ordinary attention.
struct LatentAttention {
  int q_lora_rank = 0;   // 0: queries are projected directly (h -> heads * qk_head_dim)
  int kv_lora_rank = 0;  // > 0 means the model uses latent attention
  int qk_rope_head_dim = 0;
  int qk_nope_head_dim = 0;
  bool enabled() const { return kv_lora_rank > 0; }
};

// Mixture-of-experts MLP layers. experts == 0: every layer is dense.
struct MoeShape {
  int experts = 0;         // routed experts per MoE layer
  int top_k = 0;           // experts each token is routed to
  int ffn = 0;             // intermediate size of one routed expert
  int shared_experts = 0;  // always-active experts of the same size (DeepSeek)
  int first_dense_layers = 0;  // layers 0..first_dense_layers-1 use the dense MLP (DeepSeek)
  bool enabled() const { return experts > 0; }
};

struct ModelSpec {
  std::string name;    // preset name or the config file's path
  std::string family;  // "llama", "qwen2", "qwen3", "mixtral", "gpt2", "gpt_neox", "deepseek_v3", "gpt"
  int layers = 0;      // decoder layers L
  int hidden = 0;      // h
  int ffn = 0;         // dense MLP intermediate size f
  int vocab = 0;       // V (before any padding a framework applies)
  int heads = 0;       // a: query heads
  int kv_heads = 0;    // key-value heads (== heads without grouped-query attention)
  int head_dim = 0;    // query/key dimension per head (h / a unless the config says otherwise)
  int v_head_dim = 0;  // value dimension per head (== head_dim except latent attention)
  MlpKind mlp = MlpKind::kSwiGlu;
  NormKind norm = NormKind::kRmsNorm;
  bool tied_embeddings = false;  // the LM head reuses the input embedding matrix
  int learned_positions = 0;     // rows of a learned position embedding (GPT-2, GPT-3), 0 for RoPE
  bool qkv_bias = false;         // biases on the query, key and value projections (Qwen2, GPT)
  bool linear_bias = false;      // biases on every other linear layer (GPT-2, GPT-NeoX, GPT-3)
  bool qk_norm = false;          // per-head norms of queries and keys (Qwen3)
  bool dropout = false;          // dropout after attention probabilities and after each block
  LatentAttention latent;
  MoeShape moe;
  // Parts of the model the cost model does not represent, each a full sentence (for example
  // DeepSeek-V3's multi-token-prediction module). Printed with every plan made from the model.
  std::vector<std::string> not_modeled;
};

// Whether decoder layer `i` uses the MoE MLP.
bool IsMoeLayer(const ModelSpec& model, int i);

// Parameter counts (each matrix and vector of the model once; a tied LM head counts once).
struct ParameterCounts {
  std::int64_t embedding = 0;      // token (+ learned position) embeddings
  std::int64_t dense_layer = 0;    // one decoder layer with the dense MLP
  std::int64_t moe_layer = 0;      // one decoder layer with the MoE MLP (0 without MoE)
  std::int64_t head = 0;           // final norm + LM head (0 for the matrix when tied)
  std::int64_t total = 0;
};
ParameterCounts CountParameters(const ModelSpec& model);

// Checks the shape is consistent (positive sizes, heads divisible by kv_heads, ...).
Status ValidateModel(const ModelSpec& model);

// The names of the built-in presets, in a fixed order.
std::vector<std::string> ModelPresetNames();

// A built-in preset by name ("llama3-70b"), or an error listing the presets.
Result<ModelSpec> ModelPreset(const std::string& name);

// Reads a Hugging Face config.json (Llama-2/3, Qwen2/Qwen3, Mistral, Mixtral, GPT-2, GPT-NeoX,
// DeepSeek-V3 families, chosen by `model_type`).
Result<ModelSpec> ReadHuggingFaceConfig(const std::string& path);
// The same from a parsed config; `name` becomes the model's name and prefixes messages.
Result<ModelSpec> ReadHuggingFaceConfig(const Json& config, const std::string& name);

// A preset name, or else a path to a config.json.
Result<ModelSpec> LoadModel(const std::string& name_or_path);

}  // namespace bmpipe
