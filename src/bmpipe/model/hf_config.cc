// Reading a Hugging Face config.json into a ModelSpec.
//
// Key policy. A config.json holds much more than the model's shape. This file reads the keys that
// change compute or memory (layer count, widths, head counts, vocabulary size, MLP and attention
// variants, biases, dropout, embedding tying, experts and routing width, latent-attention ranks,
// sliding windows) and validates each strictly: a message names the key, its value and the fix.
// Every other key is ignored on purpose because it changes neither the FLOPs nor the bytes of
// training, for example rope_theta and rope_scaling, rms_norm_eps and layer_norm_eps,
// torch_dtype (bmpipe models 16-bit training whatever the checkpoint's type), architectures,
// bos/eos/pad token ids, initializer_range, max_position_embeddings (the sequence length is a
// training setting), use_cache, transformers_version, auto_map, router loss coefficients and
// DeepSeek's routing details (n_group, topk_group, topk_method, scoring_func,
// routed_scaling_factor, norm_topk_prob). Unlike bmpipe's own input files, unknown keys are
// therefore not errors here (no ExpectKeys on the config): Transformers releases add keys often.
//
// A key a config may omit takes the default of the Transformers configuration class of that
// model_type, so an omitted key means what it means to Transformers. Keys that fix the shape
// (sizes and head counts) are required.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "bmpipe/core/document.h"
#include "bmpipe/core/json_cursor.h"
#include "bmpipe/model/model.h"

