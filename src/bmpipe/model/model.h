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
  kGelu,         // two matrices h x f and f x h with an elementwise activation (GPT, GPT-NeoX)
  kSwiGlu,       // three matrices: gate and up h x f, down f x h (Llama, Qwen, Mixtral, DeepSeek)
  kGeGlu,        // SwiGLU's shapes with a GELU gate instead of SiLU (Gemma 2 and 3)
  kSquaredRelu,  // kGelu's shapes with relu(x)^2 as the activation (Nemotron-4)
};

// Whether the MLP has a gate matrix beside its up-projection (three matrices instead of two).
inline bool IsGatedMlp(MlpKind kind) { return kind == MlpKind::kSwiGlu || kind == MlpKind::kGeGlu; }

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

// DeepSeek sparse attention (DeepSeek-V3.2): on every layer a lightning indexer (index_heads heads
// of index_head_dim, its projections replicated over tensor parallelism) scores every earlier key
// for each query, and the latent attention attends to the `topk` best instead of all of them.
// All zero without it.
struct SparseAttention {
  int index_heads = 0;
  int index_head_dim = 0;
  int topk = 0;
  bool enabled() const { return topk > 0; }
};

// How a local layer (ModelSpec::windowed_layers) limits the keys of a query.
enum class LocalAttention {
  kSlidingWindow,  // the `sliding_window` latest keys, itself included (Mistral, Gemma, gpt-oss)
  kChunked,        // the keys of its own chunk of `sliding_window` tokens up to itself (Llama 4)
};

// What mixes tokens in a decoder layer: attention, a linear-time recurrent mixer, or nothing (a
// layer that is only an MLP; Nemotron-H's '-' and 'E' layers).
enum class Mixer {
  kAttention,
  kMamba2,         // Mamba-2's SSD scan (Nemotron-H, Nemotron 3)
  kGatedDeltaNet,  // the gated delta rule (Qwen3-Next, Qwen3.5)
  kNone,
};

// Mamba-2 mixer layers (Dao and Gu 2024; Megatron's MambaMixer): `heads` heads of `head_dim`
// channels (the inner width heads x head_dim), a state of `state` per head shared within `groups`
// groups of B and C, a depthwise causal convolution of `conv_kernel` taps, and the SSD scan in
// chunks of `chunk` tokens. All zero without Mamba-2 layers.
struct MambaShape {
  int heads = 0, head_dim = 0, state = 0, groups = 0, conv_kernel = 0, chunk = 0;
  bool enabled() const { return heads > 0; }
};

// Gated DeltaNet layers (Yang et al. 2025; Qwen3-Next): `key_heads` query/key heads of
// `key_head_dim`, `value_heads` value heads of `value_head_dim` (each with a dk x dv state), a
// depthwise causal convolution of `conv_kernel` taps over q, k and v, and the chunked delta rule
// in chunks of `chunk` tokens. All zero without them.
struct DeltaNetShape {
  int key_heads = 0, value_heads = 0, key_head_dim = 0, value_head_dim = 0, conv_kernel = 0, chunk = 0;
  bool enabled() const { return value_heads > 0; }
};

// Mixture-of-experts MLP layers. experts == 0: every layer is dense.
struct MoeShape {
  int experts = 0;         // routed experts per MoE layer
  int top_k = 0;           // experts each token is routed to
  int ffn = 0;             // intermediate size of one routed expert
  int shared_experts = 0;  // always-active experts of the same size (DeepSeek, Llama 4)
  int first_dense_layers = 0;  // layers 0..first_dense_layers-1 use the dense MLP (DeepSeek)
  // After those, layer i is MoE when i + 1 is a multiple of layer_step (Llama 4's
  // interleave_moe_layer_step, Qwen's decoder_sparse_step): 1 makes every layer MoE, 2 every other.
  int layer_step = 1;
  std::vector<int> dense_layers;  // further layers with the dense MLP, ascending (Qwen's mlp_only_layers)
  bool enabled() const { return experts > 0; }
};

struct ModelSpec {
  std::string name;    // preset name or the config file's path
  std::string family;  // the config's model_type ("llama", "qwen3_moe", "gemma3", ...) or a preset's ("gpt", "nemotron")
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
  bool qk_norm = false;          // per-head norms of queries and keys (Qwen3, Gemma 3)
  bool post_norms = false;       // norms on the attention and MLP outputs too, before each residual add (Gemma 2, 3)
  bool dropout = false;          // dropout after attention probabilities and after each block
  LatentAttention latent;
  SparseAttention sparse;  // needs latent attention
  MoeShape moe;
  // A hybrid stack: one mixer per decoder layer (empty: attention in every layer), and the layers
  // without an MLP (empty: every layer has one). A layer with neither is refused.
  std::vector<Mixer> mixers;
  std::vector<bool> mixer_only;
  MambaShape mamba;
  DeltaNetShape deltanet;
  // Attention's output is multiplied by a sigmoid gate projected from the layer input beside the
  // queries (Qwen3-Next's gated attention: the query projection is twice as wide).
  bool attention_output_gate = false;
  // Sliding-window (local) attention: on a windowed layer each query attends to at most the
  // `sliding_window` latest keys (itself included) instead of the whole sequence. 0 and an empty
  // windowed_layers: every layer attends to the whole sequence. Otherwise windowed_layers has one
  // entry per decoder layer, true where the window applies (Mistral: all; Gemma 2, gpt-oss: every
  // other; Gemma 3: five of every six). With local_attention kChunked the sequence is cut into
  // chunks of `sliding_window` tokens instead and a query sees the keys of its own chunk (Llama 4's
  // layers with RoPE).
  int sliding_window = 0;
  std::vector<bool> windowed_layers;
  LocalAttention local_attention = LocalAttention::kSlidingWindow;
  // DeepSeek-V3's multi-token prediction: modules after the last decoder layer, each predicting
  // one token further. One module is two norms (of the last hidden state and of the next token's
  // embedding), a projection of their concatenation (2h x h), one decoder layer (MoE when the model
  // has MoE layers) and a norm before the LM head. The modules share the model's embedding and
  // LM head, so their parameters count neither again. The cost model puts them in the head layer,
  // on the last pipeline stage as Megatron does, each with its own pass through the LM head and
  // loss; with several pipeline ranks and an untied head that stage keeps a copy of the embedding.
  int mtp_layers = 0;
  // Parts of the model the cost model does not represent, each a full sentence (for example
  // Gemma 2's logit soft-capping). Printed with every plan made from the model.
  std::vector<std::string> not_modeled;
};

