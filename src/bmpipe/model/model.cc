#include "bmpipe/model/model.h"

#include <filesystem>
#include <string_view>
#include <system_error>

#include <fmt/format.h>

#include "bmpipe/core/json_cursor.h"

namespace bmpipe {

namespace internal {

// Shared by the preset table and the config reader; kept out of model.h because it is not part
// of the interface.
std::string MoeWithoutExpertParallelismNote() {
  return "MoE layers are costed without expert parallelism: every pipeline rank that holds a MoE "
         "layer holds all of its routed experts' parameters, and each token's FLOPs count its "
         "top_k routed experts plus the shared experts.";
}

}  // namespace internal

namespace {

// Models larger than this are surely a typo; the bound also keeps every int64 sum in
// CountParameters far from overflow once ValidateModel has passed.
constexpr double kMaxParameters = 1e15;

template <typename T>
struct Counts {
  T embedding = 0;
  T dense_layer = 0;
  T moe_layer = 0;
  T head = 0;
  T total = 0;
};

// One counting routine for two number types: int64 for exact counts, and double so that
// ValidateModel can bound the size before any int64 product could overflow.
template <typename T>
Counts<T> CountAs(const ModelSpec& m) {
  auto n = [](int x) { return static_cast<T>(x); };
  const T h = n(m.hidden);
  const T a = n(m.heads);
  const T kv = n(m.kv_heads);
  const T dh = n(m.head_dim);
  const T v_dh = n(m.v_head_dim);
  // LayerNorm has a bias as well as a scale; RMSNorm only a scale.
  auto norm = [&](T width) { return m.norm == NormKind::kLayerNorm ? 2 * width : width; };
  auto mlp = [&](T f) {
    if (m.mlp == MlpKind::kGelu) return 2 * h * f + (m.linear_bias ? f + h : 0);
    return 3 * h * f + (m.linear_bias ? 2 * f + h : 0);
  };

  T attention = 0;
  if (m.latent.enabled()) {
    const T q_rank = n(m.latent.q_lora_rank);
    const T kv_rank = n(m.latent.kv_lora_rank);
    const T rope = n(m.latent.qk_rope_head_dim);
    const T nope = n(m.latent.qk_nope_head_dim);
    // Queries: down-projection, its norm and up-projection, or one direct projection.
    attention += q_rank > 0 ? h * q_rank + norm(q_rank) + q_rank * a * (nope + rope) : h * a * (nope + rope);
    // Keys and values share one latent; the rotary part of the key is projected separately.
    attention += h * (kv_rank + rope) + norm(kv_rank) + kv_rank * a * (nope + v_dh);
    attention += a * v_dh * h;
  } else {
    attention += h * a * dh + h * kv * dh + h * kv * v_dh + a * v_dh * h;
    if (m.qkv_bias) attention += a * dh + kv * dh + kv * v_dh;
    if (m.qk_norm) attention += 2 * norm(dh);  // one norm over head_dim for queries, one for keys
  }
  if (m.linear_bias) attention += h;  // output projection bias

  Counts<T> c;
  c.embedding = n(m.vocab) * h + n(m.learned_positions) * h;
  const T block = 2 * norm(h) + attention;  // pre-attention and pre-MLP norms
  c.dense_layer = block + mlp(n(m.ffn));
  int moe_layers = 0;
  if (m.moe.enabled()) {
    const T experts = n(m.moe.experts);
    const T router = h * experts;
    c.moe_layer = block + router + (experts + n(m.moe.shared_experts)) * mlp(n(m.moe.ffn));
    moe_layers = m.layers - m.moe.first_dense_layers;
  }
  c.head = norm(h) + (m.tied_embeddings ? 0 : n(m.vocab) * h);
  c.total = c.embedding + n(m.layers - moe_layers) * c.dense_layer + n(moe_layers) * c.moe_layer + c.head;
  return c;
}

Status Invalid(std::string_view field, std::int64_t value, std::string_view problem) {
  return InvalidInput(fmt::format("{} = {}: {}", field, value, problem));
}

}  // namespace

bool IsMoeLayer(const ModelSpec& model, int i) {
  return model.moe.enabled() && i >= model.moe.first_dense_layers && i < model.layers;
}

ParameterCounts CountParameters(const ModelSpec& model) {
  const Counts<std::int64_t> c = CountAs<std::int64_t>(model);
  ParameterCounts out;
  out.embedding = c.embedding;
  out.dense_layer = c.dense_layer;
  out.moe_layer = c.moe_layer;
  out.head = c.head;
  out.total = c.total;
  return out;
}

Status ValidateModel(const ModelSpec& m) {
  struct Size {
    const char* field;
    int value;
    const char* what;
  };
  const Size sizes[] = {
      {"layers", m.layers, "the number of decoder layers"},
      {"hidden", m.hidden, "the model width h"},
      {"vocab", m.vocab, "the vocabulary size"},
      {"heads", m.heads, "the number of query heads"},
      {"kv_heads", m.kv_heads, "the number of key-value heads (= heads without grouped-query attention)"},
      {"head_dim", m.head_dim, "the query/key width per head (usually hidden / heads)"},
      {"v_head_dim", m.v_head_dim, "the value width per head (usually head_dim)"},
  };
  for (const Size& s : sizes) {
    if (s.value <= 0) return Invalid(s.field, s.value, fmt::format("must be positive; give {}", s.what));
  }
  if (m.heads % m.kv_heads != 0) {
    return Invalid("kv_heads", m.kv_heads,
                   fmt::format("must divide heads = {}; grouped-query attention shares each key-value head "
                               "among the same number of query heads",
                               m.heads));
  }
  if (m.learned_positions < 0) {
    return Invalid("learned_positions", m.learned_positions,
                   "cannot be negative; give the rows of the learned position embedding, or 0 for rotary positions");
  }

  const LatentAttention& lat = m.latent;
  if (lat.enabled()) {
    if (lat.q_lora_rank < 0) {
      return Invalid("latent.q_lora_rank", lat.q_lora_rank, "cannot be negative; use 0 for a direct query projection");
    }
    if (lat.qk_rope_head_dim <= 0 || lat.qk_nope_head_dim <= 0) {
      return InvalidInput(fmt::format(
          "latent.qk_rope_head_dim = {}, latent.qk_nope_head_dim = {}: latent attention needs both parts of the "
          "query/key head to be positive",
          lat.qk_rope_head_dim, lat.qk_nope_head_dim));
    }
    if (m.head_dim != lat.qk_nope_head_dim + lat.qk_rope_head_dim) {
      return Invalid("head_dim", m.head_dim,
                     fmt::format("must equal latent.qk_nope_head_dim + latent.qk_rope_head_dim = {}",
                                 lat.qk_nope_head_dim + lat.qk_rope_head_dim));
    }
    if (m.qkv_bias || m.qk_norm) {
      return InvalidInput("qkv_bias and qk_norm are not modeled with latent attention; set both to false");
    }
  } else if (lat.kv_lora_rank < 0 || lat.q_lora_rank != 0 || lat.qk_rope_head_dim != 0 || lat.qk_nope_head_dim != 0) {
    return Invalid("latent.kv_lora_rank", lat.kv_lora_rank,
                   "the other latent-attention fields are set but kv_lora_rank is not positive; give kv_lora_rank > 0 "
                   "for latent attention, or set every latent field to 0");
  }

  const MoeShape& moe = m.moe;
  if (moe.enabled()) {
    if (moe.top_k < 1 || moe.top_k > moe.experts) {
      return Invalid("moe.top_k", moe.top_k,
                     fmt::format("must be between 1 and moe.experts = {}; give the experts each token is routed to",
                                 moe.experts));
    }
    if (moe.ffn <= 0) {
      return Invalid("moe.ffn", moe.ffn, "must be positive; give the intermediate size of one routed expert");
    }
    if (moe.shared_experts < 0) {
      return Invalid("moe.shared_experts", moe.shared_experts, "cannot be negative; use 0 when there are none");
    }
    if (moe.first_dense_layers < 0 || moe.first_dense_layers > m.layers) {
      return Invalid("moe.first_dense_layers", moe.first_dense_layers,
                     fmt::format("must be between 0 and layers = {}", m.layers));
    }
  } else if (moe.experts < 0 || moe.top_k != 0 || moe.ffn != 0 || moe.shared_experts != 0 ||
             moe.first_dense_layers != 0) {
    return Invalid("moe.experts", moe.experts,
                   "the other MoE fields are set but experts is not positive; give experts > 0 for a MoE model, or "
                   "set every MoE field to 0");
  }
  // A model whose layers are all MoE never uses the dense MLP, so only then may ffn be 0.
  const bool has_dense_layer = !moe.enabled() || moe.first_dense_layers > 0;
  if (m.ffn < 0 || (m.ffn == 0 && has_dense_layer)) {
    return Invalid("ffn", m.ffn, "must be positive; give the dense MLP's intermediate size");
  }

  const double total = CountAs<double>(m).total;
  if (total > kMaxParameters) {
    return InvalidInput(fmt::format("the model would have {:.3g} parameters, more than {:g}; check its sizes", total,
                                    kMaxParameters));
  }
  return {};
}

Result<ModelSpec> LoadModel(const std::string& name_or_path) {
  const std::vector<std::string> presets = ModelPresetNames();
  for (const std::string& p : presets) {
    if (p == name_or_path) return ModelPreset(p);
  }
  // A Hugging Face checkpoint directory holds its config.json; accept the directory itself.
  std::string path = name_or_path;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) path = (std::filesystem::path(path) / "config.json").string();
  Result<ModelSpec> model = ReadHuggingFaceConfig(path);
  if (model.ok() || model.error().kind != ErrorKind::kIo) return model;

  const std::string list = fmt::format("{}", fmt::join(presets, ", "));
  return InvalidInput(fmt::format(
      "'{}' is neither a built-in model preset nor a readable Hugging Face config.json ({}); give a preset name or "
      "the path of a config.json; presets: {}{}",
      name_or_path, model.error().message, list, DidYouMean(name_or_path, presets)));
}

}  // namespace bmpipe
