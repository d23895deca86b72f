#include "bmpipe/model/model.h"

#include <algorithm>
#include <filesystem>
#include <initializer_list>
#include <string_view>
#include <system_error>

#include <fmt/format.h>

#include "bmpipe/core/json_cursor.h"

namespace bmpipe {

namespace {

// Models larger than this are surely a typo; the bound also keeps every int64 sum in
// CountParameters far from overflow once ValidateModel has passed.
constexpr double kMaxParameters = 1e15;

template <typename T>
struct Counts {
  T embedding = 0;
  T dense_layer = 0;
  T moe_layer = 0;
  T mtp_layer = 0;
  T head = 0;
  T total = 0;
};

// Layer i is MoE by first_dense_layers and layer_step, before the dense_layers list.
bool MoeByStep(const MoeShape& moe, int i) {
  return i >= moe.first_dense_layers && (i + 1) % std::max(1, moe.layer_step) == 0;
}

// The MoE layers among 0..layers-1, without looping over the layers (which ValidateModel has not
// bounded yet when it counts).
std::int64_t MoeLayerCount(const ModelSpec& m) {
  if (!m.moe.enabled() || m.layers <= 0) return 0;
  const std::int64_t step = std::max(1, m.moe.layer_step);
  const std::int64_t first = std::clamp(m.moe.first_dense_layers, 0, m.layers);
  // i + 1 runs over first + 1 .. layers; the multiples of step among them.
  std::int64_t n = m.layers / step - first / step;
  for (std::size_t k = 0; k < m.moe.dense_layers.size(); ++k) {
    const int d = m.moe.dense_layers[k];
    const bool repeated = k > 0 && m.moe.dense_layers[k - 1] == d;
    if (!repeated && d >= 0 && d < m.layers && MoeByStep(m.moe, d)) --n;
  }
  return n;
}

// One counting routine for two number types: int64 for exact counts, and double so that
// ValidateModel can bound the size before any int64 product could overflow.
template <typename T>
struct Counter {
  const ModelSpec& m;
  static T n(int x) { return static_cast<T>(x); }
  // LayerNorm has a bias as well as a scale; RMSNorm only a scale.
  T norm(T width) const { return m.norm == NormKind::kLayerNorm ? 2 * width : width; }
  T mlp(T f) const {
    const T h = n(m.hidden);
    if (!IsGatedMlp(m.mlp)) return 2 * h * f + (m.linear_bias ? f + h : 0);
    return 3 * h * f + (m.linear_bias ? 2 * f + h : 0);
  }
  T attention() const {
    const T h = n(m.hidden), a = n(m.heads), kv = n(m.kv_heads), dh = n(m.head_dim), v_dh = n(m.v_head_dim);
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
      if (m.sparse.enabled()) {
        // The indexer: queries from the query latent (or the hidden state), one key head with its
        // LayerNorm, and a weight per index head.
        const T ih = n(m.sparse.index_heads), id = n(m.sparse.index_head_dim);
        attention += (q_rank > 0 ? q_rank : h) * ih * id + h * id + 2 * id + h * ih;
      }
    } else {
      // A gated output doubles the query projection (queries and their gate).
      attention += h * a * dh * (m.attention_output_gate ? 2 : 1) + h * kv * dh + h * kv * v_dh + a * v_dh * h;
      if (m.qkv_bias) attention += a * dh + kv * dh + kv * v_dh;
      if (m.qk_norm) attention += 2 * norm(dh);  // one norm over head_dim for queries, one for keys
    }
    if (m.linear_bias) attention += h;  // output projection bias
    return attention;
  }
  // Mamba-2: the input projection to z, x, B, C and dt; the convolution over x, B and C (weights and
  // biases); A, D and dt's bias per head; the gated norm over the inner width; the output projection.
  T mamba() const {
    const MambaShape& s = m.mamba;
    const T h = n(m.hidden), inner = n(s.heads) * n(s.head_dim), bc = 2 * n(s.groups) * n(s.state);
    const T conv = inner + bc;
    return h * (2 * inner + bc + n(s.heads)) + conv * (n(s.conv_kernel) + 1) + 3 * n(s.heads) + inner + inner * h;
  }
  // Gated DeltaNet: the projections to q, k, v and the output gate z, and to beta and the decay
  // per value head; the convolution over q, k and v (no bias); A and dt's bias per value head; the
  // gated norm over one value head's width (shared by the heads); the output projection.
  T deltanet() const {
    const DeltaNetShape& s = m.deltanet;
    const T h = n(m.hidden), qk = n(s.key_heads) * n(s.key_head_dim), v = n(s.value_heads) * n(s.value_head_dim);
    return h * (2 * qk + 2 * v) + h * 2 * n(s.value_heads) + (2 * qk + v) * n(s.conv_kernel) +
           2 * n(s.value_heads) + n(s.value_head_dim) + v * h;
  }
  T routed() const { return n(m.moe.experts) * mlp(n(m.moe.ffn)); }
  T Layer(const DecoderKind& k) const {
    const T h = n(m.hidden);
    T p = 0;
    switch (k.mixer) {
      case Mixer::kAttention: p += attention(); break;
      case Mixer::kMamba2: p += mamba(); break;
      case Mixer::kGatedDeltaNet: p += deltanet(); break;
      case Mixer::kNone: break;
    }
    // A pre-norm before each part, and with post_norms a norm of each part's output.
    const T norms = (m.post_norms ? 2 : 1) * norm(h);
    if (k.mixer != Mixer::kNone) p += norms;
    if (k.ffn != Ffn::kNone) p += norms;
    if (k.ffn == Ffn::kDense) p += mlp(n(m.ffn));
    // The router, the routed experts and the shared experts.
    if (k.ffn == Ffn::kMoe) p += h * n(m.moe.experts) + routed() + n(m.moe.shared_experts) * mlp(n(m.moe.ffn));
    return p;
  }
};

template <typename T>
Counts<T> CountAs(const ModelSpec& m) {
  const Counter<T> counter{m};
  auto n = [](int x) { return static_cast<T>(x); };
  const T h = n(m.hidden);
  Counts<T> c;
  c.embedding = n(m.vocab) * h + n(m.learned_positions) * h;
  c.dense_layer = counter.Layer({Mixer::kAttention, Ffn::kDense, false});
  const std::int64_t moe_layers = MoeLayerCount(m);
  if (m.moe.enabled()) c.moe_layer = counter.Layer({Mixer::kAttention, Ffn::kMoe, false});
  if (m.mtp_layers > 0) {
    // Norms of the hidden state and of the embedding, their 2h -> h projection, the decoder layer
    // and the norm before the shared LM head.
    c.mtp_layer = 3 * counter.norm(h) + 2 * h * h + (m.moe.enabled() ? c.moe_layer : c.dense_layer);
  }
  c.head = counter.norm(h) + (m.tied_embeddings ? 0 : n(m.vocab) * h);
  T layers = 0;
  if (m.mixers.empty() && m.mixer_only.empty()) {
    layers = static_cast<T>(m.layers - moe_layers) * c.dense_layer + static_cast<T>(moe_layers) * c.moe_layer;
  } else {
    // A hybrid stack lists every layer (ValidateModel has checked its length before counting).
    for (int i = 0; i < m.layers; ++i) layers += counter.Layer(DecoderKindOf(m, i));
  }
  c.total = c.embedding + layers + n(m.mtp_layers) * c.mtp_layer + c.head;
  return c;
}

Status Invalid(std::string_view field, std::int64_t value, std::string_view problem) {
  return InvalidInput(fmt::format("{} = {}: {}", field, value, problem));
}

}  // namespace

