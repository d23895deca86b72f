#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

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

TEST(HfConfig, Mistral7bHasASlidingWindowNote) {
  ModelSpec m = Read(Fixture("mistral-7b"));
  EXPECT_EQ(m.family, "mistral");
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(CountParameters(m).total, 7'241'732'096);
  ASSERT_EQ(m.not_modeled.size(), 1u);
  EXPECT_TRUE(Contains(m.not_modeled[0], "Sliding-window attention (window 4096 tokens) is not modeled"))
      << m.not_modeled[0];
  EXPECT_TRUE(Contains(m.not_modeled[0], "upper bound on attention cost"));

  // head_dim null means hidden / heads; no window means no note.
  m = ReadEdited("mistral-7b", {{"head_dim", nullptr}, {"sliding_window", nullptr}});
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_TRUE(m.not_modeled.empty());
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

  m = ReadEdited("qwen2-7b", {{"use_sliding_window", true}});
  ASSERT_EQ(m.not_modeled.size(), 1u);
  EXPECT_TRUE(Contains(m.not_modeled[0], "window 131072 tokens")) << m.not_modeled[0];
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
  ASSERT_EQ(m.not_modeled.size(), 1u);  // sliding_window is null
  EXPECT_TRUE(Contains(m.not_modeled[0], "without expert parallelism"));
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
// 583,483,392 + 58 MoE layers x 11,507,286,016 = 671,026,404,352, DeepSeek's published 671B (685B
// with the multi-token-prediction module, which is not modeled).
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
  ParameterCounts c = CountParameters(m);
  EXPECT_EQ(c.dense_layer, 583'483'392);
  EXPECT_EQ(c.moe_layer, 11'507'286'016);
  EXPECT_EQ(c.total, 671'026'404'352);
  EXPECT_LT(RelativeError(c.total, 671e9), 0.01);

  ASSERT_EQ(m.not_modeled.size(), 2u);
  EXPECT_TRUE(Contains(m.not_modeled[0], "MoE layers are costed without expert parallelism"));
  EXPECT_EQ(m.not_modeled[1],
            "DeepSeek-V3's 1 multi-token-prediction layer(s) are not modeled; the plan covers the main model only.");

  // Without a query down-projection, queries are projected directly from the hidden state.
  m = ReadEdited("deepseek-v3", {{"q_lora_rank", nullptr}, {"num_nextn_predict_layers", 0}});
  EXPECT_EQ(m.latent.q_lora_rank, 0);
  EXPECT_EQ(m.not_modeled.size(), 1u);
  EXPECT_EQ(CountParameters(m).dense_layer - c.dense_layer, 7168LL * 128 * 192 - 48'760'320);

  EXPECT_TRUE(Contains(ErrorOfEdited("deepseek-v3", {{"first_k_dense_replace", 62}}),
                       "first_k_dense_replace = 62: must be between 0 and 61"));
}

TEST(HfConfig, UnknownModelTypeListsTheSupportedOnes) {
  const std::string path = Fixture("bad-unknown-model-type");
  const std::string message = ErrorOf(path);
  EXPECT_TRUE(Contains(message, path + ": model_type = \"falcon\": unsupported model_type; bmpipe reads llama, "
                                       "mistral, mixtral, qwen2, qwen3, gpt2, gpt_neox, deepseek_v3"))
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

}  // namespace
}  // namespace bmpipe
