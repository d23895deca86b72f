#include "bmpipe/model/model.h"

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.h"

namespace bmpipe {
namespace {

ModelSpec Preset(const std::string& name) {
  Result<ModelSpec> r = ModelPreset(name);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? r.value() : ModelSpec{};
}

std::int64_t Total(const std::string& preset) { return CountParameters(Preset(preset)).total; }

double RelativeError(std::int64_t count, double reference) {
  return std::abs(static_cast<double>(count) - reference) / reference;
}

std::string ErrorOf(const ModelSpec& m) {
  Status s = ValidateModel(m);
  EXPECT_FALSE(s.ok());
  return s.ok() ? "" : s.error().message;
}

TEST(ModelPreset, NamesInAFixedOrderAndEveryPresetIsValid) {
  const std::vector<std::string> expected = {
      "llama2-7b",    "llama2-70b",      "llama3-8b",     "llama3-70b",   "llama3-405b",     "llama3.1-8b",
      "llama3.1-70b", "llama3.1-405b",   "gpt3-175b",     "gpt-22b",      "gpt-175b",        "gpt-530b",
      "gpt-1t",       "mixtral-8x7b",    "mixtral-8x22b", "deepseek-v3",  "deepseek-v3.2", "qwen3-235b-a22b", "qwen3-30b-a3b",
      "gpt-oss-120b", "llama4-scout",    "gemma3-27b",    "nemotron-4-15b", "nemotron-4-340b", "gpt-neox-20b",
      "nemotron-h-8b", "nemotron-h-56b", "nemotron-3-nano-30b-a3b", "qwen3-next-80b-a3b"};
  EXPECT_EQ(ModelPresetNames(), expected);
  for (const std::string& name : expected) {
    ModelSpec m = Preset(name);
    EXPECT_EQ(m.name, name);
    Status s = ValidateModel(m);
    EXPECT_TRUE(s.ok()) << name << ": " << s.error().message;
  }
}

TEST(ModelPreset, LlamaShapes) {
  ModelSpec m = Preset("llama3-405b");
  EXPECT_EQ(m.family, "llama");
  EXPECT_EQ(m.layers, 126);
  EXPECT_EQ(m.hidden, 16384);
  EXPECT_EQ(m.heads, 128);
  EXPECT_EQ(m.kv_heads, 8);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.v_head_dim, 128);
  EXPECT_EQ(m.ffn, 53248);
  EXPECT_EQ(m.vocab, 128256);
  EXPECT_EQ(m.mlp, MlpKind::kSwiGlu);
  EXPECT_EQ(m.norm, NormKind::kRmsNorm);
  EXPECT_FALSE(m.tied_embeddings);
  EXPECT_FALSE(m.qkv_bias);
  EXPECT_FALSE(m.linear_bias);
  EXPECT_FALSE(m.dropout);
  EXPECT_EQ(m.learned_positions, 0);
  EXPECT_FALSE(m.moe.enabled());
  EXPECT_FALSE(m.latent.enabled());
  EXPECT_EQ(Preset("llama2-7b").kv_heads, 32);  // Llama-2-7B has no grouped-query attention
}

// Published counts are those of the Hugging Face checkpoints (safetensors metadata).
TEST(CountParameters, Llama2_70bExactly) {
  ParameterCounts c = CountParameters(Preset("llama2-70b"));
  EXPECT_EQ(c.embedding, 32000LL * 8192);
  // norms 2h, q and o h^2 each, k and v h x 1024 each, SwiGLU 3hf.
  EXPECT_EQ(c.dense_layer, 2 * 8192LL + 2 * 8192LL * 8192 + 2 * 8192LL * 1024 + 3 * 8192LL * 28672);
  EXPECT_EQ(c.moe_layer, 0);
  EXPECT_EQ(c.head, 8192 + 32000LL * 8192);
  EXPECT_EQ(c.total, 68'976'648'192);
  EXPECT_LT(RelativeError(c.total, 68'976'648'192.0), 0.005);
}

TEST(CountParameters, Llama3_8bExactly) {
  EXPECT_EQ(Total("llama3-8b"), 8'030'261'248);
  EXPECT_LT(RelativeError(Total("llama3-8b"), 8'030'261'248.0), 0.005);
}

TEST(CountParameters, Llama3LargeModels) {
  EXPECT_LT(RelativeError(Total("llama3-70b"), 70.55e9), 0.005);
  EXPECT_LT(RelativeError(Total("llama3-405b"), 405.85e9), 0.005);
  EXPECT_EQ(Total("llama3-70b"), 70'553'706'496);
  EXPECT_EQ(Total("llama3-405b"), 405'853'388'800);
}

TEST(CountParameters, Gpt3) {
  ModelSpec m = Preset("gpt3-175b");
  EXPECT_EQ(m.family, "gpt");
  EXPECT_EQ(m.ffn, 4 * 12288);
  EXPECT_EQ(m.kv_heads, m.heads);
  EXPECT_TRUE(m.tied_embeddings && m.qkv_bias && m.linear_bias && m.dropout);
  EXPECT_EQ(m.mlp, MlpKind::kGelu);
  EXPECT_EQ(m.norm, NormKind::kLayerNorm);
  ParameterCounts c = CountParameters(m);
  const std::int64_t h = 12288;
  EXPECT_EQ(c.embedding, (50257 + 2048) * h);
  EXPECT_EQ(c.dense_layer, 12 * h * h + 13 * h);  // the usual 12h^2 plus biases and LayerNorms
  EXPECT_EQ(c.head, 2 * h);                       // final LayerNorm; the LM head is tied
  EXPECT_LT(RelativeError(c.total, 174.6e9), 0.01);
}

TEST(CountParameters, KorthikantiGptShapesMatchTheirNames) {
  // arXiv 2205.05198, Table 3; vocabulary 51200 and 2048 learned positions.
  struct Expected {
    const char* name;
    int layers, hidden, heads;
    double parameters;
  };
  const Expected expected[] = {{"gpt-22b", 48, 6144, 64, 22e9},
                               {"gpt-175b", 96, 12288, 96, 175e9},
                               {"gpt-530b", 105, 20480, 128, 530e9},
                               {"gpt-1t", 128, 25600, 160, 1e12}};
  for (const Expected& e : expected) {
    ModelSpec m = Preset(e.name);
    EXPECT_EQ(m.layers, e.layers) << e.name;
    EXPECT_EQ(m.hidden, e.hidden) << e.name;
    EXPECT_EQ(m.heads, e.heads) << e.name;
    EXPECT_EQ(m.kv_heads, e.heads) << e.name;
    EXPECT_EQ(m.ffn, 4 * e.hidden) << e.name;
    EXPECT_EQ(m.vocab, 51200) << e.name;
    EXPECT_EQ(m.learned_positions, 2048) << e.name;
    EXPECT_LT(RelativeError(CountParameters(m).total, e.parameters), 0.01) << e.name;
  }
}

TEST(CountParameters, Mixtral) {
  ModelSpec m = Preset("mixtral-8x7b");
  EXPECT_EQ(m.family, "mixtral");
  EXPECT_EQ(m.moe.experts, 8);
  EXPECT_EQ(m.moe.top_k, 2);
  EXPECT_EQ(m.moe.ffn, 14336);
  EXPECT_EQ(m.moe.first_dense_layers, 0);
  // Expert parallelism is part of the cost model: nothing about MoE is left unmodeled.
  EXPECT_TRUE(m.not_modeled.empty());
  ParameterCounts c = CountParameters(m);
  // Every layer is MoE: the router h x E and eight SwiGLU experts replace the dense MLP.
  EXPECT_EQ(c.moe_layer - c.dense_layer, 4096LL * 8 + 7 * 3 * 4096LL * 14336);
  EXPECT_EQ(c.total, c.embedding + 32 * c.moe_layer + c.head);
  EXPECT_EQ(c.total, 46'702'792'704);
  EXPECT_LT(RelativeError(c.total, 46.70e9), 0.005);
  for (int i = 0; i < m.layers; ++i) EXPECT_TRUE(IsMoeLayer(m, i)) << i;
}

// The newer presets against their published totals (model cards; the config.json shapes are in
// presets.cc). Exact counts are derived in hf_config_test.cc for the presets that have a fixture.
TEST(CountParameters, NewerPresetsMatchPublishedTotals) {
  struct Published {
    const char* name;
    std::int64_t exact;
    double published, tolerance;
  };
  for (const Published& p : {
           // 56 layers: attention 6144 x 14336, router 6144 x 8, 8 experts of 3 x 6144 x 16384: 141B.
           Published{"mixtral-8x22b", 140'630'071'296, 140.6e9, 0.001},
           Published{"qwen3-235b-a22b", 235'093'634'560, 235e9, 0.001},
           Published{"qwen3-30b-a3b", 30'532'122'624, 30.5e9, 0.002},
           Published{"gpt-oss-120b", 116'829'149'760, 116.83e9, 0.0001},
           Published{"llama4-scout", 107'769'861'120, 109e9, 0.015},  // the card counts the vision encoder
           Published{"gemma3-27b", 27'009'346'304, 27e9, 0.001},
           // 32 layers: attention 6144 x 14336, squared-ReLU MLP 2 x 6144 x 24576, two LayerNorms with
           // biases; untied 256000 x 6144 embedding and head. The report: 3.2B embedding and 12.5B
           // non-embedding parameters.
           Published{"nemotron-4-15b", 15'628'775'424, 15.7e9, 0.005},
           // 96 layers: attention 18432 x 39936, squared-ReLU MLP 2 x 18432 x 73728, two LayerNorms
           // with biases; untied 256000 x 18432 embedding and head: 341B.
           Published{"nemotron-4-340b", 341'029'195'776, 341e9, 0.001},
           Published{"gpt-neox-20b", 20'554'567'680, 20.55e9, 0.001},
       }) {
    const std::int64_t total = Total(p.name);
    EXPECT_EQ(total, p.exact) << p.name;
    EXPECT_LT(RelativeError(total, p.published), p.tolerance) << p.name;
  }
  // DeepSeek-V3: 671B main model, plus the multi-token-prediction module (hf_config_test.cc).
  const ParameterCounts c = CountParameters(Preset("deepseek-v3"));
  EXPECT_EQ(c.total - c.mtp_layer, 671'026'404'352);
  EXPECT_EQ(c.mtp_layer, 11'610'067'968);
  for (const char* size : {"8b", "70b", "405b"}) {
    EXPECT_EQ(Total(std::string("llama3.1-") + size), Total(std::string("llama3-") + size)) << size;
  }
}

TEST(ModelPreset, NewerShapes) {
  ModelSpec m = Preset("nemotron-4-340b");
  EXPECT_EQ(m.mlp, MlpKind::kSquaredRelu);
  EXPECT_EQ(m.norm, NormKind::kLayerNorm);
  EXPECT_EQ(m.head_dim, 192);
  EXPECT_FALSE(m.tied_embeddings || m.qkv_bias || m.linear_bias);
  m = Preset("gpt-neox-20b");
  EXPECT_EQ(m.mlp, MlpKind::kGelu);
  EXPECT_EQ(m.learned_positions, 0);
  EXPECT_TRUE(m.qkv_bias && m.linear_bias);
  EXPECT_FALSE(m.tied_embeddings || m.dropout);
  m = Preset("gemma3-27b");
  EXPECT_EQ(m.mlp, MlpKind::kGeGlu);
  EXPECT_EQ(m.sliding_window, 1024);
  EXPECT_FALSE(IsWindowedLayer(m, 5));
  EXPECT_TRUE(IsWindowedLayer(m, 6));
  m = Preset("deepseek-v3");
  EXPECT_EQ(m.mtp_layers, 1);
  EXPECT_FALSE(IsMoeLayer(m, 2));
  EXPECT_TRUE(IsMoeLayer(m, 3));
  // No MoE preset carries a note about expert parallelism, which the cost model represents.
  for (const std::string& name : ModelPresetNames()) {
    for (const std::string& note : Preset(name).not_modeled) {
      EXPECT_EQ(note.find("expert parallelism"), std::string::npos) << name << ": " << note;
    }
  }
}

TEST(CountParameters, LayerStepAndDenseLayers) {
  ModelSpec m = Preset("mixtral-8x7b");
  m.moe.layer_step = 2;  // layers 1, 3, ..., 31
  m.moe.dense_layers = {3, 4};
  EXPECT_FALSE(IsMoeLayer(m, 0));
  EXPECT_TRUE(IsMoeLayer(m, 1));
  EXPECT_FALSE(IsMoeLayer(m, 3));
  EXPECT_TRUE(IsMoeLayer(m, 5));
  const ParameterCounts c = CountParameters(m);
  EXPECT_EQ(c.total, c.embedding + 17 * c.dense_layer + 15 * c.moe_layer + c.head);
  EXPECT_TRUE(ValidateModel(m).ok());
  m.moe.dense_layers = {4, 3};
  EXPECT_NE(ErrorOf(m).find("moe.dense_layers[1] = 3"), std::string::npos);
  m.moe.dense_layers = {};
  m.moe.layer_step = 0;
  EXPECT_NE(ErrorOf(m).find("moe.layer_step = 0"), std::string::npos);
  m.moe.layer_step = 33;
  EXPECT_NE(ErrorOf(m).find("no layer is MoE"), std::string::npos);
}

TEST(ValidateModel, WindowsAndMtp) {
  ModelSpec m = Preset("llama3-8b");
  m.sliding_window = 4096;
  EXPECT_NE(ErrorOf(m).find("windowed_layers has 0 entries for layers = 32"), std::string::npos);
  m.windowed_layers = WindowedLayers(32, 4);
  EXPECT_TRUE(ValidateModel(m).ok());
  EXPECT_FALSE(IsWindowedLayer(m, 3));
  EXPECT_TRUE(IsWindowedLayer(m, 4));
  EXPECT_FALSE(IsWindowedLayer(m, 32));
  m.sliding_window = 0;
  EXPECT_NE(ErrorOf(m).find("but sliding_window is 0"), std::string::npos);
  m = Preset("llama3-8b");
  m.mtp_layers = -1;
  EXPECT_NE(ErrorOf(m).find("mtp_layers = -1"), std::string::npos);
  // A dense model's module holds a dense decoder layer.
  m.mtp_layers = 2;
  const ParameterCounts c = CountParameters(m);
  EXPECT_EQ(c.mtp_layer, c.dense_layer + 3 * 4096 + 2 * 4096LL * 4096);
  EXPECT_EQ(c.total, CountParameters(Preset("llama3-8b")).total + 2 * c.mtp_layer);
}

TEST(CountParameters, FirstDenseLayersAndSharedExperts) {
  ModelSpec m = Preset("mixtral-8x7b");
  m.moe.first_dense_layers = 2;
  m.moe.shared_experts = 1;
  m.moe.ffn = 1024;
  EXPECT_FALSE(IsMoeLayer(m, 0));
  EXPECT_FALSE(IsMoeLayer(m, 1));
  EXPECT_TRUE(IsMoeLayer(m, 2));
  EXPECT_TRUE(IsMoeLayer(m, 31));
  EXPECT_FALSE(IsMoeLayer(m, 32));  // past the last layer
  ParameterCounts c = CountParameters(m);
  const std::int64_t block = c.dense_layer - 3 * 4096LL * 14336;  // norms and attention
  EXPECT_EQ(c.moe_layer, block + 4096LL * 8 + (8 + 1) * 3 * 4096LL * 1024);
  EXPECT_EQ(c.total, c.embedding + 2 * c.dense_layer + 30 * c.moe_layer + c.head);
  EXPECT_FALSE(IsMoeLayer(Preset("llama3-8b"), 0));
}

// A tiny latent-attention model small enough to count by hand.
ModelSpec TinyLatent() {
  ModelSpec m;
  m.layers = 1;
  m.hidden = 8;
  m.ffn = 4;
  m.vocab = 10;
  m.heads = 2;
  m.kv_heads = 2;
  m.latent.q_lora_rank = 4;
  m.latent.kv_lora_rank = 3;
  m.latent.qk_nope_head_dim = 2;
  m.latent.qk_rope_head_dim = 1;
  m.head_dim = 3;
  m.v_head_dim = 2;
  return m;
}

TEST(CountParameters, LatentAttention) {
  ModelSpec m = TinyLatent();
  ASSERT_TRUE(ValidateModel(m).ok()) << ValidateModel(m).error().message;
  // q: 8x4 + norm 4 + 4x(2 heads x 3) = 60; kv: 8x(3+1) + norm 3 + 3x(2 x (2+2)) = 59;
  // o: (2 x 2)x8 = 32; two norms 16; SwiGLU 3x8x4 = 96.
  EXPECT_EQ(CountParameters(m).dense_layer, 60 + 59 + 32 + 16 + 96);
  m.latent.q_lora_rank = 0;  // queries projected directly: 8 x (2 x 3) = 48
  EXPECT_EQ(CountParameters(m).dense_layer, 48 + 59 + 32 + 16 + 96);
}

TEST(CountParameters, BiasesAndQkNorm) {
  ModelSpec m = Preset("llama3-8b");
  const std::int64_t base = CountParameters(m).dense_layer;
  m.qkv_bias = true;
  EXPECT_EQ(CountParameters(m).dense_layer, base + 4096 + 2 * 1024);
  m.linear_bias = true;  // o bias h; SwiGLU gate and up f each, down h
  EXPECT_EQ(CountParameters(m).dense_layer, base + 4096 + 2 * 1024 + 4096 + 2 * 14336 + 4096);
  m.qkv_bias = m.linear_bias = false;
  m.qk_norm = true;
  EXPECT_EQ(CountParameters(m).dense_layer, base + 2 * 128);
}

TEST(ValidateModel, NamesTheFieldAndValue) {
  ModelSpec m = Preset("llama3-8b");
  m.layers = 0;
  EXPECT_NE(ErrorOf(m).find("layers = 0: must be positive"), std::string::npos);

  m = Preset("llama3-8b");
  m.kv_heads = 5;
  EXPECT_NE(ErrorOf(m).find("kv_heads = 5: must divide heads = 32"), std::string::npos);

  m = Preset("llama3-8b");
  m.ffn = 0;
  EXPECT_NE(ErrorOf(m).find("ffn = 0"), std::string::npos);

  m = Preset("gpt3-175b");
  m.learned_positions = -1;
  EXPECT_NE(ErrorOf(m).find("learned_positions = -1"), std::string::npos);

  m = Preset("mixtral-8x7b");
  m.moe.top_k = 9;
  EXPECT_NE(ErrorOf(m).find("moe.top_k = 9: must be between 1 and moe.experts = 8"), std::string::npos);

  m = Preset("mixtral-8x7b");
  m.moe.first_dense_layers = 33;
  EXPECT_NE(ErrorOf(m).find("moe.first_dense_layers = 33: must be between 0 and layers = 32"), std::string::npos);

  m = Preset("llama3-8b");
  m.moe.top_k = 2;  // MoE fields without experts
  EXPECT_NE(ErrorOf(m).find("moe.experts = 0"), std::string::npos);

  m = TinyLatent();
  m.head_dim = 4;
  EXPECT_NE(ErrorOf(m).find("head_dim = 4: must equal latent.qk_nope_head_dim + latent.qk_rope_head_dim = 3"),
            std::string::npos);

  m = Preset("llama3-8b");
  m.layers = 100'000;
  m.hidden = 1 << 20;
  m.ffn = 1 << 22;
  EXPECT_NE(ErrorOf(m).find("check its sizes"), std::string::npos);
}

TEST(ValidateModel, AllMoeModelMayHaveNoDenseMlp) {
  ModelSpec m = Preset("mixtral-8x7b");
  m.ffn = 0;
  EXPECT_TRUE(ValidateModel(m).ok());
  m.moe.first_dense_layers = 1;
  EXPECT_NE(ErrorOf(m).find("ffn = 0"), std::string::npos);
}

TEST(ModelPreset, UnknownNameListsPresetsAndSuggests) {
  Result<ModelSpec> r = ModelPreset("llama3-8");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::kInvalidInput);
  EXPECT_NE(r.error().message.find("unknown model preset 'llama3-8'; presets: llama2-7b, llama2-70b, "),
            std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("qwen3-next-80b-a3b; did you mean 'llama3-8b'?"), std::string::npos)
      << r.error().message;
}

TEST(LoadModel, PresetName) {
  Result<ModelSpec> r = LoadModel("llama2-70b");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().name, "llama2-70b");
  EXPECT_EQ(CountParameters(r.value()).total, 68'976'648'192);
}

TEST(LoadModel, ConfigPath) {
  const std::string path = testing::SourcePath("tests/data/hf/llama3-8b.json");
  Result<ModelSpec> r = LoadModel(path);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().name, path);
  EXPECT_EQ(CountParameters(r.value()).total, 8'030'261'248);
}

TEST(LoadModel, CheckpointDirectoryReadsItsConfigJson) {
  const std::filesystem::path dir = testing::MakeTempDir();
  std::filesystem::copy_file(testing::SourcePath("tests/data/hf/gpt2.json"), dir / "config.json");
  Result<ModelSpec> r = LoadModel(dir.string());
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().name, (dir / "config.json").string());
  EXPECT_EQ(CountParameters(r.value()).total, 124'439'808);
}

TEST(LoadModel, NeitherPresetNorFile) {
  Result<ModelSpec> r = LoadModel("llama3-8");
  ASSERT_FALSE(r.ok());
  const std::string& message = r.error().message;
  EXPECT_EQ(r.error().kind, ErrorKind::kInvalidInput);
  EXPECT_NE(message.find("'llama3-8' is neither a built-in model preset nor a readable Hugging Face config.json"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("cannot open"), std::string::npos) << message;
  EXPECT_NE(message.find("presets: llama2-7b, "), std::string::npos) << message;
  EXPECT_NE(message.find("did you mean 'llama3-8b'?"), std::string::npos) << message;
}

TEST(LoadModel, BadConfigFileReportsTheConfigError) {
  Result<ModelSpec> r = LoadModel(testing::SourcePath("tests/data/hf/bad-missing-hidden-size.json"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("missing required key 'hidden_size'"), std::string::npos) << r.error().message;
  EXPECT_EQ(r.error().message.find("presets:"), std::string::npos) << r.error().message;
}

// A hybrid stack's shape: one mixer and MLP entry per layer, every layer with a part, the mixers'
// sizes given exactly when a layer uses them.
TEST(ModelValidation, HybridStacksNameTheFieldAndTheFix) {
  ModelSpec m = Preset("nemotron-h-8b");
  ASSERT_TRUE(ValidateModel(m).ok());
  auto error = [](const ModelSpec& spec) {
    const Status st = ValidateModel(spec);
    return st.ok() ? std::string() : st.error().message;
  };
  ModelSpec shorter = m;
  shorter.mixers.pop_back();
  EXPECT_NE(error(shorter).find("mixers has 51 entries for layers = 52"), std::string::npos) << error(shorter);
  ModelSpec empty = m;
  empty.mixers[1] = Mixer::kNone;
  empty.mixer_only[1] = true;
  EXPECT_NE(error(empty).find("decoder layer 1 has neither a mixer nor an MLP"), std::string::npos) << error(empty);
  ModelSpec no_state = m;
  no_state.mamba.state = 0;
  EXPECT_NE(error(no_state).find("Mamba-2 layers need every field positive"), std::string::npos) << error(no_state);
  ModelSpec unused = Preset("llama3-8b");
  unused.deltanet.chunk = 64;
  EXPECT_NE(error(unused).find("deltanet.value_heads = 0: the fields of Gated DeltaNet layers"), std::string::npos)
      << error(unused);
  ModelSpec groups = m;
  groups.mamba.groups = 7;
  EXPECT_NE(error(groups).find("mamba.groups = 7: must divide mamba.heads = 128"), std::string::npos) << error(groups);
}

}  // namespace
}  // namespace bmpipe