bool IsMoeLayer(const ModelSpec& model, int i) {
  if (!model.moe.enabled() || i < 0 || i >= model.layers || !MoeByStep(model.moe, i)) return false;
  return !std::binary_search(model.moe.dense_layers.begin(), model.moe.dense_layers.end(), i);
}

bool IsWindowedLayer(const ModelSpec& model, int i) {
  return model.sliding_window > 0 && i >= 0 && static_cast<std::size_t>(i) < model.windowed_layers.size() &&
         model.windowed_layers[i];
}

Mixer MixerOf(const ModelSpec& model, int i) {
  if (i < 0 || static_cast<std::size_t>(i) >= model.mixers.size()) return Mixer::kAttention;
  return model.mixers[i];
}

bool HasMlp(const ModelSpec& model, int i) {
  return i < 0 || static_cast<std::size_t>(i) >= model.mixer_only.size() || !model.mixer_only[i];
}

const char* MixerName(Mixer mixer) {
  switch (mixer) {
    case Mixer::kAttention: return "attention";
    case Mixer::kMamba2: return "mamba2";
    case Mixer::kGatedDeltaNet: return "gated_deltanet";
    case Mixer::kNone: return "none";
  }
  return "attention";
}

DecoderKind DecoderKindOf(const ModelSpec& model, int i) {
  DecoderKind k;
  k.mixer = MixerOf(model, i);
  k.windowed = k.mixer == Mixer::kAttention && IsWindowedLayer(model, i);
  k.ffn = !HasMlp(model, i) ? Ffn::kNone : IsMoeLayer(model, i) ? Ffn::kMoe : Ffn::kDense;
  return k;
}

