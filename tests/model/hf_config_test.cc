#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bmpipe/core/document.h"
#include "bmpipe/model/model.h"
#include "test_support.h"

namespace bmpipe {
namespace {

// The fixtures under tests/data/hf/ are the public config.json files of these checkpoints,
// irrelevant keys included, except where a comment in a test says otherwise.
std::string Fixture(const std::string& name) { return testing::SourcePath("tests/data/hf/" + name + ".json"); }

ModelSpec Read(const std::string& path) {
  Result<ModelSpec> r = ReadHuggingFaceConfig(path);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? r.value() : ModelSpec{};
}

std::string ErrorOf(const std::string& path) {
  Result<ModelSpec> r = ReadHuggingFaceConfig(path);
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.error().message;
}

double RelativeError(std::int64_t count, double reference) {
  return std::abs(static_cast<double>(count) - reference) / reference;
}

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A fixture with some keys changed, written to a temporary config.json that lives as long as
// this object.
class EditedConfig {
 public:
  EditedConfig(const std::string& fixture, const Json& changes) : dir_(testing::MakeTempDir()) {
    Json doc = Json::parse(testing::ReadFile(Fixture(fixture)));
    for (const auto& item : changes.items()) {
      if (item.value().is_string() && item.value().get<std::string>() == "<delete>") {
        doc.erase(item.key());
      } else {
        doc[item.key()] = item.value();
      }
    }
    std::ofstream(path()) << doc.dump(2);
  }
  ~EditedConfig() { std::filesystem::remove_all(dir_); }
  EditedConfig(const EditedConfig&) = delete;
  EditedConfig& operator=(const EditedConfig&) = delete;

  std::string path() const { return dir_ + "/config.json"; }

