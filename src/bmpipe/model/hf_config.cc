// Reading a Hugging Face config.json into a ModelSpec.
//
// Key policy. A config.json holds much more than the model's shape. This file reads the keys that
// change compute or memory (layer count, widths, head counts, vocabulary size, MLP and attention
// variants, biases, dropout, embedding tying, experts, routing width and which layers are MoE,
// latent-attention ranks, sliding windows and which layers use them, multi-token prediction) and
// validates each strictly: a message names the key, its value and the fix; a value bmpipe cannot
// cost (a layer type other than sliding or full attention, an activation that is not the MLP's) is
// an error naming the key. Every other key is ignored on purpose because it changes neither the
// FLOPs nor the bytes of training, for example rope_theta, rope_scaling and rope_local_base_freq,
// rms_norm_eps and layer_norm_eps, torch_dtype (bmpipe models 16-bit training whatever the
// checkpoint's type), architectures, bos/eos/pad token ids, initializer_range,
// max_position_embeddings (the sequence length is a training setting), use_cache,
// transformers_version, auto_map, router loss coefficients and DeepSeek's routing details
// (n_group, topk_group, topk_method, scoring_func, routed_scaling_factor, norm_topk_prob), Gemma's
// query_pre_attn_scalar (a scale), Llama 4's use_qk_norm (a parameter-free L2 norm),
// attn_temperature_tuning, attn_scale and floor_scale. Unlike bmpipe's own input files, unknown
// keys are therefore not errors here (no ExpectKeys on the config): Transformers releases add keys
// often. The exception is a key that gives the model part of another architecture (an indexer,
// latent attention, experts, chunks, Mamba-2 or Gated DeltaNet layers) under a model_type without
// it: an error naming the model types that have it (ArchitectureKeys), since the part would
// otherwise be left out of the cost without a word.
//
// A key a config may omit takes the default of the Transformers configuration class of that
// model_type, so an omitted key means what it means to Transformers. Keys that fix the shape
// (sizes and head counts) are required, except Gemma 3's vocab_size, which the published
// multimodal configs leave to the default. Multimodal configs (Llama 4, Gemma 3) are read from
// their text_config; the vision encoder is noted, not modeled.
#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "bmpipe/core/document.h"
#include "bmpipe/core/json_cursor.h"
#include "bmpipe/model/model.h"