std::string DecoderKindName(const DecoderKind& kind) {
  const char* ffn = kind.ffn == Ffn::kMoe ? "moe" : kind.ffn == Ffn::kDense ? "mlp" : "";
  const char* local = kind.windowed ? "-local" : "";
  switch (kind.mixer) {
    case Mixer::kAttention:
      if (kind.ffn == Ffn::kNone) return std::string("attention") + local;
      return std::string(kind.ffn == Ffn::kMoe ? "decoder-moe" : "decoder") + local;
    case Mixer::kMamba2: return kind.ffn == Ffn::kNone ? "mamba" : std::string("mamba-") + ffn;
    case Mixer::kGatedDeltaNet: return kind.ffn == Ffn::kNone ? "deltanet" : std::string("deltanet-") + ffn;
    case Mixer::kNone: return ffn;
  }
  return "decoder";
}

std::int64_t DecoderLayerParameters(const ModelSpec& model, const DecoderKind& kind) {
  return Counter<std::int64_t>{model}.Layer(kind);
}

std::int64_t RoutedExpertParameters(const ModelSpec& model) {
  // The weight matrices; biases count with the layer's other parameters.
  const std::int64_t matrices = IsGatedMlp(model.mlp) ? 3 : 2;
  return static_cast<std::int64_t>(model.moe.experts) * matrices * model.hidden * model.moe.ffn;
}

std::vector<bool> WindowedLayers(int layers, int global_every) {
  std::vector<bool> windowed(static_cast<std::size_t>(std::max(0, layers)), true);
  if (global_every > 0) {
    for (int i = global_every - 1; i < layers; i += global_every) windowed[i] = false;
  }
  return windowed;
}