namespace bmpipe {

namespace internal {
std::string MoeWithoutExpertParallelismNote();  // defined in model.cc
}  // namespace internal

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
  static const std::vector<std::string> types = {"llama",  "mistral", "mixtral",  "qwen2",
                                                 "qwen3",  "gpt2",    "gpt_neox", "deepseek_v3"};
  return types;
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

std::string SlidingWindowNote(std::optional<std::int64_t> window) {
  return fmt::format(
      "Sliding-window attention{} is not modeled: full attention is assumed, an upper bound on attention cost.",
      window ? fmt::format(" (window {} tokens)", *window) : std::string());
}

std::optional<std::int64_t> OptionalWindow(const JsonCursor& config) {
  std::optional<JsonCursor> c = config.Optional("sliding_window");
  if (!c) return std::nullopt;
  return c->Integer(1, kMaxPositions, "check the value: it is the attention window in tokens, or null for none");
}

// llama, mistral, mixtral, qwen2, qwen3: RoPE, RMSNorm, SwiGLU, optional grouped-query attention.
ModelSpec ReadLlamaFamily(const JsonCursor& config, const std::string& type) {
  ModelSpec m;
  m.mlp = MlpKind::kSwiGlu;
  m.norm = NormKind::kRmsNorm;
  m.hidden = Count(config, "hidden_size", "the model width h", kMaxHidden);
  m.ffn = Count(config, "intermediate_size", "the MLP's intermediate size", kMaxFfn);
  m.layers = Count(config, "num_hidden_layers", "the number of decoder layers", kMaxLayers);
  m.heads = Count(config, "num_attention_heads", "the number of query heads", kMaxHeads);
  m.kv_heads = ReadKvHeads(config, m.heads);
  if (type == "qwen3") {
    // Qwen3's head width is not hidden / heads for every size (Qwen3-0.6B: 1024 / 16 = 64, but
    // head_dim is 128), and Transformers' default of 128 is easy to get wrong; require the key.
    m.head_dim = Count(config, "head_dim", "the query/key/value width per head", kMaxHeadDim);
  } else {
    // Mistral-family configs may give head_dim, possibly as null, meaning hidden / heads.
    std::optional<JsonCursor> head_dim = config.Optional("head_dim");
    m.head_dim = head_dim ? ToInt(*head_dim, "the query/key/value width per head", 1, kMaxHeadDim)
                          : HeadDimFromHidden(config, "num_attention_heads", m.hidden, m.heads);
  }
  m.v_head_dim = m.head_dim;
  m.vocab = Count(config, "vocab_size", "the vocabulary size", kMaxVocab);
  m.tied_embeddings = Flag(config, "tie_word_embeddings", false);
  RequireSiluActivation(config);
  m.dropout = DropoutProbability(config, "attention_dropout", 0.0) > 0;

  if (type == "qwen2") {
    m.qkv_bias = true;  // Qwen2 always has q, k and v biases and no other
  } else if (type == "llama" || type == "qwen3") {
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
  m.qk_norm = type == "qwen3";

  if (type == "mistral" || type == "mixtral") {
    if (std::optional<std::int64_t> window = OptionalWindow(config)) m.not_modeled.push_back(SlidingWindowNote(window));
  } else if (type == "qwen2" || type == "qwen3") {
    // Qwen configs always carry a sliding_window value; only use_sliding_window turns it on.
    if (Flag(config, "use_sliding_window", false)) m.not_modeled.push_back(SlidingWindowNote(OptionalWindow(config)));
  }

  if (type == "mixtral") {
    m.moe.experts = Count(config, "num_local_experts", "the number of routed experts per layer", kMaxExperts);
    JsonCursor top_k = config.Required("num_experts_per_tok", "the number of experts each token is routed to");
    m.moe.top_k = ToInt(top_k, "the number of experts each token is routed to", 1, kMaxExperts);
    if (m.moe.top_k > m.moe.experts) {
      top_k.Fail(fmt::format("cannot exceed num_local_experts = {}", m.moe.experts));
    }
    m.moe.ffn = m.ffn;  // every Mixtral layer is MoE, with experts of the config's intermediate size
    m.not_modeled.push_back(internal::MoeWithoutExpertParallelismNote());
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
  ModelSpec m;
  m.mlp = MlpKind::kGelu;
  m.norm = NormKind::kLayerNorm;
  m.qkv_bias = true;
  m.linear_bias = true;
  m.hidden = Count(config, "hidden_size", "the model width h", kMaxHidden);
  m.ffn = Count(config, "intermediate_size", "the MLP's intermediate size", kMaxFfn);
  m.layers = Count(config, "num_hidden_layers", "the number of decoder layers", kMaxLayers);
  m.heads = Count(config, "num_attention_heads", "the number of attention heads", kMaxHeads);
  m.kv_heads = m.heads;
  m.head_dim = HeadDimFromHidden(config, "num_attention_heads", m.hidden, m.heads);
  m.v_head_dim = m.head_dim;
  m.vocab = Count(config, "vocab_size", "the vocabulary size", kMaxVocab);
  m.tied_embeddings = Flag(config, "tie_word_embeddings", false);
  m.dropout = DropoutProbability(config, "attention_dropout", 0.0) > 0 ||
              DropoutProbability(config, "hidden_dropout", 0.0) > 0;
  return m;
}

// DeepSeek-V3: multi-head latent attention, dense MLP in the first layers, then MoE layers with
// routed and shared experts.
ModelSpec ReadDeepSeekV3(const JsonCursor& config) {
  ModelSpec m;
  m.mlp = MlpKind::kSwiGlu;
  m.norm = NormKind::kRmsNorm;
  m.hidden = Count(config, "hidden_size", "the model width h", kMaxHidden);
  m.ffn = Count(config, "intermediate_size", "the intermediate size of the dense layers' MLP", kMaxFfn);
  m.layers = Count(config, "num_hidden_layers", "the number of decoder layers", kMaxLayers);
  m.heads = Count(config, "num_attention_heads", "the number of query heads", kMaxHeads);
  m.kv_heads = ReadKvHeads(config, m.heads);
  m.vocab = Count(config, "vocab_size", "the vocabulary size", kMaxVocab);
  m.tied_embeddings = Flag(config, "tie_word_embeddings", false);
  RequireSiluActivation(config);
  m.dropout = DropoutProbability(config, "attention_dropout", 0.0) > 0;
  if (Flag(config, "attention_bias", false)) {
    config.Required("attention_bias", "").Fail("biases in latent attention are not modeled; bmpipe needs false");
  }

  // q_lora_rank null means queries are projected directly from the hidden state.
  std::optional<JsonCursor> q_rank = config.Optional("q_lora_rank");
  m.latent.q_lora_rank = q_rank ? ToInt(*q_rank, "the query down-projection rank, or null for none", 0, kMaxRank) : 0;
  m.latent.kv_lora_rank = Count(config, "kv_lora_rank", "the key-value latent rank", kMaxRank);
  m.latent.qk_nope_head_dim = Count(config, "qk_nope_head_dim", "the per-head query/key width without RoPE", kMaxHeadDim);
  m.latent.qk_rope_head_dim = Count(config, "qk_rope_head_dim", "the per-head query/key width with RoPE", kMaxHeadDim);
  m.head_dim = m.latent.qk_nope_head_dim + m.latent.qk_rope_head_dim;
  m.v_head_dim = Count(config, "v_head_dim", "the per-head value width", kMaxHeadDim);

  m.moe.experts = Count(config, "n_routed_experts", "the number of routed experts per MoE layer", kMaxExperts);
  m.moe.shared_experts = ToInt(config.Required("n_shared_experts", "the number of always-active experts"),
                               "the number of always-active experts", 0, kMaxExperts);
  JsonCursor top_k = config.Required("num_experts_per_tok", "the number of routed experts each token uses");
  m.moe.top_k = ToInt(top_k, "the number of routed experts each token uses", 1, kMaxExperts);
  if (m.moe.top_k > m.moe.experts) top_k.Fail(fmt::format("cannot exceed n_routed_experts = {}", m.moe.experts));
  m.moe.ffn = Count(config, "moe_intermediate_size", "the intermediate size of one expert", kMaxFfn);
  m.moe.first_dense_layers =
      ToInt(config.Required("first_k_dense_replace", "the number of leading layers with a dense MLP"),
            fmt::format("the number of leading dense layers, at most num_hidden_layers = {}", m.layers), 0, m.layers);
  if (std::optional<JsonCursor> freq = config.Optional("moe_layer_freq")) {
    if (ToInt(*freq, "the spacing of MoE layers", 1, kMaxLayers) != 1) {
      freq->Fail("bmpipe models every layer after first_k_dense_replace as MoE, so it needs moe_layer_freq = 1");
    }
  }
  m.not_modeled.push_back(internal::MoeWithoutExpertParallelismNote());

  if (std::optional<JsonCursor> mtp = config.Optional("num_nextn_predict_layers")) {
    const int mtp_layers = ToInt(*mtp, "the number of multi-token-prediction layers", 0, kMaxLayers);
    if (mtp_layers > 0) {
      m.not_modeled.push_back(fmt::format(
          "DeepSeek-V3's {} multi-token-prediction layer(s) are not modeled; the plan covers the main model only.",
          mtp_layers));
    }
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
    type_cursor.Fail(fmt::format("unsupported model_type; bmpipe reads {}{}", fmt::join(types, ", "), DidYouMean(type, types)));
  }
  ModelSpec m;
  if (type == "gpt2") {
    m = ReadGpt2(config);
  } else if (type == "gpt_neox") {
    m = ReadGptNeox(config);
  } else if (type == "deepseek_v3") {
    m = ReadDeepSeekV3(config);
  } else {
    m = ReadLlamaFamily(config, type);
  }
  m.name = path;
  m.family = type;
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