// Whether decoder layer `i` uses the MoE MLP.
bool IsMoeLayer(const ModelSpec& model, int i);

// Whether decoder layer `i` uses windowed attention.
bool IsWindowedLayer(const ModelSpec& model, int i);

// Decoder layer `i`'s mixer, and whether it has an MLP (the dense or the MoE one, by IsMoeLayer).
Mixer MixerOf(const ModelSpec& model, int i);
bool HasMlp(const ModelSpec& model, int i);
const char* MixerName(Mixer mixer);  // "attention", "mamba2", "gated_deltanet", "none"

// The kinds of decoder layer a model is made of: each kind is costed once.
enum class Ffn { kDense, kMoe, kNone };
struct DecoderKind {
  Mixer mixer = Mixer::kAttention;
  Ffn ffn = Ffn::kDense;
  bool windowed = false;  // the mixer is attention with the model's local mask
  // Ordered by mixer, MLP, then window: the order problems list the kinds in.
  bool operator<(const DecoderKind& o) const {
    if (mixer != o.mixer) return mixer < o.mixer;
    if (ffn != o.ffn) return ffn < o.ffn;
    return windowed < o.windowed;
  }
};
DecoderKind DecoderKindOf(const ModelSpec& model, int i);
// The kind's layer name in problems and plans: "decoder", "decoder-moe", "decoder-local" and
// "decoder-moe-local" for attention with an MLP (as before hybrids); otherwise the mixer and the
// MLP, e.g. "mamba", "attention", "mlp", "moe", "deltanet-moe".
std::string DecoderKindName(const DecoderKind& kind);
// A decoder layer's parameters of one kind (each matrix and vector once), and of those the routed
// experts'.
std::int64_t DecoderLayerParameters(const ModelSpec& model, const DecoderKind& kind);
std::int64_t RoutedExpertParameters(const ModelSpec& model);

// One entry per layer: windowed unless i + 1 is a multiple of `global_every` (Gemma 2 and gpt-oss:
// 2, Gemma 3: 6); `global_every` 0 windows every layer.
std::vector<bool> WindowedLayers(int layers, int global_every);

// Parameter counts (each matrix and vector of the model once; a tied LM head counts once).
struct ParameterCounts {
  std::int64_t embedding = 0;      // token (+ learned position) embeddings
  std::int64_t dense_layer = 0;    // one decoder layer with the dense MLP
  std::int64_t moe_layer = 0;      // one decoder layer with the MoE MLP (0 without MoE)
  std::int64_t mtp_layer = 0;      // one multi-token-prediction module (0 without), embedding and head shared
  std::int64_t head = 0;           // final norm + LM head (0 for the matrix when tied)
  std::int64_t total = 0;          // including the multi-token-prediction modules
};
ParameterCounts CountParameters(const ModelSpec& model);

// Checks the shape is consistent (positive sizes, heads divisible by kv_heads, ...).
Status ValidateModel(const ModelSpec& model);

// The names of the built-in presets, in a fixed order.
std::vector<std::string> ModelPresetNames();

// A built-in preset by name ("llama3-70b"), or an error listing the presets.
Result<ModelSpec> ModelPreset(const std::string& name);

// Reads a Hugging Face config.json (Llama-2/3, Llama 4, Qwen2/Qwen3, Qwen3-MoE, Mistral, Mixtral,
// GPT-2, GPT-NeoX, StarCoder2, DeepSeek-V3 and V3.2, Kimi K2, GLM-4.5, gpt-oss, Gemma 2 and 3,
// Nemotron-H and Nemotron 3, Qwen3-Next and Qwen3.5 families, chosen by `model_type`; multimodal
// Llama 4, Gemma 3 and Qwen3.5 configs are read from their text_config).
Result<ModelSpec> ReadHuggingFaceConfig(const std::string& path);
// The same from a parsed config; `name` becomes the model's name and prefixes messages.
Result<ModelSpec> ReadHuggingFaceConfig(const Json& config, const std::string& name);

// A preset name, or else a path to a config.json.
Result<ModelSpec> LoadModel(const std::string& name_or_path);

}  // namespace bmpipe