 private:
  std::string dir_;
};

ModelSpec ReadEdited(const std::string& fixture, const Json& changes) {
  EditedConfig config(fixture, changes);
  return Read(config.path());
}

std::string ErrorOfEdited(const std::string& fixture, const Json& changes) {
  EditedConfig config(fixture, changes);
  return ErrorOf(config.path());
}

TEST(HfConfig, Llama3_8bMatchesThePreset) {
  const std::string path = Fixture("llama3-8b");
  ModelSpec m = Read(path);
  Result<ModelSpec> preset = ModelPreset("llama3-8b");
  ASSERT_TRUE(preset.ok());
  const ModelSpec& p = preset.value();
  EXPECT_EQ(m.name, path);
  EXPECT_EQ(m.family, "llama");
  EXPECT_EQ(m.layers, p.layers);
  EXPECT_EQ(m.hidden, p.hidden);
  EXPECT_EQ(m.ffn, p.ffn);
  EXPECT_EQ(m.vocab, p.vocab);
  EXPECT_EQ(m.heads, p.heads);
  EXPECT_EQ(m.kv_heads, p.kv_heads);
  EXPECT_EQ(m.head_dim, p.head_dim);
  EXPECT_EQ(m.v_head_dim, p.v_head_dim);
  EXPECT_EQ(m.mlp, p.mlp);
  EXPECT_EQ(m.norm, p.norm);
  EXPECT_EQ(m.tied_embeddings, p.tied_embeddings);
  EXPECT_EQ(m.qkv_bias, p.qkv_bias);
  EXPECT_EQ(m.linear_bias, p.linear_bias);
  EXPECT_EQ(m.dropout, p.dropout);
  EXPECT_TRUE(m.not_modeled.empty());
  ParameterCounts a = CountParameters(m);
  ParameterCounts b = CountParameters(p);
  EXPECT_EQ(a.embedding, b.embedding);
  EXPECT_EQ(a.dense_layer, b.dense_layer);
  EXPECT_EQ(a.head, b.head);
  EXPECT_EQ(a.total, 8'030'261'248);
}

TEST(HfConfig, Mistral7bWindowsEveryLayer) {
  ModelSpec m = Read(Fixture("mistral-7b"));
  EXPECT_EQ(m.family, "mistral");
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(CountParameters(m).total, 7'241'732'096);
  EXPECT_TRUE(m.not_modeled.empty());
  EXPECT_EQ(m.sliding_window, 4096);
  ASSERT_EQ(m.windowed_layers.size(), 32u);
  for (int i = 0; i < 32; ++i) EXPECT_TRUE(IsWindowedLayer(m, i)) << i;

  // head_dim null means hidden / heads; a null window means full attention.
  m = ReadEdited("mistral-7b", {{"head_dim", nullptr}, {"sliding_window", nullptr}});
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.sliding_window, 0);
  EXPECT_TRUE(m.windowed_layers.empty());
}

TEST(HfConfig, Qwen2_7bHasQkvBiasOnly) {
  ModelSpec m = Read(Fixture("qwen2-7b"));
  EXPECT_EQ(m.family, "qwen2");
  EXPECT_EQ(m.kv_heads, 4);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_TRUE(m.qkv_bias);
  EXPECT_FALSE(m.linear_bias);
  EXPECT_FALSE(m.qk_norm);
  EXPECT_TRUE(m.not_modeled.empty());  // sliding_window is given but use_sliding_window is false
  const std::int64_t total = CountParameters(m).total;
  EXPECT_EQ(total, 7'615'616'512);
  EXPECT_LT(RelativeError(total, 7.62e9), 0.005);  // the model card's 7.62B

  EXPECT_EQ(m.sliding_window, 0);

  // use_sliding_window windows the layers from max_window_layers on: here 28 of 28, so none.
  m = ReadEdited("qwen2-7b", {{"use_sliding_window", true}});
  EXPECT_EQ(m.sliding_window, 0);
  m = ReadEdited("qwen2-7b", {{"use_sliding_window", true}, {"max_window_layers", 20}, {"sliding_window", 4096}});
  EXPECT_EQ(m.sliding_window, 4096);
  EXPECT_FALSE(IsWindowedLayer(m, 19));
  EXPECT_TRUE(IsWindowedLayer(m, 20));
  EXPECT_TRUE(IsWindowedLayer(m, 27));
  EXPECT_TRUE(m.not_modeled.empty());
}

TEST(HfConfig, Qwen3_8bHasQkNorm) {
  ModelSpec m = Read(Fixture("qwen3-8b"));
  EXPECT_EQ(m.family, "qwen3");
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_TRUE(m.qk_norm);
  EXPECT_FALSE(m.qkv_bias);
  EXPECT_FALSE(m.linear_bias);
  const std::int64_t total = CountParameters(m).total;
  EXPECT_EQ(total, 8'190'735'360);
  EXPECT_LT(RelativeError(total, 8.2e9), 0.005);  // the model card's 8.2B
}

TEST(HfConfig, Qwen3HeadDimIsNotHiddenOverHeads) {
  // Qwen3-0.6B: 16 heads of width 128 in a model of width 1024, tied embeddings.
  ModelSpec m = Read(Fixture("qwen3-0.6b"));
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_TRUE(m.tied_embeddings);
  ParameterCounts c = CountParameters(m);
  EXPECT_EQ(c.total, 596'049'920);
  EXPECT_LT(RelativeError(c.total - c.embedding, 0.44e9), 0.005);  // the card's 0.44B non-embedding

  EXPECT_TRUE(Contains(ErrorOfEdited("qwen3-0.6b", {{"head_dim", "<delete>"}}), "missing required key 'head_dim'"));
}

TEST(HfConfig, MixtralMatchesThePreset) {
  ModelSpec m = Read(Fixture("mixtral-8x7b"));
  EXPECT_EQ(m.family, "mixtral");
  EXPECT_EQ(m.moe.experts, 8);
  EXPECT_EQ(m.moe.top_k, 2);
  EXPECT_EQ(m.moe.ffn, 14336);
  EXPECT_EQ(m.moe.shared_experts, 0);
  EXPECT_EQ(m.moe.first_dense_layers, 0);
  EXPECT_TRUE(m.not_modeled.empty());  // expert parallelism is modeled; sliding_window is null
  EXPECT_EQ(m.sliding_window, 0);
  Result<ModelSpec> preset = ModelPreset("mixtral-8x7b");
  ASSERT_TRUE(preset.ok());
  EXPECT_EQ(CountParameters(m).moe_layer, CountParameters(preset.value()).moe_layer);
  EXPECT_EQ(CountParameters(m).total, CountParameters(preset.value()).total);
  EXPECT_LT(RelativeError(CountParameters(m).total, 46.70e9), 0.005);

  EXPECT_TRUE(Contains(ErrorOfEdited("mixtral-8x7b", {{"num_experts_per_tok", 9}}),
                       "num_experts_per_tok = 9: cannot exceed num_local_experts = 8"));
}

TEST(HfConfig, Gpt2) {
  ModelSpec m = Read(Fixture("gpt2"));
  EXPECT_EQ(m.family, "gpt2");
  EXPECT_EQ(m.layers, 12);
  EXPECT_EQ(m.hidden, 768);
  EXPECT_EQ(m.heads, 12);
  EXPECT_EQ(m.kv_heads, 12);
  EXPECT_EQ(m.head_dim, 64);
  EXPECT_EQ(m.ffn, 3072);  // n_inner absent: 4 * n_embd
  EXPECT_EQ(m.learned_positions, 1024);
  EXPECT_EQ(m.mlp, MlpKind::kGelu);
  EXPECT_EQ(m.norm, NormKind::kLayerNorm);
  EXPECT_TRUE(m.tied_embeddings && m.qkv_bias && m.linear_bias && m.dropout);
  EXPECT_EQ(CountParameters(m).total, 124'439'808);

  m = ReadEdited("gpt2", {{"n_inner", 1000}, {"resid_pdrop", 0.0}, {"attn_pdrop", 0.0}, {"embd_pdrop", 0}});
  EXPECT_EQ(m.ffn, 1000);
  EXPECT_FALSE(m.dropout);
  // Transformers' default for each dropout probability is 0.1.
  EXPECT_TRUE(ReadEdited("gpt2", {{"resid_pdrop", 0.0}, {"attn_pdrop", 0.0}, {"embd_pdrop", "<delete>"}}).dropout);
  EXPECT_TRUE(Contains(ErrorOfEdited("gpt2", {{"resid_pdrop", 1.5}}), "resid_pdrop = 1.5"));
}

TEST(HfConfig, GptNeox20b) {
  ModelSpec m = Read(Fixture("gpt-neox-20b"));
  EXPECT_EQ(m.family, "gpt_neox");
  EXPECT_EQ(m.head_dim, 96);
  EXPECT_EQ(m.learned_positions, 0);  // rotary
  EXPECT_FALSE(m.tied_embeddings);
  EXPECT_FALSE(m.dropout);
  EXPECT_TRUE(m.qkv_bias && m.linear_bias);
  const std::int64_t total = CountParameters(m).total;
  EXPECT_EQ(total, 20'554'567'680);
  EXPECT_LT(RelativeError(total, 20.55e9), 0.01);
  EXPECT_TRUE(ReadEdited("gpt-neox-20b", {{"hidden_dropout", 0.1}}).dropout);
}

// The fixture is DeepSeek-V3's public config.json without its FP8 quantization_config (which would
// only add a note; see QuantizedCheckpointIsCostedAs16BitTraining).
//
// Main model, counted by hand: embedding and LM head 129280 x 7168 = 926,679,040 each; latent
// attention 187,107,328 per layer (q 48,760,320, kv 20,906,496, o 117,440,512) plus two norms of
// 7168; dense MLP 3 x 7168 x 18432 = 396,361,728; MoE MLP router 7168 x 256 plus 257 experts of
// 3 x 7168 x 2048 = 11,320,164,352. Total: 2 x 926,679,040 + 7168 (final norm) + 3 dense layers x
// 583,483,392 + 58 MoE layers x 11,507,286,016 = 671,026,404,352, DeepSeek's published 671B.
//
// The multi-token-prediction module: norms of 7168 for the hidden state, the embedding and the
// head, the projection 2 x 7168 x 7168 = 102,760,448 and a MoE layer: 11,610,067,968. The Hugging
// Face checkpoint stores its own copies of the embedding and the LM head as well (the model card's
// "14B of MTP module weights", 685B in all); in training they are the model's, counted once.
TEST(HfConfig, DeepSeekV3) {
  ModelSpec m = Read(Fixture("deepseek-v3"));
  EXPECT_EQ(m.family, "deepseek_v3");
  EXPECT_EQ(m.head_dim, 192);
  EXPECT_EQ(m.v_head_dim, 128);
  EXPECT_EQ(m.latent.q_lora_rank, 1536);
  EXPECT_EQ(m.latent.kv_lora_rank, 512);
  EXPECT_EQ(m.moe.experts, 256);
  EXPECT_EQ(m.moe.shared_experts, 1);
  EXPECT_EQ(m.moe.top_k, 8);
  EXPECT_EQ(m.moe.ffn, 2048);
  EXPECT_EQ(m.moe.first_dense_layers, 3);
  EXPECT_FALSE(IsMoeLayer(m, 2));
  EXPECT_TRUE(IsMoeLayer(m, 3));
  EXPECT_EQ(m.mtp_layers, 1);
  ParameterCounts c = CountParameters(m);
  EXPECT_EQ(c.dense_layer, 583'483'392);
  EXPECT_EQ(c.moe_layer, 11'507'286'016);
  EXPECT_EQ(c.mtp_layer, 11'610'067'968);
  EXPECT_EQ(c.mtp_layer, c.moe_layer + 3 * 7168 + 2 * 7168LL * 7168);
  EXPECT_EQ(c.total, 671'026'404'352 + 11'610'067'968);
  EXPECT_LT(RelativeError(c.total - c.mtp_layer, 671e9), 0.001);
  // With the checkpoint's copies of the embedding and the head: 684.49B, the card's 685B.
  EXPECT_LT(RelativeError(c.total + 2 * 926'679'040LL, 685e9), 0.001);
  EXPECT_TRUE(m.not_modeled.empty());

  // Without a query down-projection, queries are projected directly from the hidden state.
  m = ReadEdited("deepseek-v3", {{"q_lora_rank", nullptr}, {"num_nextn_predict_layers", 0}});
  EXPECT_EQ(m.latent.q_lora_rank, 0);
  EXPECT_EQ(m.mtp_layers, 0);
  EXPECT_EQ(CountParameters(m).mtp_layer, 0);
  EXPECT_EQ(CountParameters(m).dense_layer - c.dense_layer, 7168LL * 128 * 192 - 48'760'320);

  EXPECT_TRUE(Contains(ErrorOfEdited("deepseek-v3", {{"first_k_dense_replace", 62}}),
                       "first_k_dense_replace = 62: must be between 0 and 61"));
}

// Qwen3-235B-A22B: 94 MoE layers of width 4096, 64 query and 4 key-value heads of width 128 with
// q/k norms, 128 experts of 1536 (top-8), vocab 151936. Per layer: attention 4096 x 17408 =
// 71,303,168, q/k norms 256, norms 8192, router 524,288, experts 128 x 3 x 4096 x 1536 =
// 2,415,919,104; embedding and head 622,329,856 each.
TEST(HfConfig, Qwen3Moe235b) {
  ModelSpec m = Read(Fixture("qwen3-235b-a22b"));
  EXPECT_EQ(m.family, "qwen3_moe");
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_TRUE(m.qk_norm);
  EXPECT_EQ(m.moe.experts, 128);
  EXPECT_EQ(m.moe.top_k, 8);
  EXPECT_EQ(m.moe.ffn, 1536);
  EXPECT_EQ(m.moe.shared_experts, 0);
  for (int i = 0; i < m.layers; ++i) EXPECT_TRUE(IsMoeLayer(m, i)) << i;
  EXPECT_TRUE(m.not_modeled.empty());
  const ParameterCounts c = CountParameters(m);
  EXPECT_EQ(c.moe_layer, 2'487'755'008);
  EXPECT_EQ(c.total, 235'093'634'560);
  EXPECT_LT(RelativeError(c.total, 235e9), 0.001);  // the card's 235B
  Result<ModelSpec> preset = ModelPreset("qwen3-235b-a22b");
  ASSERT_TRUE(preset.ok());
  EXPECT_EQ(CountParameters(preset.value()).total, c.total);

  // Qwen3-30B-A3B, the card's 30.5B.
  const ModelSpec small = Read(Fixture("qwen3-30b-a3b"));
  EXPECT_EQ(CountParameters(small).total, 30'532'122'624);
  EXPECT_EQ(CountParameters(small).total, CountParameters(ModelPreset("qwen3-30b-a3b").value()).total);
  EXPECT_LT(RelativeError(CountParameters(small).total, 30.5e9), 0.002);
}

TEST(HfConfig, Qwen3MoeLayerPlacement) {
  // decoder_sparse_step 2: layers 1, 3, 5, ... are MoE; mlp_only_layers makes more dense.
  ModelSpec m = ReadEdited("qwen3-30b-a3b", {{"decoder_sparse_step", 2}, {"mlp_only_layers", {3, 0, 3}}});
  EXPECT_EQ(m.moe.layer_step, 2);
  EXPECT_EQ(m.moe.dense_layers, (std::vector<int>{0, 3}));
  EXPECT_FALSE(IsMoeLayer(m, 0));
  EXPECT_TRUE(IsMoeLayer(m, 1));
  EXPECT_FALSE(IsMoeLayer(m, 2));
  EXPECT_FALSE(IsMoeLayer(m, 3));
  EXPECT_TRUE(IsMoeLayer(m, 5));
  const ParameterCounts c = CountParameters(m);
  EXPECT_EQ(c.total, c.embedding + 25 * c.dense_layer + 23 * c.moe_layer + c.head);

  EXPECT_TRUE(Contains(ErrorOfEdited("qwen3-30b-a3b", {{"mlp_only_layers", {48}}}), "mlp_only_layers[0] = 48"));
  EXPECT_TRUE(Contains(ErrorOfEdited("qwen3-30b-a3b", {{"decoder_sparse_step", 100}}),
                       "decoder_sparse_step = 100: with mlp_only_layers no layer is MoE"));
  EXPECT_TRUE(Contains(ErrorOfEdited("qwen3-30b-a3b", {{"num_experts", "<delete>"}}),
                       "missing required key 'num_experts'"));
  EXPECT_TRUE(Contains(ErrorOfEdited("qwen3-30b-a3b", {{"num_experts_per_tok", 129}}),
                       "num_experts_per_tok = 129: cannot exceed num_experts = 128"));
}

// gpt-oss-120b: per layer attention 2880 x 9216 = 26,542,080 with biases 5120 + 2880, norms 5760,
// router 368,640, and 128 experts of 3 x 2880 x 2880 + 3 x 2880 biases = 24,891,840; embedding and
// head 579,133,440 each. The card's 116.83B also counts the router biases and the attention sinks
// (192 per layer), which bmpipe leaves out.
TEST(HfConfig, GptOss120b) {
  ModelSpec m = Read(Fixture("gpt-oss-120b"));
  EXPECT_EQ(m.family, "gpt_oss");
  EXPECT_EQ(m.head_dim, 64);
  EXPECT_EQ(m.kv_heads, 8);
  EXPECT_TRUE(m.qkv_bias && m.linear_bias);
  EXPECT_EQ(m.moe.experts, 128);
  EXPECT_EQ(m.moe.top_k, 4);
  EXPECT_EQ(m.moe.ffn, 2880);
  EXPECT_EQ(m.sliding_window, 128);
  EXPECT_TRUE(IsWindowedLayer(m, 0));
  EXPECT_FALSE(IsWindowedLayer(m, 1));
  EXPECT_TRUE(IsWindowedLayer(m, 34));
  EXPECT_FALSE(IsWindowedLayer(m, 35));
  const ParameterCounts c = CountParameters(m);
  EXPECT_EQ(c.moe_layer, 3'213'080'000);
  EXPECT_EQ(c.total, 116'829'149'760);
  EXPECT_LT(RelativeError(c.total, 116.83e9), 0.0001);
  EXPECT_EQ(c.total, CountParameters(ModelPreset("gpt-oss-120b").value()).total);
  ASSERT_EQ(m.not_modeled.size(), 2u);
  EXPECT_TRUE(Contains(m.not_modeled[0], "attention sinks")) << m.not_modeled[0];
  EXPECT_TRUE(Contains(m.not_modeled[1], "quantization_config (mxfp4)")) << m.not_modeled[1];

  // Either spelling of the routing width; both must agree.
  EXPECT_EQ(ReadEdited("gpt-oss-120b", {{"num_experts_per_tok", "<delete>"}}).moe.top_k, 4);
  EXPECT_EQ(ReadEdited("gpt-oss-120b", {{"experts_per_token", "<delete>"}}).moe.top_k, 4);
  EXPECT_TRUE(Contains(ErrorOfEdited("gpt-oss-120b", {{"num_experts_per_tok", 2}}),
                       "num_experts_per_tok = 2: differs from experts_per_token = 4"));
  EXPECT_TRUE(Contains(ErrorOfEdited("gpt-oss-120b", {{"num_experts_per_tok", "<delete>"}, {"experts_per_token", "<delete>"}}),
                       "missing required key 'num_experts_per_tok'"));
  // Without layer_types, Transformers' alternation; a layer type bmpipe cannot cost is an error.
  m = ReadEdited("gpt-oss-120b", {{"layer_types", "<delete>"}});
  EXPECT_TRUE(IsWindowedLayer(m, 0) && !IsWindowedLayer(m, 1));
  Json types = Json::array();
  for (int i = 0; i < 36; ++i) types.push_back(i == 3 ? "linear_attention" : "full_attention");
  EXPECT_TRUE(Contains(ErrorOfEdited("gpt-oss-120b", {{"layer_types", types}}),
                       "layer_types[3] = \"linear_attention\": bmpipe costs layers of type sliding_attention and "
                       "full_attention only"));
  EXPECT_TRUE(Contains(ErrorOfEdited("gpt-oss-120b", {{"layer_types", {"full_attention"}}}),
                       "layer_types: has 1 entries for num_hidden_layers = 36"));
  // Every layer full: no window at all.
  EXPECT_EQ(ReadEdited("gpt-oss-120b", {{"layer_types", Json(std::vector<std::string>(36, "full_attention"))}})
                .sliding_window,
            0);
  EXPECT_TRUE(Contains(ErrorOfEdited("gpt-oss-120b", {{"hidden_act", "gelu"}}), "hidden_act = \"gelu\""));
}

// Llama 4 Scout's language model: per layer attention 5120 x 12288 = 62,914,560, norms 10,240,
// router 81,920, 16 routed experts and one shared of 3 x 5120 x 8192 = 125,829,120 each;
// embedding and head 1,034,485,760 each. The card's 109B includes the vision encoder.
TEST(HfConfig, Llama4ScoutFromTextConfig) {
  ModelSpec m = Read(Fixture("llama4-scout"));
  EXPECT_EQ(m.family, "llama4");
  EXPECT_EQ(m.layers, 48);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.ffn, 16384);
  EXPECT_EQ(m.moe.ffn, 8192);
  EXPECT_EQ(m.moe.experts, 16);
  EXPECT_EQ(m.moe.top_k, 1);
  EXPECT_EQ(m.moe.shared_experts, 1);
  EXPECT_FALSE(m.tied_embeddings);
  for (int i = 0; i < m.layers; ++i) EXPECT_TRUE(IsMoeLayer(m, i)) << i;
  const ParameterCounts c = CountParameters(m);
  EXPECT_EQ(c.moe_layer, 2'202'101'760);
  EXPECT_EQ(c.total, 107'769'861'120);
  EXPECT_LT(RelativeError(c.total, 109e9), 0.015);
  EXPECT_EQ(c.total, CountParameters(ModelPreset("llama4-scout").value()).total);
  // Chunks of 8192 tokens on the layers with RoPE (no_rope_layers 1), the whole sequence on the
  // fourth.
  EXPECT_EQ(m.local_attention, LocalAttention::kChunked);
  EXPECT_EQ(m.sliding_window, 8192);
  for (int i = 0; i < m.layers; ++i) EXPECT_EQ(IsWindowedLayer(m, i), (i + 1) % 4 != 0) << i;
  const ModelSpec preset = ModelPreset("llama4-scout").value();
  EXPECT_EQ(preset.windowed_layers, m.windowed_layers);
  EXPECT_EQ(preset.local_attention, LocalAttention::kChunked);
  ASSERT_EQ(m.not_modeled.size(), 1u);
  EXPECT_TRUE(Contains(m.not_modeled[0], "vision encoder")) << m.not_modeled[0];
}

TEST(HfConfig, Llama4ChunkedLayers) {
  Json text = Json::parse(testing::ReadFile(Fixture("llama4-scout")))["text_config"];
  // Without no_rope_layers: every no_rope_layer_interval-th layer (default 4) is global.
  text.erase("no_rope_layers");
  text["no_rope_layer_interval"] = 2;
  ModelSpec m = ReadEdited("llama4-scout", {{"text_config", text}});
  EXPECT_TRUE(IsWindowedLayer(m, 0));
  EXPECT_FALSE(IsWindowedLayer(m, 1));
  // layer_types, as newer Transformers write it, decides.
  Json types = Json::array();
  for (int i = 0; i < 48; ++i) types.push_back(i == 5 ? "full_attention" : "chunked_attention");
  text["layer_types"] = types;
  m = ReadEdited("llama4-scout", {{"text_config", text}});
  EXPECT_FALSE(IsWindowedLayer(m, 5));
  EXPECT_TRUE(IsWindowedLayer(m, 1));
  types[0] = "sliding_attention";
  text["layer_types"] = types;
  EXPECT_TRUE(Contains(ErrorOfEdited("llama4-scout", {{"text_config", text}}),
                       "text_config.layer_types[0] = \"sliding_attention\": bmpipe costs layers of type "
                       "chunked_attention and full_attention only"));
  // A null chunk: every layer attends to the whole sequence.
  text.erase("layer_types");
  text["attention_chunk_size"] = nullptr;
  m = ReadEdited("llama4-scout", {{"text_config", text}});
  EXPECT_EQ(m.sliding_window, 0);
  for (int i = 0; i < m.layers; ++i) EXPECT_FALSE(IsWindowedLayer(m, i));
}

// DeepSeek-V3.2: V3 with the indexer and top-k sparse attention; Transformers' defaults for the
// indexer when the keys are missing.
TEST(HfConfig, DeepSeekV32) {
  ModelSpec m = ReadEdited("deepseek-v3", {{"model_type", "deepseek_v32"},
                                           {"index_n_heads", 64},
                                           {"index_head_dim", 128},
                                           {"index_topk", 2048}});
  EXPECT_EQ(m.family, "deepseek_v32");
  EXPECT_EQ(m.sparse.index_heads, 64);
  EXPECT_EQ(m.sparse.index_head_dim, 128);
  EXPECT_EQ(m.sparse.topk, 2048);
  const ModelSpec v3 = Read(Fixture("deepseek-v3"));
  // Per layer: index queries from the query latent 1536 x 64 x 128, one key 7168 x 128 with its
  // LayerNorm (256), weights 7168 x 64; 61 decoder layers and the MTP module's.
  const std::int64_t indexer = 1536LL * 64 * 128 + 7168LL * 128 + 256 + 7168LL * 64;
  EXPECT_EQ(indexer, 13'959'424);
  EXPECT_EQ(CountParameters(m).total - CountParameters(v3).total, 62 * indexer);
  EXPECT_EQ(CountParameters(m).total, CountParameters(ModelPreset("deepseek-v3.2").value()).total);
  EXPECT_EQ(ReadEdited("deepseek-v3", {{"model_type", "deepseek_v32"}}).sparse.topk, 2048);
  EXPECT_TRUE(Contains(ErrorOfEdited("deepseek-v3", {{"model_type", "deepseek_v32"}, {"index_topk", 0}}),
                       "index_topk = 0"));
}

// Keys that give a model a part of its architecture are errors under a model_type without it,
// instead of a model costed without the part.
TEST(HfConfig, ArchitectureKeysOfAnotherModelTypeAreErrors) {
  std::string message = ErrorOfEdited("deepseek-v3", {{"index_topk", 2048}});
  EXPECT_TRUE(Contains(message, "index_topk = 2048: gives the model DeepSeek sparse attention, which model_type "
                                "deepseek_v3 does not have: bmpipe would cost the model without it; give model_type "
                                "deepseek_v32"))
      << message;
  message = ErrorOfEdited("llama3-8b", {{"hybrid_override_pattern", "M-M*-"}});
  EXPECT_TRUE(Contains(message, "hybrid_override_pattern = \"M-M*-\": gives the model Mamba-2 layers (a hybrid stack), "
                                "which model_type llama does not have: bmpipe would cost the model without it; give "
                                "model_type nemotron_h"))
      << message;
  message = ErrorOfEdited("llama3-8b", {{"moe_latent_size", 1024}});
  EXPECT_TRUE(Contains(message, "moe_latent_size = 1024: gives the model experts in a latent width (Nemotron 3 Super's "
                                "latent MoE), which bmpipe does not cost yet (under any model_type)"))
      << message;
  message = ErrorOfEdited("llama3-8b", {{"num_local_experts", 8}});
  EXPECT_TRUE(Contains(message, "give model_type mixtral or gpt_oss or llama4 or llama4_text")) << message;
  // null, 0 and false give nothing.
  EXPECT_EQ(ReadEdited("llama3-8b", {{"num_local_experts", 0}, {"kv_lora_rank", nullptr}}).moe.experts, 0);
}

// Recipes' model types bmpipe cannot cost yet are named as such, with no near name to follow.
TEST(HfConfig, UnmodeledModelTypesSayWhatIsMissing) {
  for (const auto& [type, what] : std::vector<std::pair<std::string, std::string>>{
           {"deepseek_v4", "DeepSeek-V4"}, {"glm_moe_dsa", "GLM-5"}}) {
    const std::string message = ErrorOfEdited("llama3-8b", {{"model_type", type}});
    EXPECT_TRUE(Contains(message, "bmpipe does not cost")) << message;
    EXPECT_TRUE(Contains(message, what)) << message;
    EXPECT_FALSE(Contains(message, "did you mean")) << message;
  }
}

// StarCoder2's reading: a GELU MLP with grouped-query attention, LayerNorm, biases, a window on
// every layer; Megatron's default GPT with grouped-query attention reads the same way.
TEST(HfConfig, Starcoder2) {
  Json config = {{"model_type", "starcoder2"},   {"hidden_size", 6144},   {"intermediate_size", 24576},
                 {"num_hidden_layers", 40},      {"num_attention_heads", 48}, {"num_key_value_heads", 4},
                 {"vocab_size", 49152},          {"hidden_act", "gelu_pytorch_tanh"}, {"sliding_window", 4096},
                 {"residual_dropout", 0.1},      {"tie_word_embeddings", false}};
  Result<ModelSpec> r = ReadHuggingFaceConfig(config, "starcoder2");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const ModelSpec& m = r.value();
  EXPECT_EQ(m.mlp, MlpKind::kGelu);
  EXPECT_EQ(m.norm, NormKind::kLayerNorm);
  EXPECT_EQ(m.kv_heads, 4);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_TRUE(m.qkv_bias && m.linear_bias && m.dropout);
  EXPECT_EQ(m.sliding_window, 4096);
  for (int i = 0; i < m.layers; ++i) EXPECT_TRUE(IsWindowedLayer(m, i)) << i;
  // Per layer: attention 6144 x (6144 + 2 x 512) + 6144 x 6144 and biases 6144 + 2 x 512 + 6144,
  // MLP 2 x 6144 x 24576 and biases 24576 + 6144, two LayerNorms 4 x 6144.
  const std::int64_t layer = 6144LL * 7168 + 6144LL * 6144 + 13312 + 2 * 6144LL * 24576 + 30720 + 4 * 6144;
  EXPECT_EQ(CountParameters(m).dense_layer, layer);
  config["hidden_act"] = "silu";
  EXPECT_TRUE(Contains(ReadHuggingFaceConfig(config, "starcoder2").error().message,
                       "hidden_act = \"silu\": bmpipe models StarCoder2's MLP with a GELU activation"));
  config["hidden_act"] = "gelu";
  config.erase("num_key_value_heads");
  EXPECT_TRUE(Contains(ReadHuggingFaceConfig(config, "starcoder2").error().message,
                       "missing required key 'num_key_value_heads'"));
}

// GLM-4.5's shape (zai-org/GLM-4.5 config.json): 92 layers of 5120, 96 query heads and 8
// key-value heads of 128 with q/k/v biases and q/k norms, 3 dense layers of 12288, then 160 routed
// experts of 1536 (top-8) and a shared one, one MTP module: the card's 355 B.
TEST(HfConfig, Glm45) {
  const Json config = {{"model_type", "glm4_moe"},     {"hidden_size", 5120},        {"intermediate_size", 12288},
                       {"num_hidden_layers", 92},      {"num_attention_heads", 96},  {"num_key_value_heads", 8},
                       {"head_dim", 128},              {"vocab_size", 151552},       {"attention_bias", true},
                       {"use_qk_norm", true},          {"partial_rotary_factor", 0.5}, {"n_routed_experts", 160},
                       {"n_shared_experts", 1},        {"num_experts_per_tok", 8},   {"moe_intermediate_size", 1536},
                       {"first_k_dense_replace", 3},   {"num_nextn_predict_layers", 1}, {"tie_word_embeddings", false}};
  Result<ModelSpec> r = ReadHuggingFaceConfig(config, "glm-4.5");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const ModelSpec& m = r.value();
  EXPECT_EQ(m.family, "glm4_moe");
  EXPECT_TRUE(m.qkv_bias && m.qk_norm);
  EXPECT_FALSE(IsMoeLayer(m, 2));
  EXPECT_TRUE(IsMoeLayer(m, 3));
  EXPECT_EQ(m.mtp_layers, 1);
  EXPECT_LT(RelativeError(CountParameters(m).total, 355e9), 0.01) << CountParameters(m).total;
}

// GPT-NeoX has no grouped-query attention: a config that says otherwise is an error, not a
// model silently costed with one key-value head per query head.
TEST(HfConfig, GptNeoxKeyValueHeads) {
  EXPECT_EQ(ReadEdited("gpt-neox-20b", {{"num_key_value_heads", 64}}).kv_heads, 64);
  const std::string message = ErrorOfEdited("gpt-neox-20b", {{"num_key_value_heads", 8}});
  EXPECT_TRUE(Contains(message, "num_key_value_heads = 8: differs from num_attention_heads = 64, but GPT-NeoX has no "
                                "grouped-query attention"))
      << message;
  EXPECT_TRUE(Contains(message, "model_type starcoder2")) << message;
}

// A window key that a model type's Transformers class ignores is said, not silently dropped.
TEST(HfConfig, IgnoredWindowIsNoted) {
  const ModelSpec m = ReadEdited("llama3-8b", {{"sliding_window", 4096}});
  EXPECT_EQ(m.sliding_window, 0);
  ASSERT_EQ(m.not_modeled.size(), 1u);
  EXPECT_TRUE(Contains(m.not_modeled[0], "sliding_window = 4096 is not read: model_type llama attends to the whole "
                                         "sequence"))
      << m.not_modeled[0];
}

TEST(HfConfig, Llama4MaverickInterleavesDenseLayers) {
  // Maverick's shape: 128 experts on every other layer, dense layers of 16384.
  Json text = Json::parse(testing::ReadFile(Fixture("llama4-scout")))["text_config"];
  text["num_local_experts"] = 128;
  text["interleave_moe_layer_step"] = 2;
  text.erase("moe_layers");
  ModelSpec m = ReadEdited("llama4-scout", {{"text_config", text}});
  EXPECT_FALSE(IsMoeLayer(m, 0));
  EXPECT_TRUE(IsMoeLayer(m, 1));
  const ParameterCounts c = CountParameters(m);
  EXPECT_EQ(c.total, c.embedding + 24 * c.dense_layer + 24 * c.moe_layer + c.head);
  EXPECT_LT(RelativeError(c.total, 400e9), 0.01);  // the card's 400B (with the vision encoder)

  // moe_layers, when present, decides.
  text["moe_layers"] = {1, 3};
  m = ReadEdited("llama4-scout", {{"text_config", text}});
  EXPECT_TRUE(IsMoeLayer(m, 1) && IsMoeLayer(m, 3));
  EXPECT_FALSE(IsMoeLayer(m, 5));
  text["moe_layers"] = {48};
  EXPECT_TRUE(Contains(ErrorOfEdited("llama4-scout", {{"text_config", text}}), "text_config.moe_layers[0] = 48"));
  text["moe_layers"] = Json::array();
  EXPECT_TRUE(Contains(ErrorOfEdited("llama4-scout", {{"text_config", text}}), "no layer is MoE"));
  text.erase("moe_layers");
  text.erase("intermediate_size_mlp");
  EXPECT_TRUE(Contains(ErrorOfEdited("llama4-scout", {{"text_config", text}}),
                       "text_config: missing required key 'intermediate_size_mlp'"));
}

// Gemma 2 27B: 46 layers, per layer attention 4608 x 12288 = 56,623,104, four norms 18,432, GeGLU
// 3 x 4608 x 36864 = 509,607,936; tied embedding 1,179,648,000: 27,227,128,320 exactly as published.
TEST(HfConfig, Gemma2_27b) {
  ModelSpec m = Read(Fixture("gemma2-27b"));
  EXPECT_EQ(m.family, "gemma2");
  EXPECT_EQ(m.mlp, MlpKind::kGeGlu);
  EXPECT_TRUE(m.post_norms);
  EXPECT_FALSE(m.qk_norm);
  EXPECT_TRUE(m.tied_embeddings);
  EXPECT_EQ(m.head_dim, 128);  // not 4608 / 32
  EXPECT_EQ(m.sliding_window, 4096);
  EXPECT_TRUE(IsWindowedLayer(m, 0));
  EXPECT_FALSE(IsWindowedLayer(m, 1));
  EXPECT_EQ(CountParameters(m).dense_layer, 566'249'472);
  EXPECT_EQ(CountParameters(m).total, 27'227'128'320);
  ASSERT_EQ(m.not_modeled.size(), 1u);
  EXPECT_TRUE(Contains(m.not_modeled[0], "soft-capping (attention scores and final logits)")) << m.not_modeled[0];

  EXPECT_TRUE(Contains(ErrorOfEdited("gemma2-27b", {{"hidden_activation", "silu"}}),
                       "hidden_activation = \"silu\": bmpipe models Gemma's MLP as GeGLU"));
  EXPECT_TRUE(Contains(ErrorOfEdited("gemma2-27b", {{"attention_bias", true}}), "attention_bias = true"));
  EXPECT_TRUE(Contains(ErrorOfEdited("gemma2-27b", {{"head_dim", "<delete>"}}), "missing required key 'head_dim'"));
  EXPECT_TRUE(ReadEdited("gemma2-27b", {{"attn_logit_softcapping", nullptr}, {"final_logit_softcapping", nullptr}})
                  .not_modeled.empty());
}

// Gemma 3 27B's published multimodal config, whose text_config leaves vocab_size (262208),
// sliding_window_pattern (6) and the activation to Gemma3TextConfig's defaults. Per layer:
// attention 5376 x 12288 = 66,060,288, q/k norms 256, four norms 21,504, GeGLU 3 x 5376 x 21504 =
// 346,816,512; tied embedding 1,409,630,208. The card's 27B (27.4B with the vision encoder).
TEST(HfConfig, Gemma3_27bFromTextConfig) {
  ModelSpec m = Read(Fixture("gemma3-27b"));
  EXPECT_EQ(m.family, "gemma3");
  EXPECT_EQ(m.vocab, 262208);
  EXPECT_EQ(m.mlp, MlpKind::kGeGlu);
  EXPECT_TRUE(m.qk_norm && m.post_norms && m.tied_embeddings);
  EXPECT_EQ(m.sliding_window, 1024);
  int windowed = 0;
  for (int i = 0; i < m.layers; ++i) windowed += IsWindowedLayer(m, i) ? 1 : 0;
  EXPECT_EQ(windowed, 62 - 10);  // layers 5, 11, ..., 59 are global
  EXPECT_FALSE(IsWindowedLayer(m, 5));
  EXPECT_TRUE(IsWindowedLayer(m, 6));
  const ParameterCounts c = CountParameters(m);
  EXPECT_EQ(c.dense_layer, 412'898'560);
  EXPECT_EQ(c.total, 27'009'346'304);
  EXPECT_LT(RelativeError(c.total, 27e9), 0.001);
  EXPECT_EQ(c.total, CountParameters(ModelPreset("gemma3-27b").value()).total);
  ASSERT_EQ(m.not_modeled.size(), 1u);  // no soft-capping in Gemma 3
  EXPECT_TRUE(Contains(m.not_modeled[0], "vision encoder")) << m.not_modeled[0];

  Json text = Json::parse(testing::ReadFile(Fixture("gemma3-27b")))["text_config"];
  text["sliding_window_pattern"] = 2;
  EXPECT_FALSE(IsWindowedLayer(ReadEdited("gemma3-27b", {{"text_config", text}}), 1));
  text["num_attention_heads"] = 0;
  EXPECT_TRUE(Contains(ErrorOfEdited("gemma3-27b", {{"text_config", text}}), "text_config.num_attention_heads = 0"));
  // A text-only config has the keys at the top level.
  text = Json::parse(testing::ReadFile(Fixture("gemma3-27b")))["text_config"];
  Json flat = text;
  flat["model_type"] = "gemma3_text";
  const std::string dir = testing::MakeTempDir();
  std::ofstream(dir + "/config.json") << flat.dump();
  const ModelSpec t = Read(dir + "/config.json");
  std::filesystem::remove_all(dir);
  EXPECT_EQ(t.family, "gemma3");
  EXPECT_EQ(CountParameters(t).total, c.total);
  EXPECT_TRUE(t.not_modeled.empty());
}

TEST(HfConfig, UnknownModelTypeListsTheSupportedOnes) {
  const std::string path = Fixture("bad-unknown-model-type");
  const std::string message = ErrorOf(path);
  EXPECT_TRUE(Contains(message, path + ": model_type = \"falcon\": unsupported model_type; bmpipe reads llama, "
                                       "mistral, mixtral, qwen2, qwen3, qwen3_moe, gpt2, gpt_neox, starcoder2, "
                                       "deepseek_v3, deepseek_v32, kimi_k2, glm4_moe, gpt_oss, llama4, llama4_text, "
                                       "gemma2, gemma3, gemma3_text"))
      << message;
  EXPECT_TRUE(Contains(ErrorOfEdited("llama3-8b", {{"model_type", "<delete>"}}),
                       "missing required key 'model_type' (the architecture; bmpipe reads llama, "));
  EXPECT_TRUE(Contains(ErrorOfEdited("llama3-8b", {{"model_type", "lama"}}), "did you mean 'llama'?"));
}

TEST(HfConfig, MissingHiddenSize) {
  const std::string message = ErrorOf(Fixture("bad-missing-hidden-size"));
  EXPECT_TRUE(Contains(message, "top level: missing required key 'hidden_size' (the model width h)")) << message;
}

TEST(HfConfig, HeadsNotDivisibleByKvHeads) {
  const std::string message = ErrorOf(Fixture("bad-kv-heads"));
  EXPECT_TRUE(Contains(message, "num_key_value_heads = 5: must divide num_attention_heads = 32")) << message;
}

// A quantized checkpoint has the shape of the model it stores: read it, and say what is costed.
TEST(HfConfig, QuantizedCheckpointIsCostedAs16BitTraining) {
  const ModelSpec m = ReadHuggingFaceConfig(Fixture("quantized-llama3-8b")).value();
  EXPECT_EQ(CountParameters(m).total, 8'030'261'248);
  ASSERT_EQ(m.not_modeled.size(), 1u);
  EXPECT_TRUE(Contains(m.not_modeled[0], "quantization_config (awq)")) << m.not_modeled[0];
  EXPECT_TRUE(Contains(m.not_modeled[0], "16-bit training")) << m.not_modeled[0];
}

TEST(HfConfig, MoeLayerFrequencyMustBeOne) {
  const std::string message = ErrorOf(Fixture("bad-moe-layer-freq"));
  EXPECT_TRUE(Contains(message, "moe_layer_freq = 2:")) << message;
  EXPECT_TRUE(Contains(message, "needs moe_layer_freq = 1")) << message;
}

TEST(HfConfig, ValuesAreValidated) {
  EXPECT_TRUE(Contains(ErrorOfEdited("llama3-8b", {{"num_hidden_layers", 0}}),
                       "num_hidden_layers = 0: must be between 1 and 100000; check the value: it is the number of "
                       "decoder layers"));
  EXPECT_TRUE(Contains(ErrorOfEdited("llama3-8b", {{"hidden_size", "4096"}}),
                       "hidden_size = \"4096\": expected a number, found a string"));
  EXPECT_TRUE(Contains(ErrorOfEdited("llama3-8b", {{"intermediate_size", 1.5}}), "intermediate_size = 1.5"));
  EXPECT_TRUE(Contains(ErrorOfEdited("llama3-8b", {{"hidden_act", "gelu"}}), "hidden_act = \"gelu\""));
  EXPECT_TRUE(Contains(ErrorOfEdited("llama3-8b", {{"tie_word_embeddings", "no"}}), "tie_word_embeddings = \"no\""));
  EXPECT_TRUE(Contains(ErrorOfEdited("gpt2", {{"n_head", 7}}), "n_head = 7: must divide the hidden size 768"));
}

TEST(HfConfig, LlamaBiases) {
  ModelSpec m = ReadEdited("llama3-8b", {{"attention_bias", true}, {"mlp_bias", true}});
  EXPECT_TRUE(m.qkv_bias && m.linear_bias);
  EXPECT_TRUE(m.not_modeled.empty());
  // One flag covers the output and MLP biases; counting both when only one is present is noted.
  m = ReadEdited("llama3-8b", {{"attention_bias", true}});
  EXPECT_TRUE(m.qkv_bias && m.linear_bias);
  ASSERT_EQ(m.not_modeled.size(), 1u);
  EXPECT_TRUE(Contains(m.not_modeled[0], "attention_bias but not mlp_bias"));
  // Mistral has no biases whatever its config says, as in Transformers.
  EXPECT_FALSE(ReadEdited("mistral-7b", {{"attention_bias", true}}).qkv_bias);
}

TEST(HfConfig, MissingFileIsAnIoError) {
  const std::string path = testing::SourcePath("tests/data/hf/no-such-config.json");
  Result<ModelSpec> r = ReadHuggingFaceConfig(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::kIo);
  EXPECT_TRUE(Contains(r.error().message, path)) << r.error().message;
}

// Hybrid stacks. The four fixtures below are not downloaded from the hub: nemotron-h-8b is
// Megatron-Bridge's test fixture of the checkpoint's config, nemotron-3-nano-30b-a3b and
// nemotron-3-super-120b-a12b third-party transcriptions of theirs (the Super one without its
// quantization_config), qwen3-next-80b-a3b Megatron-Bridge's fixture (data/sources/hybrid-runs.md).
//
// Nemotron-H 8B: 24 Mamba-2 blocks, 4 attention blocks and 24 MLP blocks, one a layer; 8.1 B.
TEST(HfConfig, NemotronHBlocksAreLayersOfTheirOwn) {
  const ModelSpec m = Read(Fixture("nemotron-h-8b"));
  ASSERT_EQ(m.layers, 52);
  EXPECT_EQ(m.family, "nemotron_h");
  EXPECT_EQ(m.mlp, MlpKind::kSquaredRelu);
  EXPECT_EQ(m.head_dim, 128);  // attention_head_dim
  EXPECT_EQ(MixerOf(m, 0), Mixer::kMamba2);
  EXPECT_FALSE(HasMlp(m, 0));
  EXPECT_EQ(MixerOf(m, 1), Mixer::kNone);
  EXPECT_TRUE(HasMlp(m, 1));
  EXPECT_EQ(MixerOf(m, 7), Mixer::kAttention);  // "M-M-M-M*": the eighth block
  EXPECT_FALSE(HasMlp(m, 7));
  EXPECT_EQ(DecoderKindName(DecoderKindOf(m, 0)), "mamba");
  EXPECT_EQ(DecoderKindName(DecoderKindOf(m, 1)), "mlp");
  EXPECT_EQ(DecoderKindName(DecoderKindOf(m, 7)), "attention");
  EXPECT_EQ(m.mamba.heads, 128);
  EXPECT_EQ(m.mamba.head_dim, 64);
  EXPECT_EQ(m.mamba.state, 128);
  EXPECT_EQ(m.mamba.groups, 8);
  EXPECT_EQ(m.mamba.conv_kernel, 4);
  EXPECT_EQ(m.mamba.chunk, 128);
  // A Mamba-2 block by hand: in_proj h x (2 x 8192 + 2 x 8 x 128 + 128), the convolution over
  // 8192 + 2048 channels (4 taps and a bias each), A, D and dt's bias per head, the gated norm, the
  // output projection, and the block's norm.
  const std::int64_t h = 4096, inner = 8192, conv = inner + 2048;
  const std::int64_t mamba = h * (2 * inner + 2048 + 128) + conv * 5 + 3 * 128 + inner + inner * h + h;
  EXPECT_EQ(DecoderLayerParameters(m, DecoderKindOf(m, 0)), mamba);
  EXPECT_EQ(DecoderLayerParameters(m, DecoderKindOf(m, 1)), 2 * h * 21504 + h);
  EXPECT_LT(RelativeError(CountParameters(m).total, 8.1e9), 0.01);
  EXPECT_EQ(CountParameters(m).total, CountParameters(ModelPreset("nemotron-h-8b").value()).total);
  // Transformers' newer spelling of the blocks reads the same.
  Json types = Json::array();
  for (char c : std::string("M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-")) {
    types.push_back(c == 'M' ? "mamba" : c == '*' ? "attention" : "mlp");
  }
  EXPECT_EQ(CountParameters(ReadEdited("nemotron-h-8b", {{"hybrid_override_pattern", "<delete>"},
                                                         {"layers_block_type", types}}))
                .total,
            CountParameters(m).total);
}

// Nemotron 3 Nano: MoE blocks with 128 routed experts and a shared expert two experts wide; the
// head width is not hidden / heads; 31.6 B.
TEST(HfConfig, NemotronNanoHasMoeBlocks) {
  const ModelSpec m = Read(Fixture("nemotron-3-nano-30b-a3b"));
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.moe.experts, 128);
  EXPECT_EQ(m.moe.top_k, 6);
  EXPECT_EQ(m.moe.shared_experts, 2);
  EXPECT_EQ(DecoderKindName(DecoderKindOf(m, 0)), "mamba");
  EXPECT_EQ(DecoderKindName(DecoderKindOf(m, 1)), "moe");
  EXPECT_EQ(DecoderKindName(DecoderKindOf(m, 5)), "attention");
  EXPECT_LT(RelativeError(CountParameters(m).total, 31.6e9), 0.01);
  EXPECT_EQ(CountParameters(m).total, CountParameters(ModelPreset("nemotron-3-nano-30b-a3b").value()).total);
  // What the reader refuses, naming the key.
  EXPECT_TRUE(Contains(ErrorOfEdited("nemotron-3-nano-30b-a3b", {{"hybrid_override_pattern", "MEMX"}}),
                       "hybrid_override_pattern = \"MEMX\": has 'X'"));
  EXPECT_TRUE(Contains(ErrorOfEdited("nemotron-3-nano-30b-a3b", {{"hybrid_override_pattern", "MEM*"}}),
                       "has 4 blocks for num_hidden_layers = 52"));
  EXPECT_TRUE(Contains(ErrorOfEdited("nemotron-3-nano-30b-a3b", {{"moe_shared_expert_intermediate_size", 1000}}),
                       "must be a multiple of moe_intermediate_size = 1856"));
  EXPECT_TRUE(Contains(ErrorOfEdited("nemotron-3-nano-30b-a3b", {{"mlp_hidden_act", "silu"}}), "'relu2'"));
  EXPECT_TRUE(Contains(ErrorOfEdited("nemotron-3-nano-30b-a3b", {{"mamba_num_heads", 60}}),
                       "must be a multiple of n_groups = 8"));
  // Nemotron 3 Super's latent experts are not costed: an error, not a model without them.
  EXPECT_TRUE(Contains(ErrorOf(Fixture("nemotron-3-super-120b-a12b")), "moe_latent_size = 1024"));
}

// Qwen3-Next 80B-A3B: three Gated DeltaNet layers to each gated attention layer, every layer MoE
// with one shared expert; about 80 B (the card's figure, its multi-token-prediction layer aside).
TEST(HfConfig, Qwen3NextMixesGatedDeltaNetAndGatedAttention) {
  const ModelSpec m = Read(Fixture("qwen3-next-80b-a3b"));
  EXPECT_EQ(m.layers, 48);
  EXPECT_TRUE(m.attention_output_gate);
  EXPECT_TRUE(m.qk_norm);
  EXPECT_EQ(m.head_dim, 256);
  EXPECT_EQ(m.moe.experts, 512);
  EXPECT_EQ(m.moe.shared_experts, 1);
  for (int i = 0; i < m.layers; ++i) {
    EXPECT_EQ(MixerOf(m, i), (i + 1) % 4 == 0 ? Mixer::kAttention : Mixer::kGatedDeltaNet) << i;
    EXPECT_TRUE(IsMoeLayer(m, i)) << i;
  }
  EXPECT_EQ(DecoderKindName(DecoderKindOf(m, 0)), "deltanet-moe");
  EXPECT_EQ(DecoderKindName(DecoderKindOf(m, 3)), "decoder-moe");
  EXPECT_EQ(m.deltanet.key_heads, 16);
  EXPECT_EQ(m.deltanet.value_heads, 32);
  EXPECT_LT(RelativeError(CountParameters(m).total, 80e9), 0.01);
  EXPECT_EQ(CountParameters(m).total, CountParameters(ModelPreset("qwen3-next-80b-a3b").value()).total);
  // layer_types, when given, decides the layers.
  Json types = Json::array();
  for (int i = 0; i < 48; ++i) types.push_back(i % 2 == 0 ? "full_attention" : "linear_attention");
  const ModelSpec alternating = ReadEdited("qwen3-next-80b-a3b", {{"layer_types", types}});
  EXPECT_EQ(MixerOf(alternating, 0), Mixer::kAttention);
  EXPECT_EQ(MixerOf(alternating, 1), Mixer::kGatedDeltaNet);
  types[5] = "sliding_attention";
  EXPECT_TRUE(Contains(ErrorOfEdited("qwen3-next-80b-a3b", {{"layer_types", types}}),
                       "linear_attention and full_attention only"));
  EXPECT_TRUE(Contains(ErrorOfEdited("qwen3-next-80b-a3b", {{"linear_num_value_heads", 24}}),
                       "must be a multiple of linear_num_key_heads = 16"));
  // A multi-token-prediction layer the config declares is a note, in the plan's JSON too.
  const ModelSpec mtp = ReadEdited("qwen3-next-80b-a3b", {{"num_nextn_predict_layers", 1}});
  ASSERT_EQ(mtp.not_modeled.size(), 1u);
  EXPECT_TRUE(Contains(mtp.not_modeled[0], "multi-token-prediction"));
}

// Qwen3.5 (qwen3_5_moe): Qwen3-Next's layers in a vision-language config, read from text_config;
// no dense MLP width; the output gate as attn_output_gate says. The fixture is built from the
// published shape of Qwen3.5-35B-A3B (Megatron-Bridge's card and third-party transcriptions of
// its text_config), not downloaded from the hub.
TEST(HfConfig, Qwen35ReadsItsTextConfig) {
  const ModelSpec m = Read(Fixture("qwen3.5-35b-a3b"));
  EXPECT_EQ(m.family, "qwen3_5_moe");
  EXPECT_EQ(m.layers, 40);
  EXPECT_EQ(m.ffn, 0);
  EXPECT_EQ(m.moe.experts, 256);
  EXPECT_EQ(m.moe.shared_experts, 1);
  EXPECT_TRUE(m.attention_output_gate);
  EXPECT_EQ(MixerOf(m, 0), Mixer::kGatedDeltaNet);
  EXPECT_EQ(MixerOf(m, 3), Mixer::kAttention);
  EXPECT_LT(RelativeError(CountParameters(m).total, 35e9), 0.015);
  ASSERT_EQ(m.not_modeled.size(), 2u);  // the MTP layer and the vision encoder
  Json text = Json::parse(testing::ReadFile(Fixture("qwen3.5-35b-a3b")))["text_config"];
  text["attn_output_gate"] = false;
  const ModelSpec ungated = ReadEdited("qwen3.5-35b-a3b", {{"text_config", text}});
  EXPECT_FALSE(ungated.attention_output_gate);
  EXPECT_LT(CountParameters(ungated).total, CountParameters(m).total);
  // The dense Qwen3.5 (qwen3_5): the same layers with a dense MLP.
  Json dense = Json::parse(testing::ReadFile(Fixture("qwen3.5-35b-a3b")))["text_config"];
  for (const char* key : {"num_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size"}) {
    dense.erase(key);
  }
  dense["model_type"] = "qwen3_5_text";
  dense["intermediate_size"] = 8192;
  const ModelSpec d = ReadEdited("qwen3.5-35b-a3b", {{"model_type", "qwen3_5"}, {"text_config", dense}});
  EXPECT_EQ(d.family, "qwen3_5");
  EXPECT_FALSE(d.moe.enabled());
  EXPECT_EQ(d.ffn, 8192);
  EXPECT_EQ(MixerOf(d, 0), Mixer::kGatedDeltaNet);
  // Experts under the dense type are another model: an error naming the types that have them.
  dense["num_experts"] = 8;
  EXPECT_TRUE(Contains(ErrorOfEdited("qwen3.5-35b-a3b", {{"model_type", "qwen3_5"}, {"text_config", dense}}),
                       "give model_type qwen3_moe or qwen3_next or qwen3_5_moe"));
}

}  // namespace
}  // namespace bmpipe