namespace bmpipe {

namespace {

// Far beyond any real model; they keep every size inside int and let ValidateModel bound the rest.
constexpr std::int64_t kMaxLayers = 100'000;
constexpr std::int64_t kMaxHidden = 1 << 20;
constexpr std::int64_t kMaxFfn = 1 << 22;
constexpr std::int64_t kMaxVocab = 1 << 24;
constexpr std::int64_t kMaxHeads = 1 << 16;
constexpr std::int64_t kMaxHeadDim = 1 << 16;
constexpr std::int64_t kMaxExperts = 1 << 16;
constexpr std::int64_t kMaxRank = 1 << 20;
constexpr std::int64_t kMaxPositions = 1 << 24;

const std::vector<std::string>& SupportedModelTypes() {
  static const std::vector<std::string> types = {
      "llama",       "mistral",      "mixtral", "qwen2",   "qwen3",       "qwen3_moe", "gpt2",   "gpt_neox",
      "starcoder2",  "deepseek_v3",  "deepseek_v32", "kimi_k2", "glm4_moe", "gpt_oss", "llama4", "llama4_text",
      "gemma2",      "gemma3",      "gemma3_text",  "nemotron_h", "qwen3_next", "qwen3_5", "qwen3_5_text",
      "qwen3_5_moe", "qwen3_5_moe_text"};
  return types;
}

// Model types of published recipes that bmpipe recognizes but cannot cost yet, with what is
// missing: no suggestion of a near name, which would cost another architecture.
struct UnmodeledType {
  std::string_view type, what;
};
constexpr UnmodeledType kUnmodeledTypes[] = {
    {"deepseek_v4", "DeepSeek-V4's attention"},
    {"glm_moe_dsa", "GLM-5's layers"},
};

// Keys that give a model a part of its architecture, with the model types that read them. In a
// config of another model_type the part would be left out of the cost without a word (the
// Transformers class of that type ignores the key too), so it is an error instead: the config
// names the wrong model_type, or describes a model bmpipe does not cost yet.
struct ArchitectureKey {
  std::string_view key, part;
  std::vector<std::string_view> readers;  // empty: no model type bmpipe reads has the part
};
const std::vector<std::string_view> kGatedDeltaNetTypes = {"qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe",
                                                           "qwen3_5_moe_text"};
const std::vector<ArchitectureKey>& ArchitectureKeys() {
  static const std::vector<ArchitectureKey> keys = {
      {"index_topk", "DeepSeek sparse attention", {"deepseek_v32"}},
      {"index_n_heads", "DeepSeek sparse attention", {"deepseek_v32"}},
      {"index_head_dim", "DeepSeek sparse attention", {"deepseek_v32"}},
      {"kv_lora_rank", "latent attention", {"deepseek_v3", "deepseek_v32", "kimi_k2"}},
      {"attention_chunk_size", "chunked attention", {"llama4", "llama4_text"}},
      {"n_routed_experts", "routed experts", {"deepseek_v3", "deepseek_v32", "kimi_k2", "glm4_moe", "nemotron_h"}},
      {"num_experts", "routed experts", {"qwen3_moe", "qwen3_next", "qwen3_5_moe", "qwen3_5_moe_text"}},
      {"num_local_experts", "routed experts", {"mixtral", "gpt_oss", "llama4", "llama4_text"}},
      {"hybrid_override_pattern", "Mamba-2 layers (a hybrid stack)", {"nemotron_h"}},
      {"mamba_num_heads", "Mamba-2 layers", {"nemotron_h"}},
      {"linear_num_value_heads", "Gated DeltaNet (linear attention) layers", kGatedDeltaNetTypes},
      {"linear_key_head_dim", "Gated DeltaNet (linear attention) layers", kGatedDeltaNetTypes},
      {"moe_latent_size", "experts in a latent width (Nemotron 3 Super's latent MoE)", {}},
  };
  return keys;
}

// A value that gives the part: anything but null, false, 0 or an empty string or list.
bool Gives(const Json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  if (v.is_string() || v.is_array() || v.is_object()) return !v.empty();
  return true;
}

void RejectForeignArchitectureKeys(const JsonCursor& config, const std::string& type) {
  for (const ArchitectureKey& k : ArchitectureKeys()) {
    if (std::find(k.readers.begin(), k.readers.end(), type) != k.readers.end()) continue;
    std::optional<JsonCursor> c = config.Optional(k.key);
    if (!c || !Gives(c->json())) continue;
    if (k.readers.empty()) {
      c->Fail(fmt::format("gives the model {}, which bmpipe does not cost yet (under any model_type); it cannot plan "
                          "this model",
                          k.part));
    }
    c->Fail(fmt::format("gives the model {}, which model_type {} does not have: bmpipe would cost the model without "
                        "it; give model_type {} if that is the model, or remove the key",
                        k.part, type, fmt::join(k.readers, " or ")));
  }
}

int ToInt(const JsonCursor& c, std::string_view what, std::int64_t min, std::int64_t max) {
  return static_cast<int>(c.Integer(min, max, fmt::format("check the value: it is {}", what)));
}

// A required whole number in [1, max].
int Count(const JsonCursor& config, std::string_view key, std::string_view what, std::int64_t max) {
  return ToInt(config.Required(key, what), what, 1, max);
}

// An optional whole number in [1, max]; missing or null means `default_value`.
int OptionalCount(const JsonCursor& config, std::string_view key, std::string_view what, std::int64_t max,
                  int default_value) {
  std::optional<JsonCursor> c = config.Optional(key);
  return c ? ToInt(*c, what, 1, max) : default_value;
}

bool Flag(const JsonCursor& config, std::string_view key, bool default_value) {
  std::optional<JsonCursor> c = config.Optional(key);
  return c ? c->Bool() : default_value;
}

double DropoutProbability(const JsonCursor& config, std::string_view key, double default_value) {
  std::optional<JsonCursor> c = config.Optional(key);
  if (!c) return default_value;
  const double p = c->Number();
  if (p < 0 || p >= 1) c->Fail("a dropout probability must be at least 0 and below 1");
  return p;
}

// num_key_value_heads, which must split the query heads into equal groups.
int ReadKvHeads(const JsonCursor& config, int heads) {
  std::optional<JsonCursor> c = config.Optional("num_key_value_heads");
  if (!c) return heads;  // Transformers' default: no grouped-query attention
  const int kv_heads = ToInt(*c, "the number of key-value heads", 1, kMaxHeads);
  if (heads % kv_heads != 0) {
    c->Fail(fmt::format("must divide num_attention_heads = {}; grouped-query attention shares each key-value "
                        "head among the same number of query heads",
                        heads));
  }
  return kv_heads;
}

// hidden / heads, for configs that do not give the head width.
int HeadDimFromHidden(const JsonCursor& config, std::string_view heads_key, int hidden, int heads) {
  if (hidden % heads != 0) {
    config.Required(heads_key, "").Fail(fmt::format(
        "must divide the hidden size {} when the config gives no head_dim; check both values", hidden));
  }
  return hidden / heads;
}

// The SwiGLU MLP of these model types is silu-gated; another activation would be another model.
void RequireSiluActivation(const JsonCursor& config) {
  std::optional<JsonCursor> act = config.Optional("hidden_act");
  if (!act) return;  // Transformers' default for these model types is silu
  const std::string name = act->String();
  if (name != "silu" && name != "swish") {
    act->Fail("bmpipe models this model_type with a SwiGLU MLP, which needs hidden_act 'silu' (or 'swish')");
  }
}

std::optional<int> OptionalWindow(const JsonCursor& config) {
  std::optional<JsonCursor> c = config.Optional("sliding_window");
  if (!c) return std::nullopt;
  return ToInt(*c, "the attention window in tokens, or null for none", 1, kMaxPositions);
}

// The window when the key is given (null: none), else `default_window` (the Transformers default).
std::optional<int> WindowOr(const JsonCursor& config, int default_window) {
  return config.Has("sliding_window") ? OptionalWindow(config) : std::optional<int>(default_window);
}

// layer_types, one entry per layer: true for `local` (sliding_attention, or Llama 4's
// chunked_attention), false for full_attention.
std::vector<bool> ReadLayerTypes(const JsonCursor& types, int layers, std::string_view local = "sliding_attention") {
  const std::vector<JsonCursor> entries = types.Elements();
  if (entries.size() != static_cast<std::size_t>(layers)) {
    types.FailAt(fmt::format("has {} entries for num_hidden_layers = {}; give one per decoder layer", entries.size(),
                             layers));
  }
  std::vector<bool> windowed;
  for (const JsonCursor& e : entries) {
    const std::string type = e.String();
    if (type != local && type != "full_attention") {
      e.Fail(fmt::format("bmpipe costs layers of type {} and full_attention only for this model_type", local));
    }
    windowed.push_back(type == local);
  }
  return windowed;
}

// Which layers use the window: layer_types when the config gives it, else `fallback`.
std::vector<bool> WindowedLayersOf(const JsonCursor& config, int layers, std::vector<bool> fallback) {
  std::optional<JsonCursor> types = config.Optional("layer_types");
  return types ? ReadLayerTypes(*types, layers) : std::move(fallback);
}

// Sets the model's windows; a window that no layer uses is no window.
void SetWindows(ModelSpec& m, std::optional<int> window, std::vector<bool> windowed) {
  bool any = false;
  for (bool w : windowed) any = any || w;
  if (!window || !any) return;
  m.sliding_window = *window;
  m.windowed_layers = std::move(windowed);
}

// The routed experts each token uses, at most `experts`.
int ReadTopK(const JsonCursor& top_k, int experts, std::string_view experts_key) {
  const int k = ToInt(top_k, "the number of experts each token is routed to", 1, kMaxExperts);
  if (k > experts) top_k.Fail(fmt::format("cannot exceed {} = {}", experts_key, experts));
  return k;
}

// A list of distinct layer indices in [0, layers), ascending.
std::vector<int> ReadLayerList(const JsonCursor& list, int layers, std::string_view what) {
  std::vector<int> out;
  for (const JsonCursor& e : list.Elements(/*allow_empty=*/true)) {
    out.push_back(ToInt(e, fmt::format("{}, a layer index below num_hidden_layers = {}", what, layers), 0, layers - 1));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// How a model_type spells the shape every decoder-only config gives.
enum class KvHeadsKey { kOptional, kRequired, kNone };  // num_key_value_heads; kNone: one per query head
enum class HeadDimKey { kOptional, kRequired, kFromHidden, kNone };  // head_dim; kOptional: null or missing is hidden / heads
struct ShapeKeys {
  ShapeKeys(MlpKind mlp_kind, NormKind norm_kind) : mlp(mlp_kind), norm(norm_kind) {}
  MlpKind mlp;
  NormKind norm;
  std::string_view ffn_key = "intermediate_size";
  std::string_view ffn_what = "the MLP's intermediate size";
  bool ffn_optional = false;  // missing: 0 (a model whose layers are all MoE; ValidateModel checks)
  KvHeadsKey kv_heads = KvHeadsKey::kOptional;
  HeadDimKey head_dim = HeadDimKey::kOptional;  // kNone: the caller sets head_dim and v_head_dim
  int vocab_default = 0;                        // 0: vocab_size is required
  bool tied_default = false;
};

// The shape keys of the Hugging Face decoder configs (all but GPT-2's), in this order: hidden,
// MLP, layers, heads, key-value heads, head width, vocabulary, tied embeddings, the SwiGLU's
// activation, attention dropout.
ModelSpec ReadDecoderShape(const JsonCursor& config, const ShapeKeys& keys) {
  ModelSpec m;
  m.mlp = keys.mlp;
  m.norm = keys.norm;
  m.hidden = Count(config, "hidden_size", "the model width h", kMaxHidden);
  m.ffn = keys.ffn_optional && !config.Has(keys.ffn_key) ? 0 : Count(config, keys.ffn_key, keys.ffn_what, kMaxFfn);
  m.layers = Count(config, "num_hidden_layers", "the number of decoder layers", kMaxLayers);
  const bool grouped = keys.kv_heads != KvHeadsKey::kNone;
  m.heads = Count(config, "num_attention_heads",
                  grouped ? "the number of query heads" : "the number of attention heads", kMaxHeads);
  if (keys.kv_heads == KvHeadsKey::kRequired) config.Required("num_key_value_heads", "the number of key-value heads");
  m.kv_heads = grouped ? ReadKvHeads(config, m.heads) : m.heads;
  if (keys.head_dim == HeadDimKey::kRequired) {
    m.head_dim = Count(config, "head_dim", "the query/key/value width per head", kMaxHeadDim);
  } else if (keys.head_dim == HeadDimKey::kOptional) {
    std::optional<JsonCursor> head_dim = config.Optional("head_dim");
    m.head_dim = head_dim ? ToInt(*head_dim, "the query/key/value width per head", 1, kMaxHeadDim)
                          : HeadDimFromHidden(config, "num_attention_heads", m.hidden, m.heads);
  } else if (keys.head_dim == HeadDimKey::kFromHidden) {
    m.head_dim = HeadDimFromHidden(config, "num_attention_heads", m.hidden, m.heads);
  }
  m.v_head_dim = m.head_dim;
  m.vocab = keys.vocab_default > 0
                ? OptionalCount(config, "vocab_size", "the vocabulary size", kMaxVocab, keys.vocab_default)
                : Count(config, "vocab_size", "the vocabulary size", kMaxVocab);
  m.tied_embeddings = Flag(config, "tie_word_embeddings", keys.tied_default);
  if (keys.mlp == MlpKind::kSwiGlu) RequireSiluActivation(config);
  m.dropout = DropoutProbability(config, "attention_dropout", 0.0) > 0;
  return m;
}

// attention_bias must be absent or false where biases in `attention` are not modeled.
void RejectAttentionBias(const JsonCursor& config, std::string_view attention) {
  if (Flag(config, "attention_bias", false)) {
    config.Required("attention_bias", "").Fail(
        fmt::format("biases in {} are not modeled; bmpipe needs false", attention));
  }
}

// The routed experts (`experts_key`) and how many each token uses (num_experts_per_tok).
void ReadRoutedExperts(const JsonCursor& config, std::string_view experts_key, std::string_view experts_what,
                       MoeShape& moe) {
  moe.experts = Count(config, experts_key, experts_what, kMaxExperts);
  moe.top_k = ReadTopK(config.Required("num_experts_per_tok", "the number of experts each token is routed to"),
                       moe.experts, experts_key);
}

// llama, mistral, mixtral, qwen2, qwen3, qwen3_moe: RoPE, RMSNorm, SwiGLU, optional grouped-query
// attention.
ModelSpec ReadLlamaFamily(const JsonCursor& config, const std::string& type, bool ffn_optional = false) {
  const bool qwen3 = type == "qwen3" || type == "qwen3_moe";
  // Qwen3's head width is not hidden / heads for every size (Qwen3-0.6B: 1024 / 16 = 64, but
  // head_dim is 128), and Transformers' default of 128 is easy to get wrong; require the key.
  // Mistral-family configs may give head_dim, possibly as null, meaning hidden / heads.
  ShapeKeys keys(MlpKind::kSwiGlu, NormKind::kRmsNorm);
  keys.head_dim = qwen3 ? HeadDimKey::kRequired : HeadDimKey::kOptional;
  keys.ffn_optional = ffn_optional;
  ModelSpec m = ReadDecoderShape(config, keys);

  if (type == "qwen2") {
    m.qkv_bias = true;  // Qwen2 always has q, k and v biases and no other
  } else if (type == "llama" || qwen3) {
    // attention_bias puts biases on q, k, v and o; Llama's mlp_bias on the three MLP matrices.
    // Mistral and Mixtral have no biases whatever their config says, as in Transformers.
    const bool attention_bias = Flag(config, "attention_bias", false);
    const bool mlp_bias = type == "llama" && Flag(config, "mlp_bias", false);
    m.qkv_bias = attention_bias;
    // ModelSpec has one flag for the o and MLP biases; when only one of them is present, both are
    // counted, which overstates the parameters by a few vectors per layer.
    m.linear_bias = attention_bias || mlp_bias;
    if (attention_bias != mlp_bias) {
      m.not_modeled.push_back(fmt::format(
          "The config has {} but not {}; the model is costed with biases on the attention output and the MLP "
          "alike (a few vectors per layer more than the model has).",
          attention_bias ? "attention_bias" : "mlp_bias", attention_bias ? "mlp_bias" : "attention_bias"));
    }
  }
  m.qk_norm = qwen3;

  if (type == "mistral" || type == "mixtral") {
    // Mistral's window applies to every layer.
    SetWindows(m, OptionalWindow(config), WindowedLayers(m.layers, 0));
  } else if (type == "qwen2" || qwen3) {
    // Qwen configs always carry a sliding_window value; only use_sliding_window turns it on, for
    // the layers from max_window_layers on (Transformers' default 28), or as layer_types says.
    if (Flag(config, "use_sliding_window", false)) {
      std::optional<JsonCursor> first = config.Optional("max_window_layers");
      const int first_windowed =
          first ? ToInt(*first, "the first layer with the sliding window", 0, kMaxLayers) : 28;
      std::vector<bool> windowed(m.layers, false);
      for (int i = first_windowed; i < m.layers; ++i) windowed[i] = true;
      SetWindows(m, OptionalWindow(config), WindowedLayersOf(config, m.layers, std::move(windowed)));
    }
  }

  if (type == "mixtral") {
    ReadRoutedExperts(config, "num_local_experts", "the number of routed experts per layer", m.moe);
    m.moe.ffn = m.ffn;  // every Mixtral layer is MoE, with experts of the config's intermediate size
  } else if (type == "qwen3_moe") {
    // Layer i is MoE when i + 1 is a multiple of decoder_sparse_step and i is not in
    // mlp_only_layers (Transformers' Qwen3MoeDecoderLayer); the dense ones use intermediate_size.
    ReadRoutedExperts(config, "num_experts", "the number of routed experts per layer", m.moe);
    m.moe.ffn = Count(config, "moe_intermediate_size", "the intermediate size of one expert", kMaxFfn);
    m.moe.layer_step = OptionalCount(config, "decoder_sparse_step", "the spacing of MoE layers", kMaxLayers, 1);
    if (std::optional<JsonCursor> dense = config.Optional("mlp_only_layers")) {
      m.moe.dense_layers = ReadLayerList(*dense, m.layers, "a layer with the dense MLP");
    }
    bool any_moe = false;
    for (int i = 0; i < m.layers; ++i) any_moe = any_moe || IsMoeLayer(m, i);
    if (!any_moe) {
      config.Required("decoder_sparse_step", "").Fail(
          "with mlp_only_layers no layer is MoE; read the model as model_type qwen3 instead");
    }
  }
  return m;
}

// GPT-2: learned positions, LayerNorm, GELU MLP, biases everywhere, tied LM head.
ModelSpec ReadGpt2(const JsonCursor& config) {
  ModelSpec m;
  m.mlp = MlpKind::kGelu;
  m.norm = NormKind::kLayerNorm;
  m.qkv_bias = true;
  m.linear_bias = true;
  m.hidden = Count(config, "n_embd", "the model width h", kMaxHidden);
  m.layers = Count(config, "n_layer", "the number of decoder layers", kMaxLayers);
  m.heads = Count(config, "n_head", "the number of attention heads", kMaxHeads);
  m.kv_heads = m.heads;
  m.head_dim = HeadDimFromHidden(config, "n_head", m.hidden, m.heads);
  m.v_head_dim = m.head_dim;
  // null (the usual value) means 4 * n_embd, as in Transformers.
  m.ffn = OptionalCount(config, "n_inner", "the MLP's intermediate size", kMaxFfn, 4 * m.hidden);
  m.learned_positions = Count(config, "n_positions", "the rows of the learned position embedding", kMaxPositions);
  m.vocab = Count(config, "vocab_size", "the vocabulary size", kMaxVocab);
  m.tied_embeddings = Flag(config, "tie_word_embeddings", true);
  // Transformers' GPT2Config defaults each of these probabilities to 0.1.
  m.dropout = DropoutProbability(config, "resid_pdrop", 0.1) > 0 || DropoutProbability(config, "attn_pdrop", 0.1) > 0 ||
              DropoutProbability(config, "embd_pdrop", 0.1) > 0;
  return m;
}

// GPT-NeoX (Pythia, GPT-NeoX-20B): rotary positions, LayerNorm, GELU MLP, biases everywhere.
// use_parallel_residual changes the order of the sums, not their cost, so it is not read.
ModelSpec ReadGptNeox(const JsonCursor& config) {
  ShapeKeys keys(MlpKind::kGelu, NormKind::kLayerNorm);
  keys.kv_heads = KvHeadsKey::kNone;
  keys.head_dim = HeadDimKey::kFromHidden;
  ModelSpec m = ReadDecoderShape(config, keys);
  // Transformers' GPT-NeoX has one key-value head per query head and ignores this key.
  if (std::optional<JsonCursor> kv = config.Optional("num_key_value_heads")) {
    if (kv->Integer(1, kMaxHeads, "check the value: it is the number of key-value heads") != m.heads) {
      kv->Fail(fmt::format("differs from num_attention_heads = {}, but GPT-NeoX has no grouped-query attention (its "
                           "Transformers class ignores the key); a GELU model with grouped-query attention is "
                           "model_type starcoder2, or remove the key",
                           m.heads));
    }
  }
  m.qkv_bias = true;
  m.linear_bias = true;
  m.dropout = m.dropout || DropoutProbability(config, "hidden_dropout", 0.0) > 0;
  return m;
}

// StarCoder2 (and Megatron's default GPT with grouped-query attention exported as it): rotary
// positions, LayerNorm, a GELU MLP, grouped-query attention, biases on every linear layer
// (use_bias), a sliding window on every layer when sliding_window is given.
ModelSpec ReadStarcoder2(const JsonCursor& config) {
  ShapeKeys keys(MlpKind::kGelu, NormKind::kLayerNorm);
  keys.kv_heads = KvHeadsKey::kRequired;  // Transformers' default (2) is one model size's
  keys.head_dim = HeadDimKey::kFromHidden;
  ModelSpec m = ReadDecoderShape(config, keys);
  if (std::optional<JsonCursor> act = config.Optional("hidden_act")) {
    const std::string name = act->String();
    if (name.rfind("gelu", 0) != 0) {
      act->Fail("bmpipe models StarCoder2's MLP with a GELU activation, such as 'gelu_pytorch_tanh'");
    }
  }
  m.qkv_bias = m.linear_bias = Flag(config, "use_bias", true);
  m.dropout = m.dropout || DropoutProbability(config, "residual_dropout", 0.0) > 0 ||
              DropoutProbability(config, "embedding_dropout", 0.0) > 0;
  SetWindows(m, OptionalWindow(config), WindowedLayers(m.layers, 0));
  return m;
}

// DeepSeek's MoE keys (DeepSeek-V3, Kimi K2, GLM-4.5): routed experts, the shared ones, the
// routing width, an expert's width, and the leading layers with the dense MLP.
void ReadDeepSeekExperts(const JsonCursor& config, ModelSpec& m) {
  m.moe.experts = Count(config, "n_routed_experts", "the number of routed experts per MoE layer", kMaxExperts);
  m.moe.shared_experts = ToInt(config.Required("n_shared_experts", "the number of always-active experts"),
                               "the number of always-active experts", 0, kMaxExperts);
  m.moe.top_k = ReadTopK(config.Required("num_experts_per_tok", "the number of routed experts each token uses"),
                         m.moe.experts, "n_routed_experts");
  m.moe.ffn = Count(config, "moe_intermediate_size", "the intermediate size of one expert", kMaxFfn);
  m.moe.first_dense_layers =
      ToInt(config.Required("first_k_dense_replace", "the number of leading layers with a dense MLP"),
            fmt::format("the number of leading dense layers, at most num_hidden_layers = {}", m.layers), 0, m.layers);
}

// Multi-token-prediction modules (model.h); Transformers' configs do not load them, but they are
// trained with the model, so they are costed.
void ReadMtpLayers(const JsonCursor& config, ModelSpec& m) {
  if (std::optional<JsonCursor> mtp = config.Optional("num_nextn_predict_layers")) {
    m.mtp_layers = ToInt(*mtp, "the number of multi-token-prediction modules", 0, kMaxLayers);
  }
}

// DeepSeek-V3: multi-head latent attention, dense MLP in the first layers, then MoE layers with
// routed and shared experts.
ModelSpec ReadDeepSeekV3(const JsonCursor& config) {
  ShapeKeys keys(MlpKind::kSwiGlu, NormKind::kRmsNorm);
  keys.ffn_what = "the intermediate size of the dense layers' MLP";
  keys.head_dim = HeadDimKey::kNone;
  ModelSpec m = ReadDecoderShape(config, keys);
  RejectAttentionBias(config, "latent attention");

  // q_lora_rank null means queries are projected directly from the hidden state.
  std::optional<JsonCursor> q_rank = config.Optional("q_lora_rank");
  m.latent.q_lora_rank = q_rank ? ToInt(*q_rank, "the query down-projection rank, or null for none", 0, kMaxRank) : 0;
  m.latent.kv_lora_rank = Count(config, "kv_lora_rank", "the key-value latent rank", kMaxRank);
  m.latent.qk_nope_head_dim = Count(config, "qk_nope_head_dim", "the per-head query/key width without RoPE", kMaxHeadDim);
  m.latent.qk_rope_head_dim = Count(config, "qk_rope_head_dim", "the per-head query/key width with RoPE", kMaxHeadDim);
  m.head_dim = m.latent.qk_nope_head_dim + m.latent.qk_rope_head_dim;
  m.v_head_dim = Count(config, "v_head_dim", "the per-head value width", kMaxHeadDim);

  ReadDeepSeekExperts(config, m);
  if (std::optional<JsonCursor> freq = config.Optional("moe_layer_freq")) {
    if (ToInt(*freq, "the spacing of MoE layers", 1, kMaxLayers) != 1) {
      freq->Fail("bmpipe models every layer after first_k_dense_replace as MoE, so it needs moe_layer_freq = 1");
    }
  }

  ReadMtpLayers(config, m);
  return m;
}

// GLM-4.5 (glm4_moe): grouped-query attention with optional q/k/v biases and q/k norms (rotary on
// part of each head, which changes no FLOPs the cost counts), a dense MLP in the first
// first_k_dense_replace layers, then routed and shared experts as DeepSeek-V3's, and
// multi-token-prediction modules.
ModelSpec ReadGlm4Moe(const JsonCursor& config) {
  ShapeKeys keys(MlpKind::kSwiGlu, NormKind::kRmsNorm);
  keys.ffn_what = "the intermediate size of the dense layers' MLP";
  ModelSpec m = ReadDecoderShape(config, keys);
  m.qkv_bias = Flag(config, "attention_bias", false);
  m.qk_norm = Flag(config, "use_qk_norm", false);
  ReadDeepSeekExperts(config, m);
  ReadMtpLayers(config, m);
  return m;
}

// DeepSeek-V3.2: DeepSeek-V3 with sparse attention on every layer (the lightning indexer and the
// top-k keys it selects); the defaults are Transformers' DeepseekV32Config's.
ModelSpec ReadDeepSeekV32(const JsonCursor& config) {
  ModelSpec m = ReadDeepSeekV3(config);
  m.sparse.index_heads = OptionalCount(config, "index_n_heads", "the indexer's heads", kMaxHeads, 64);
  m.sparse.index_head_dim = OptionalCount(config, "index_head_dim", "the width of an indexer head", kMaxHeadDim, 128);
  m.sparse.topk = OptionalCount(config, "index_topk", "the keys each query attends to", kMaxPositions, 2048);
  return m;
}

// gpt-oss: every layer MoE, experts with biases and a clamped SwiGLU, attention with biases and a
// learned sink logit per head, sliding-window attention on alternate layers.
ModelSpec ReadGptOss(const JsonCursor& config) {
  ShapeKeys keys(MlpKind::kSwiGlu, NormKind::kRmsNorm);
  keys.ffn_what = "the intermediate size of one expert";
  keys.head_dim = HeadDimKey::kRequired;
  ModelSpec m = ReadDecoderShape(config, keys);
  // attention_bias (Transformers' default true) puts biases on q, k, v and o; the experts always
  // have biases. One ModelSpec flag covers the o and MLP biases, so without attention_bias the
  // count keeps the o bias (h per layer more than the model has).
  m.qkv_bias = Flag(config, "attention_bias", true);
  m.linear_bias = true;

  m.moe.experts = Count(config, "num_local_experts", "the number of routed experts per layer", kMaxExperts);
  m.moe.ffn = m.ffn;
  // Checkpoints spell the routing width twice; either will do, and both must agree.
  std::optional<JsonCursor> per_token = config.Optional("experts_per_token");
  std::optional<JsonCursor> per_tok = config.Optional("num_experts_per_tok");
  if (!per_token && !per_tok) config.Required("num_experts_per_tok", "the number of experts each token is routed to");
  m.moe.top_k = ReadTopK(per_tok ? *per_tok : *per_token, m.moe.experts, "num_local_experts");
  if (per_tok && per_token && ReadTopK(*per_token, m.moe.experts, "num_local_experts") != m.moe.top_k) {
    per_tok->Fail(fmt::format("differs from experts_per_token = {}; give one routing width",
                              ReadTopK(*per_token, m.moe.experts, "num_local_experts")));
  }

  // Transformers' default: window 128 on every other layer, starting with the first.
  SetWindows(m, WindowOr(config, 128), WindowedLayersOf(config, m.layers, WindowedLayers(m.layers, 2)));
  m.not_modeled.push_back(
      "gpt-oss's attention sinks (one learned logit per head) and router bias are not costed (negligible), and its "
      "clamped SwiGLU (swiglu_limit) is costed as SwiGLU.");
  return m;
}

// Llama 4 (Scout, Maverick), from text_config in a multimodal config: MoE layers every
// interleave_moe_layer_step layers (or as moe_layers lists them), each with one shared expert of
// the routed experts' size; dense layers of width intermediate_size_mlp.
ModelSpec ReadLlama4(const JsonCursor& top, const JsonCursor& config) {
  ShapeKeys keys(MlpKind::kSwiGlu, NormKind::kRmsNorm);
  keys.ffn_key = "intermediate_size_mlp";
  keys.ffn_what = "the intermediate size of the dense layers' MLP";
  keys.head_dim = HeadDimKey::kRequired;
  // The multimodal config keeps tie_word_embeddings at its top level.
  keys.tied_default = Flag(top, "tie_word_embeddings", false);
  ModelSpec m = ReadDecoderShape(config, keys);
  RejectAttentionBias(config, "Llama 4's attention");

  ReadRoutedExperts(config, "num_local_experts", "the number of routed experts per MoE layer", m.moe);
  m.moe.ffn = Count(config, "intermediate_size", "the intermediate size of one expert and of the shared expert",
                    kMaxFfn);
  m.moe.shared_experts = 1;
  m.moe.layer_step =
      OptionalCount(config, "interleave_moe_layer_step", "the spacing of MoE layers", kMaxLayers, 1);
  // moe_layers, when given, is the list Transformers uses instead of the step.
  if (std::optional<JsonCursor> listed = config.Optional("moe_layers")) {
    const std::vector<int> moe_layers = ReadLayerList(*listed, m.layers, "a MoE layer");
    if (moe_layers.empty()) listed->Fail("no layer is MoE; give the MoE layers' indices");
    m.moe.layer_step = 1;
    for (int i = 0, k = 0; i < m.layers; ++i) {
      if (k < static_cast<int>(moe_layers.size()) && moe_layers[k] == i) {
        ++k;
      } else {
        m.moe.dense_layers.push_back(i);
      }
    }
  }
  // Chunked attention on the layers with RoPE (Transformers' default chunk 8192; null: none):
  // layer_types when given, else no_rope_layers (1: RoPE and chunks), else every
  // no_rope_layer_interval-th layer (default 4) attends to the whole sequence without RoPE.
  int chunk = 8192;
  bool chunks = true;
  if (config.Has("attention_chunk_size")) {
    std::optional<JsonCursor> c = config.Optional("attention_chunk_size");
    chunks = c.has_value();
    if (c) chunk = ToInt(*c, "the attention chunk in tokens, or null for none", 1, kMaxPositions);
  }
  std::vector<bool> chunked;
  if (std::optional<JsonCursor> types = config.Optional("layer_types")) {
    chunked = ReadLayerTypes(*types, m.layers, "chunked_attention");
  } else if (std::optional<JsonCursor> rope = config.Optional("no_rope_layers")) {
    const std::vector<JsonCursor> entries = rope->Elements();
    if (entries.size() != static_cast<std::size_t>(m.layers)) {
      rope->FailAt(fmt::format("has {} entries for num_hidden_layers = {}; give one per decoder layer", entries.size(),
                               m.layers));
    }
    for (const JsonCursor& e : entries) chunked.push_back(e.Integer(0, 1, "1 for a layer with RoPE, 0 without") == 1);
  } else {
    chunked = WindowedLayers(
        m.layers, OptionalCount(config, "no_rope_layer_interval", "the layers per layer without RoPE", kMaxLayers, 4));
  }
  if (chunks) SetWindows(m, chunk, std::move(chunked));
  m.local_attention = LocalAttention::kChunked;
  return m;
}

// An optional whole number spelled one of two ways (the checkpoints' remote code and Transformers'
// class name some Mamba keys differently); `fallback` when neither is given.
int EitherCount(const JsonCursor& config, std::string_view key, std::string_view other, std::string_view what,
                std::int64_t max, std::optional<int> fallback) {
  for (std::string_view k : {key, other}) {
    if (std::optional<JsonCursor> c = config.Optional(k)) return ToInt(*c, what, 1, max);
  }
  if (!fallback) config.Required(key, fmt::format("{} (or {})", what, other));
  return *fallback;
}

// One shared expert of the width `key` gives (0 or missing: none), costed as that many routed
// experts' widths: a multiple of moe.ffn, else an error.
void ReadSharedExpertWidth(const JsonCursor& config, std::string_view key, MoeShape& moe) {
  std::optional<JsonCursor> shared = config.Optional(key);
  if (!shared) return;
  const int width = ToInt(*shared, "the shared expert's intermediate size, or 0 for none", 0, kMaxFfn);
  if (width % moe.ffn != 0) {
    shared->Fail(fmt::format("must be a multiple of moe_intermediate_size = {} (bmpipe costs the shared expert as "
                             "that many experts' widths)",
                             moe.ffn));
  }
  moe.shared_experts = width / moe.ffn;
}

// Nemotron-H and Nemotron 3 (nemotron_h): a hybrid stack whose layers are each one block, named by
// hybrid_override_pattern ('M' Mamba-2, '*' attention, '-' MLP, 'E' MoE) or by Transformers'
// layers_block_type ("mamba", "attention", "mlp", "moe"); each block is a norm, its mixer or MLP
// and a residual add. Grouped-query attention without position embeddings, squared-ReLU MLPs,
// RMSNorm, untied embeddings. The MoE blocks have routed experts and one shared MLP of
// moe_shared_expert_intermediate_size, costed as that many experts' widths.
ModelSpec ReadNemotronH(const JsonCursor& config) {
  ShapeKeys keys(MlpKind::kSquaredRelu, NormKind::kRmsNorm);
  keys.ffn_what = "the MLP blocks' intermediate size";
  keys.head_dim = HeadDimKey::kNone;
  ModelSpec m = ReadDecoderShape(config, keys);
  // The head width is not hidden / heads in every size (Nemotron 3 Nano: 2688 / 32 = 84, heads of
  // 128); the remote code's configs spell it head_dim or attention_head_dim.
  std::optional<JsonCursor> head_dim = config.Optional("head_dim");
  if (!head_dim) head_dim = config.Optional("attention_head_dim");
  m.head_dim = head_dim ? ToInt(*head_dim, "the query/key/value width per head", 1, kMaxHeadDim)
                        : HeadDimFromHidden(config, "num_attention_heads", m.hidden, m.heads);
  m.v_head_dim = m.head_dim;
  if (std::optional<JsonCursor> mtp = config.Optional("num_nextn_predict_layers"); mtp && Gives(mtp->json())) {
    m.not_modeled.push_back(fmt::format(
        "num_nextn_predict_layers = {}: Nemotron's multi-token-prediction blocks are not costed.", mtp->json().dump()));
  }
  RejectAttentionBias(config, "Nemotron-H's attention");
  for (std::string_view key : {"mlp_bias", "use_bias"}) {
    if (Flag(config, key, false)) config.Required(key, "").Fail("biases in the linear layers are not modeled; bmpipe needs false");
  }
  if (std::optional<JsonCursor> act = config.Optional("mlp_hidden_act"); act && act->String() != "relu2") {
    act->Fail("bmpipe models Nemotron-H's MLP blocks with a squared ReLU, which needs mlp_hidden_act 'relu2'");
  }
  // The blocks, one character or name each.
  std::vector<char> blocks;
  std::optional<JsonCursor> pattern = config.Optional("hybrid_override_pattern");
  std::optional<JsonCursor> types = config.Optional("layers_block_type");
  if (pattern) {
    for (char c : pattern->String()) {
      if (c != 'M' && c != '*' && c != '-' && c != 'E') {
        pattern->Fail(fmt::format("has '{}'; bmpipe reads the blocks 'M' (Mamba-2), '*' (attention), '-' (MLP) and "
                                  "'E' (MoE)",
                                  c));
      }
      blocks.push_back(c);
    }
  } else if (types) {
    for (const JsonCursor& e : types->Elements()) {
      const std::string t = e.String();
      const char c = t == "mamba" ? 'M' : t == "attention" ? '*' : t == "mlp" ? '-' : t == "moe" ? 'E' : '?';
      if (c == '?') e.Fail("bmpipe reads the block types mamba, attention, mlp and moe");
      blocks.push_back(c);
    }
  } else {
    config.Required("hybrid_override_pattern", "the blocks of the hybrid stack, one character each (M, *, -, E)");
  }
  if (blocks.size() != static_cast<std::size_t>(m.layers)) {
    (pattern ? *pattern : *types)
        .FailAt(fmt::format("has {} blocks for num_hidden_layers = {}; give one per layer", blocks.size(), m.layers));
  }
  bool any_mamba = false, any_moe = false;
  for (char c : blocks) {
    m.mixers.push_back(c == 'M' ? Mixer::kMamba2 : c == '*' ? Mixer::kAttention : Mixer::kNone);
    m.mixer_only.push_back(c == 'M' || c == '*');
    any_mamba = any_mamba || c == 'M';
    any_moe = any_moe || c == 'E';
  }
  if (any_mamba) {
    MambaShape& mb = m.mamba;
    mb.heads = Count(config, "mamba_num_heads", "the number of Mamba-2 heads", kMaxHeads);
    mb.head_dim = Count(config, "mamba_head_dim", "the width of a Mamba-2 head", kMaxHeadDim);
    mb.state = Count(config, "ssm_state_size", "the Mamba-2 state size per head", kMaxHeadDim);
    mb.groups = EitherCount(config, "n_groups", "mamba_n_groups", "the number of Mamba-2 B/C groups", kMaxHeads,
                            std::nullopt);
    mb.conv_kernel = EitherCount(config, "conv_kernel", "mamba_d_conv", "the Mamba-2 convolution's taps", 64, 4);
    // Megatron's Mamba mixer, which trains these models, scans in chunks of 128 tokens unless the
    // config says otherwise.
    mb.chunk = EitherCount(config, "chunk_size", "mamba_chunk_size", "the Mamba-2 scan's chunk in tokens",
                           kMaxPositions, 128);
    if (mb.heads % mb.groups != 0) {
      config.Required("mamba_num_heads", "").Fail(fmt::format("must be a multiple of n_groups = {}", mb.groups));
    }
  }
  if (any_moe) {
    m.moe.experts = Count(config, "n_routed_experts", "the number of routed experts per MoE block", kMaxExperts);
    m.moe.top_k = ReadTopK(config.Required("num_experts_per_tok", "the number of routed experts each token uses"),
                           m.moe.experts, "n_routed_experts");
    m.moe.ffn = Count(config, "moe_intermediate_size", "the intermediate size of one expert", kMaxFfn);
    ReadSharedExpertWidth(config, "moe_shared_expert_intermediate_size", m.moe);
    for (int i = 0; i < m.layers; ++i) {
      if (blocks[i] != 'E') m.moe.dense_layers.push_back(i);
    }
  }
  return m;
}

// Qwen3-Next (qwen3_next) and Qwen3.5 (qwen3_5, qwen3_5_moe, read from their text_config): Qwen3's
// shape (qk norms; Qwen3-MoE's routed experts by decoder_sparse_step and mlp_only_layers for the
// MoE ones) with Gated DeltaNet in most layers and gated attention in the rest (layer_types
// "linear_attention" and "full_attention", else attention on every full_attention_interval-th
// layer, Transformers' default 4), and one shared expert of shared_expert_intermediate_size beside
// the routed ones (its 1-wide sigmoid gate is not counted: h parameters a layer). Qwen3-Next's
// attention is always gated; Qwen3.5's as attn_output_gate says (Transformers' default true). The
// delta rule runs in chunks of 64 tokens (the fla kernels'). Multi-token-prediction layers are a
// note.
ModelSpec ReadQwenGatedDeltaNet(const JsonCursor& config, const std::string& type) {
  const bool moe = type != "qwen3_5";
  // Qwen3.5's MoE configs give no dense MLP width (every layer is MoE unless mlp_only_layers says).
  ModelSpec m = ReadLlamaFamily(config, moe ? "qwen3_moe" : "qwen3", /*ffn_optional=*/type == "qwen3_5_moe");
  m.attention_output_gate = type == "qwen3_next" || Flag(config, "attn_output_gate", true);
  std::vector<bool> linear;
  if (std::optional<JsonCursor> types = config.Optional("layer_types")) {
    linear = ReadLayerTypes(*types, m.layers, "linear_attention");
  } else {
    const int every = OptionalCount(config, "full_attention_interval", "the layers per full-attention layer",
                                    kMaxLayers, 4);
    linear = WindowedLayers(m.layers, every);  // all but every `every`-th
  }
  for (bool l : linear) m.mixers.push_back(l ? Mixer::kGatedDeltaNet : Mixer::kAttention);
  if (std::find(linear.begin(), linear.end(), true) != linear.end()) {
    DeltaNetShape& dn = m.deltanet;
    dn.key_heads = Count(config, "linear_num_key_heads", "the Gated DeltaNet query/key heads", kMaxHeads);
    dn.value_heads = Count(config, "linear_num_value_heads", "the Gated DeltaNet value heads", kMaxHeads);
    dn.key_head_dim = Count(config, "linear_key_head_dim", "the Gated DeltaNet query/key head width", kMaxHeadDim);
    dn.value_head_dim = Count(config, "linear_value_head_dim", "the Gated DeltaNet value head width", kMaxHeadDim);
    dn.conv_kernel = OptionalCount(config, "linear_conv_kernel_dim", "the Gated DeltaNet convolution's taps", 64, 4);
    dn.chunk = 64;
    if (dn.value_heads % dn.key_heads != 0) {
      config.Required("linear_num_value_heads", "")
          .Fail(fmt::format("must be a multiple of linear_num_key_heads = {}", dn.key_heads));
    }
  }
  if (moe) ReadSharedExpertWidth(config, "shared_expert_intermediate_size", m.moe);
  for (std::string_view key : {"mtp_num_hidden_layers", "num_nextn_predict_layers"}) {
    if (std::optional<JsonCursor> mtp = config.Optional(key); mtp && Gives(mtp->json())) {
      m.not_modeled.push_back(fmt::format("{} = {}: the multi-token-prediction layers are not costed.", key,
                                          mtp->json().dump()));
    }
  }
  return m;
}

// Gemma 2 and Gemma 3: GeGLU MLP, norms before and after attention and MLP, sliding-window
// attention on every other layer (Gemma 2) or five of every six (Gemma 3), tied embeddings.
ModelSpec ReadGemma(const JsonCursor& config, bool gemma3) {
  // Gemma's defaults for the key-value heads and the head width are one model size's, not
  // hidden / heads: require them.
  ShapeKeys keys(MlpKind::kGeGlu, NormKind::kRmsNorm);
  keys.kv_heads = KvHeadsKey::kRequired;
  keys.head_dim = HeadDimKey::kRequired;
  keys.vocab_default = gemma3 ? 262208 : 256000;
  keys.tied_default = true;
  ModelSpec m = ReadDecoderShape(config, keys);
  m.post_norms = true;
  m.qk_norm = gemma3;
  RejectAttentionBias(config, "Gemma's attention");
  // hidden_activation wins over hidden_act, as in Transformers; the gate is a GELU.
  std::optional<JsonCursor> act = config.Optional("hidden_activation");
  if (!act) act = config.Optional("hidden_act");
  if (act) {
    const std::string name = act->String();
    if (name != "gelu_pytorch_tanh" && name != "gelu" && name != "gelu_new" && name != "gelu_fast") {
      act->Fail("bmpipe models Gemma's MLP as GeGLU, which needs a GELU activation such as 'gelu_pytorch_tanh'");
    }
  }

  const int global_every = gemma3 ? OptionalCount(config, "sliding_window_pattern",
                                                  "the layers per global-attention layer", kMaxLayers, 6)
                                  : 2;
  SetWindows(m, WindowOr(config, 4096),
             WindowedLayersOf(config, m.layers, WindowedLayers(m.layers, global_every)));

  // Soft-capping is a tanh on the scores or the logits: elementwise work inside the attention
  // kernel and beside the loss, small next to the GEMMs around it. Transformers' defaults: 50 and
  // 30 for Gemma 2, none for Gemma 3.
  const bool has_attn_cap = config.Has("attn_logit_softcapping") ? config.Optional("attn_logit_softcapping").has_value()
                                                                 : !gemma3;
  const bool has_final_cap = config.Has("final_logit_softcapping")
                                 ? config.Optional("final_logit_softcapping").has_value()
                                 : !gemma3;
  if (has_attn_cap || has_final_cap) {
    m.not_modeled.push_back(fmt::format(
        "Logit soft-capping ({}) is not costed: a tanh per element, small next to the GEMMs around it.",
        has_attn_cap && has_final_cap ? "attention scores and final logits"
        : has_attn_cap                ? "attention scores"
                                      : "final logits"));
  }
  return m;
}

ModelSpec ReadConfigTree(const Json& doc, const std::string& path) {
  const JsonCursor config(doc, "");
  const std::vector<std::string>& types = SupportedModelTypes();
  const JsonCursor type_cursor =
      config.Required("model_type", fmt::format("the architecture; bmpipe reads {}", fmt::join(types, ", ")));
  const std::string type = type_cursor.String();
  bool supported = false;
  for (const std::string& t : types) supported = supported || t == type;
  if (!supported) {
    for (const UnmodeledType& u : kUnmodeledTypes) {
      if (u.type != type) continue;
      type_cursor.Fail(fmt::format("bmpipe does not cost {} yet, so it cannot plan this model (no other model_type "
                                   "costs them either); it reads {}",
                                   u.what, fmt::join(types, ", ")));
    }
    type_cursor.Fail(fmt::format("unsupported model_type; bmpipe reads {}{}", fmt::join(types, ", "), DidYouMean(type, types)));
  }
  // Multimodal Llama 4, Gemma 3 and Qwen3.5 configs nest the language model's keys in text_config.
  std::optional<JsonCursor> text = config.Optional("text_config");
  const JsonCursor language = text ? *text : config;
  RejectForeignArchitectureKeys(language, type);
  ModelSpec m;
  std::string family = type;
  if (type == "gpt2") {
    m = ReadGpt2(config);
  } else if (type == "gpt_neox") {
    m = ReadGptNeox(config);
  } else if (type == "starcoder2") {
    m = ReadStarcoder2(config);
  } else if (type == "deepseek_v3" || type == "kimi_k2") {
    // Kimi K2's configs are DeepSeek-V3's architecture (DeepseekV3ForCausalLM) with other sizes.
    m = ReadDeepSeekV3(config);
  } else if (type == "deepseek_v32") {
    m = ReadDeepSeekV32(config);
  } else if (type == "glm4_moe") {
    m = ReadGlm4Moe(config);
  } else if (type == "gpt_oss") {
    m = ReadGptOss(config);
  } else if (type == "nemotron_h") {
    m = ReadNemotronH(config);
  } else if (type == "qwen3_next") {
    m = ReadQwenGatedDeltaNet(config, type);
  } else if (type == "qwen3_5" || type == "qwen3_5_text" || type == "qwen3_5_moe" || type == "qwen3_5_moe_text") {
    // Qwen3.5's configs are vision-language ones: the language model's keys in text_config.
    family = type.rfind("qwen3_5_moe", 0) == 0 ? "qwen3_5_moe" : "qwen3_5";
    m = ReadQwenGatedDeltaNet(language, family);
  } else if (type == "llama4" || type == "llama4_text") {
    m = ReadLlama4(config, language);
    family = "llama4";
  } else if (type == "gemma2") {
    m = ReadGemma(config, /*gemma3=*/false);
  } else if (type == "gemma3" || type == "gemma3_text") {
    m = ReadGemma(language, /*gemma3=*/true);
    family = "gemma3";
  } else {
    m = ReadLlamaFamily(config, type);
  }
  // Transformers' classes of these types attend to the whole sequence whatever sliding_window
  // says; so does the cost, and the plan says so.
  const std::vector<std::string> windowless = {"gpt2",    "gpt_neox", "llama",  "deepseek_v3", "deepseek_v32",
                                               "kimi_k2", "glm4_moe", "llama4", "llama4_text", "nemotron_h"};
  if (std::find(windowless.begin(), windowless.end(), type) != windowless.end()) {
    if (std::optional<JsonCursor> w = language.Optional("sliding_window"); w && Gives(w->json())) {
      m.not_modeled.push_back(fmt::format(
          "sliding_window = {} is not read: model_type {} attends to the whole sequence in Transformers, and the cost "
          "does too.",
          w->json().dump(), type));
    }
  }
  if (config.Has("vision_config")) {
    m.not_modeled.push_back("The vision encoder (vision_config) is not modeled; the plan covers the language model.");
  }
  m.name = path;
  m.family = family;
  // A quantized checkpoint (AWQ, GPTQ, DeepSeek-V3's published FP8 weights) has the same shape;
  // how its weights are stored does not change what training it costs, which bmpipe models in
  // 16-bit precision. Say so rather than refuse the file.
  if (std::optional<JsonCursor> q = config.Optional("quantization_config")) {
    std::string method = "unknown method";
    if (q->json().is_object() && q->json().contains("quant_method") && q->json()["quant_method"].is_string()) {
      method = q->json()["quant_method"].get<std::string>();
    }
    m.not_modeled.push_back("quantization_config (" + method +
                            ") describes how the checkpoint is stored; bmpipe costs 16-bit training of the same shape");
  }
  const Status status = ValidateModel(m);
  if (!status.ok()) throw internal::CursorFailure{status.error().message};
  return m;
}

}  // namespace

Result<ModelSpec> ReadHuggingFaceConfig(const std::string& path) {
  Result<Json> doc = LoadDocument(path);
  if (!doc.ok()) return doc.error();
  return ReadHuggingFaceConfig(doc.value(), path);
}

Result<ModelSpec> ReadHuggingFaceConfig(const Json& config, const std::string& name) {
  return ReadDocument<ModelSpec>(name, [&] { return ReadConfigTree(config, name); });
}

}  // namespace bmpipe