ParameterCounts CountParameters(const ModelSpec& model) {
  const Counts<std::int64_t> c = CountAs<std::int64_t>(model);
  ParameterCounts out;
  out.embedding = c.embedding;
  out.dense_layer = c.dense_layer;
  out.moe_layer = c.moe_layer;
  out.mtp_layer = c.mtp_layer;
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
    if (m.qkv_bias || m.qk_norm || m.attention_output_gate) {
      return InvalidInput(
          "qkv_bias, qk_norm and attention_output_gate are not modeled with latent attention; set them to false");
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
    if (moe.layer_step < 1) {
      return Invalid("moe.layer_step", moe.layer_step, "must be positive; 1 makes every layer MoE, 2 every other");
    }
    for (std::size_t k = 0; k < moe.dense_layers.size(); ++k) {
      const int d = moe.dense_layers[k];
      if (d < 0 || d >= m.layers || (k > 0 && d <= moe.dense_layers[k - 1])) {
        return Invalid(fmt::format("moe.dense_layers[{}]", k), d,
                       fmt::format("give distinct layer indices between 0 and layers - 1 = {}, ascending",
                                   m.layers - 1));
      }
    }
    if (MoeLayerCount(m) == 0) {
      return InvalidInput(fmt::format(
          "moe.experts = {} but no layer is MoE (moe.first_dense_layers = {}, moe.layer_step = {}, {} dense "
          "layers listed); set the MoE fields to 0 for a dense model",
          moe.experts, moe.first_dense_layers, moe.layer_step, moe.dense_layers.size()));
    }
  } else if (moe.experts < 0 || moe.top_k != 0 || moe.ffn != 0 || moe.shared_experts != 0 ||
             moe.first_dense_layers != 0 || moe.layer_step != 1 || !moe.dense_layers.empty()) {
    return Invalid("moe.experts", moe.experts,
                   "the other MoE fields are set but experts is not positive; give experts > 0 for a MoE model, or "
                   "set every MoE field to 0");
  }
  // A hybrid stack: one entry per layer, the shapes of the mixers it uses, no empty layer.
  if (!m.mixers.empty() && m.mixers.size() != static_cast<std::size_t>(m.layers)) {
    return InvalidInput(fmt::format("mixers has {} entries for layers = {}; give one per decoder layer, or none for "
                                    "attention everywhere",
                                    m.mixers.size(), m.layers));
  }
  if (!m.mixer_only.empty() && m.mixer_only.size() != static_cast<std::size_t>(m.layers)) {
    return InvalidInput(fmt::format("mixer_only has {} entries for layers = {}; give one per decoder layer, or none "
                                    "when every layer has an MLP",
                                    m.mixer_only.size(), m.layers));
  }
  bool uses_mamba = false, uses_deltanet = false, has_dense_layer = false;
  if (m.mixers.empty() && m.mixer_only.empty()) {
    // A model whose layers are all MoE never uses the dense MLP, so only then may ffn be 0.
    has_dense_layer = MoeLayerCount(m) < m.layers;
  } else {
    for (int i = 0; i < m.layers; ++i) {
      const Mixer mixer = MixerOf(m, i);
      uses_mamba = uses_mamba || mixer == Mixer::kMamba2;
      uses_deltanet = uses_deltanet || mixer == Mixer::kGatedDeltaNet;
      if (mixer == Mixer::kNone && !HasMlp(m, i)) {
        return InvalidInput(fmt::format("decoder layer {} has neither a mixer nor an MLP; give it one of them", i));
      }
      has_dense_layer = has_dense_layer || (HasMlp(m, i) && !IsMoeLayer(m, i));
    }
  }
  // A mixer's sizes: all positive when a layer uses it, else all zero.
  auto mixer_shape = [](bool used, std::initializer_list<int> widths, std::string_view field, int value,
                        std::string_view what, std::string_view names) -> Status {
    const bool positive = std::all_of(widths.begin(), widths.end(), [](int v) { return v > 0; });
    const bool zero = std::all_of(widths.begin(), widths.end(), [](int v) { return v == 0; });
    if (used ? positive : zero) return {};
    return Invalid(field, value,
                   used ? fmt::format("{} layers need every field positive ({})", what, names)
                        : fmt::format("the fields of {} layers ({}) are set but no layer is one; set them to 0", what,
                                      names));
  };
  const MambaShape& mamba = m.mamba;
  const DeltaNetShape& dn = m.deltanet;
  for (Status st : {mixer_shape(uses_mamba,
                                {mamba.heads, mamba.head_dim, mamba.state, mamba.groups, mamba.conv_kernel, mamba.chunk},
                                "mamba.heads", mamba.heads, "Mamba-2",
                                "mamba.heads, head_dim, state, groups, conv_kernel, chunk"),
                    mixer_shape(uses_deltanet,
                                {dn.key_heads, dn.value_heads, dn.key_head_dim, dn.value_head_dim, dn.conv_kernel, dn.chunk},
                                "deltanet.value_heads", dn.value_heads, "Gated DeltaNet",
                                "deltanet.key_heads, value_heads, key_head_dim, value_head_dim, conv_kernel, chunk")}) {
    if (!st.ok()) return st;
  }
  if (uses_mamba && mamba.heads % mamba.groups != 0) {
    return Invalid("mamba.groups", mamba.groups, fmt::format("must divide mamba.heads = {}", mamba.heads));
  }
  if (uses_deltanet && dn.value_heads % dn.key_heads != 0) {
    return Invalid("deltanet.key_heads", dn.key_heads,
                   fmt::format("must divide deltanet.value_heads = {} (value heads share query/key heads)",
                               dn.value_heads));
  }
  if (m.ffn < 0 || (m.ffn == 0 && has_dense_layer)) {
    return Invalid("ffn", m.ffn, "must be positive; give the dense MLP's intermediate size");
  }

  if (m.sliding_window < 0) {
    return Invalid("sliding_window", m.sliding_window, "cannot be negative; use 0 for full attention everywhere");
  }
  if (m.sliding_window == 0 && !m.windowed_layers.empty()) {
    return InvalidInput(fmt::format("windowed_layers has {} entries but sliding_window is 0; give the window in "
                                    "tokens, or leave windowed_layers empty",
                                    m.windowed_layers.size()));
  }
  if (m.sliding_window > 0 && m.windowed_layers.size() != static_cast<std::size_t>(m.layers)) {
    return InvalidInput(fmt::format("windowed_layers has {} entries for layers = {}; give one per decoder layer",
                                    m.windowed_layers.size(), m.layers));
  }
  const SparseAttention& sparse = m.sparse;
  if (sparse.enabled()) {
    if (!m.latent.enabled()) {
      return Invalid("sparse.topk", sparse.topk,
                     "DeepSeek sparse attention selects keys for latent attention; give the latent-attention fields "
                     "too, or set every sparse field to 0");
    }
    if (sparse.index_heads < 1 || sparse.index_head_dim < 1) {
      return Invalid("sparse.index_heads", sparse.index_heads,
                     fmt::format("and sparse.index_head_dim = {} must be positive; give the indexer's heads and "
                                 "their width",
                                 sparse.index_head_dim));
    }
  } else if (sparse.topk < 0 || sparse.index_heads != 0 || sparse.index_head_dim != 0) {
    return Invalid("sparse.topk", sparse.topk,
                   "the other sparse-attention fields are set but topk is not positive; give topk > 0 for DeepSeek "
                   "sparse attention, or set every sparse field to 0");
  }
  if (m.mtp_layers < 0) {
    return Invalid("mtp_layers", m.mtp_layers, "cannot be negative; use 0 without multi-token prediction");
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
