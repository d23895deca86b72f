// Built-in model shapes, so that common models can be planned without a config.json.
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "bmpipe/core/json_cursor.h"
#include "bmpipe/model/model.h"

namespace bmpipe {

namespace {

// The one shape builder: a Llama-2/3 style decoder (Touvron et al. 2023; Meta's Llama 3
// release: RoPE, RMSNorm, SwiGLU, no biases) of `family`; the other presets change its fields.
ModelSpec Decoder(const std::string& name, const std::string& family, int layers, int hidden, int heads, int kv_heads,
                  int ffn, int vocab) {
  ModelSpec m;
  m.name = name;
  m.family = family;
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

ModelSpec Llama(const std::string& name, int layers, int hidden, int heads, int kv_heads, int ffn, int vocab) {
  return Decoder(name, "llama", layers, hidden, heads, kv_heads, ffn, vocab);
}

// Routed experts (and shared ones of the same size), every layer MoE unless the caller says.
MoeShape Experts(int experts, int top_k, int ffn, int shared_experts = 0) {
  MoeShape moe;
  moe.experts = experts;
  moe.top_k = top_k;
  moe.ffn = ffn;
  moe.shared_experts = shared_experts;
  return moe;
}

// GPT-3 style (Brown et al. 2020; Korthikanti et al. 2022): learned positions, LayerNorm, GELU
// MLP of width 4h, biases everywhere, dropout, and an LM head tied to the token embedding.
ModelSpec Gpt(const std::string& name, int layers, int hidden, int heads, int vocab) {
  ModelSpec m = Decoder(name, "gpt", layers, hidden, heads, heads, 4 * hidden, vocab);
  m.mlp = MlpKind::kGelu;
  m.norm = NormKind::kLayerNorm;
  m.tied_embeddings = true;
  m.learned_positions = 2048;
  m.qkv_bias = true;
  m.linear_bias = true;
  m.dropout = true;
  return m;
}

// Mixtral (mistralai/Mixtral-8x7B-v0.1 and Mixtral-8x22B-v0.1 config.json): 8 key-value heads,
// every layer MoE with 8 experts of the intermediate size, top-2, no sliding window.
ModelSpec Mixtral(const std::string& name, int layers, int hidden, int heads, int ffn, int vocab) {
  ModelSpec m = Decoder(name, "mixtral", layers, hidden, heads, 8, ffn, vocab);
  m.moe = Experts(8, 2, ffn);
  return m;
}

// deepseek-ai/DeepSeek-V3 config.json: 61 layers of width 7168, the first 3 dense (intermediate
// 18432), then 256 routed experts (top-8) and 1 shared expert of 2048; latent attention with 128
// heads, q_lora_rank 1536, kv_lora_rank 512, qk_nope 128 + qk_rope 64, v_head_dim 128; vocab
// 129280, untied; num_nextn_predict_layers 1.
ModelSpec DeepSeekV3() {
  ModelSpec m = Decoder("deepseek-v3", "deepseek_v3", 61, 7168, 128, 128, 18432, 129280);
  m.latent = {1536, 512, 64, 128};
  m.head_dim = 192;
  m.v_head_dim = 128;
  m.moe = Experts(256, 8, 2048, 1);
  m.moe.first_dense_layers = 3;
  m.mtp_layers = 1;
  return m;
}

// deepseek-ai/DeepSeek-V3.2-Exp config.json: DeepSeek-V3's shape with DeepSeek sparse attention
// on every layer: an indexer of 64 heads of width 128, and 2048 keys per query.
ModelSpec DeepSeekV32() {
  ModelSpec m = DeepSeekV3();
  m.name = "deepseek-v3.2";
  m.family = "deepseek_v32";
  m.sparse = {64, 128, 2048};
  return m;
}

// Qwen3-MoE (Qwen/Qwen3-235B-A22B and Qwen/Qwen3-30B-A3B config.json): every layer MoE
// (decoder_sparse_step 1, no mlp_only_layers), 128 experts top-8, no shared expert, head_dim 128
// with q/k norms, vocab 151936, untied.
ModelSpec Qwen3Moe(const std::string& name, int layers, int hidden, int heads, int kv_heads, int ffn, int moe_ffn) {
  ModelSpec m = Decoder(name, "qwen3_moe", layers, hidden, heads, kv_heads, ffn, 151936);
  m.head_dim = 128;
  m.v_head_dim = 128;
  m.qk_norm = true;
  m.moe = Experts(128, 8, moe_ffn);
  return m;
}

// openai/gpt-oss-120b config.json: 36 layers of width 2880, 64 query heads and 8 key-value heads
// of width 64 with biases, 128 experts (top-4) of intermediate size 2880 with biases, layer_types
// alternating sliding (window 128) and full attention starting with sliding, vocab 201088, untied.
ModelSpec GptOss120b() {
  ModelSpec m = Decoder("gpt-oss-120b", "gpt_oss", 36, 2880, 64, 8, 2880, 201088);
  m.head_dim = 64;
  m.v_head_dim = 64;
  m.qkv_bias = true;
  m.linear_bias = true;
  m.moe = Experts(128, 4, 2880);
  m.sliding_window = 128;
  m.windowed_layers = WindowedLayers(36, 2);
  m.not_modeled.push_back(
      "Attention sinks (one learned logit per head) and the router's bias are not costed (negligible); the clamped "
      "SwiGLU variant is costed as SwiGLU.");
  return m;
}

// meta-llama/Llama-4-Scout-17B-16E config.json, text_config: 48 layers of width 5120, 40 query
// heads and 8 key-value heads of width 128, every layer MoE (interleave_moe_layer_step 1) with 16
// routed experts (top-1) and one shared expert of intermediate size 8192 (dense MLPs would be
// intermediate_size_mlp 16384), vocab 202048, untied; attention in chunks of 8192 tokens on the
// layers with RoPE, every fourth layer without RoPE attending to the whole sequence. Text model
// only.
ModelSpec Llama4Scout() {
  ModelSpec m = Decoder("llama4-scout", "llama4", 48, 5120, 40, 8, 16384, 202048);
  m.moe = Experts(16, 1, 8192, 1);
  m.sliding_window = 8192;
  m.windowed_layers = WindowedLayers(48, 4);
  m.local_attention = LocalAttention::kChunked;
  m.not_modeled.push_back("Llama 4's vision encoder is not modeled; the plan covers the text model.");
  return m;
}

// google/gemma-3-27b-it config.json, text_config (omitted keys take Gemma3TextConfig's defaults):
// 62 layers of width 5376, 32 query heads and 16 key-value heads of width 128 with q/k norms,
// GeGLU MLP of 21504, norms before and after attention and MLP, sliding window 1024 on five of
// every six layers (sliding_window_pattern 6), vocab 262208, tied. Text model only.
ModelSpec Gemma3_27b() {
  ModelSpec m = Decoder("gemma3-27b", "gemma3", 62, 5376, 32, 16, 21504, 262208);
  m.head_dim = 128;
  m.v_head_dim = 128;
  m.mlp = MlpKind::kGeGlu;
  m.qk_norm = true;
  m.post_norms = true;
  m.tied_embeddings = true;
  m.sliding_window = 1024;
  m.windowed_layers = WindowedLayers(62, 6);
  m.not_modeled.push_back("Gemma 3's vision encoder is not modeled; the plan covers the text model.");
  return m;
}

// Nemotron-4 (NVIDIA): a squared-ReLU MLP of 4h (not gated), LayerNorm, no biases, 8 key-value
// heads, vocab 256000, untied. 15B: arXiv 2402.16819, Table 1 (32 layers of width 6144, 48 query
// heads) and NeMo's launcher configuration of the model (FFN 24576). 340B: arXiv 2406.11704, Table 1
// and the Megatron checkpoint's model_config.yaml (96 layers of width 18432, 96 query heads, FFN 73728).
ModelSpec Nemotron4(const std::string& name, int layers, int hidden, int heads) {
  ModelSpec m = Decoder(name, "nemotron", layers, hidden, heads, 8, 4 * hidden, 256000);
  m.mlp = MlpKind::kSquaredRelu;
  m.norm = NormKind::kLayerNorm;
  return m;
}

// EleutherAI/gpt-neox-20b config.json: 44 layers of width 6144, 64 heads, GELU MLP of 24576,
// rotary positions, LayerNorm, biases everywhere, vocab 50432, untied. Attention and MLP run in
// parallel from the same input (use_parallel_residual), which changes the order of the sums, not
// their cost.
ModelSpec GptNeox20b() {
  ModelSpec m = Gpt("gpt-neox-20b", 44, 6144, 64, 50432);
  m.family = "gpt_neox";
  m.tied_embeddings = false;
  m.learned_positions = 0;
  m.dropout = false;
  return m;
}

// Nemotron-H and Nemotron 3 (nemotron_h): blocks by a pattern, 'M' Mamba-2, '*' attention, '-'
// squared-ReLU MLP, 'E' MoE (hf_config.cc, ReadNemotronH); RMSNorm, no biases, untied, vocab
// 131072; Mamba-2 heads of 64 channels, state 128, 8 groups, 4 taps, chunks of 128.
ModelSpec NemotronH(const std::string& name, const std::string& pattern, int hidden, int heads, int kv_heads,
                    int ffn, int mamba_heads) {
  ModelSpec m = Decoder(name, "nemotron_h", static_cast<int>(pattern.size()), hidden, heads, kv_heads, ffn, 131072);
  m.head_dim = m.v_head_dim = 128;
  m.mlp = MlpKind::kSquaredRelu;
  m.mamba = {mamba_heads, 64, 128, 8, 4, 128};
  for (char c : pattern) {
    m.mixers.push_back(c == 'M' ? Mixer::kMamba2 : c == '*' ? Mixer::kAttention : Mixer::kNone);
    m.mixer_only.push_back(c == 'M' || c == '*');
  }
  return m;
}

// nvidia/Nemotron-H-8B-Base-8K config.json: 52 blocks of width 4096 (24 Mamba-2 with 128 heads,
// 4 attention with 32 query and 8 key-value heads, 24 MLPs of 21504).
ModelSpec NemotronH8b() {
  return NemotronH("nemotron-h-8b", "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-", 4096, 32, 8, 21504, 128);
}

// Nemotron-H-56B-Base-8K: no config.json at hand; Megatron-LM's examples/post_training/modelopt/
// conf/nvidia/Nemotron-H-56B-Base-8K.sh (118 blocks: 54 Mamba-2, 10 attention with 64 query and 8
// key-value heads of 128, 54 MLPs of 32768; hidden 8192, state 256) and NVIDIA's
// dgxc-benchmarking nemotronh README (256 Mamba-2 heads of 64, 8 groups, vocab 131072).
ModelSpec NemotronH56b() {
  ModelSpec m = NemotronH("nemotron-h-56b",
                          "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-"
                          "M-M*-M-M-M-M-M*-M-M-M-M-M-",
                          8192, 64, 8, 32768, 256);
  m.mamba.state = 256;
  return m;
}

// nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 config.json: 52 blocks of width 2688 (23 Mamba-2 with
// 64 heads, 6 attention with 32 query and 2 key-value heads, 23 MoE with 128 routed experts of
// 1856, top-6, and a shared expert of 3712 = two experts' widths).
ModelSpec Nemotron3Nano() {
  const std::string pattern = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME";
  ModelSpec m = NemotronH("nemotron-3-nano-30b-a3b", pattern, 2688, 32, 2, 1856, 64);
  m.moe = Experts(128, 6, 1856, 2);
  for (int i = 0; i < m.layers; ++i) {
    if (pattern[i] != 'E') m.moe.dense_layers.push_back(i);
  }
  return m;
}

// Qwen/Qwen3-Next-80B-A3B-Instruct config.json: 48 layers of width 2048, three Gated DeltaNet
// layers (16 query/key heads and 32 value heads of 128, 4 taps) to each gated attention layer (16
// query and 2 key-value heads of 256, q/k norms); every layer MoE with 512 routed experts of 512,
// top-10, and one shared expert of 512; vocab 151936, untied.
ModelSpec Qwen3Next80b() {
  ModelSpec m = Decoder("qwen3-next-80b-a3b", "qwen3_next", 48, 2048, 16, 2, 5120, 151936);
  m.head_dim = m.v_head_dim = 256;
  m.qk_norm = true;
  m.attention_output_gate = true;
  m.moe = Experts(512, 10, 512, 1);
  m.deltanet = {16, 32, 128, 128, 4, 64};
  for (int i = 0; i < m.layers; ++i) m.mixers.push_back((i + 1) % 4 == 0 ? Mixer::kAttention : Mixer::kGatedDeltaNet);
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
      // Llama 3.1 changed the RoPE scaling and the context length, not the shapes.
      Llama("llama3.1-8b", 32, 4096, 32, 8, 14336, 128256),
      Llama("llama3.1-70b", 80, 8192, 64, 8, 28672, 128256),
      Llama("llama3.1-405b", 126, 16384, 128, 8, 53248, 128256),
      Gpt("gpt3-175b", 96, 12288, 96, 50257),
      Gpt("gpt-22b", 48, 6144, 64, 51200),
      Gpt("gpt-175b", 96, 12288, 96, 51200),
      Gpt("gpt-530b", 105, 20480, 128, 51200),
      Gpt("gpt-1t", 128, 25600, 160, 51200),
      Mixtral("mixtral-8x7b", 32, 4096, 32, 14336, 32000),
      Mixtral("mixtral-8x22b", 56, 6144, 48, 16384, 32768),
      DeepSeekV3(),
      DeepSeekV32(),
      Qwen3Moe("qwen3-235b-a22b", 94, 4096, 64, 4, 12288, 1536),
      Qwen3Moe("qwen3-30b-a3b", 48, 2048, 32, 4, 6144, 768),
      GptOss120b(),
      Llama4Scout(),
      Gemma3_27b(),
      Nemotron4("nemotron-4-15b", 32, 6144, 48),
      Nemotron4("nemotron-4-340b", 96, 18432, 96),
      GptNeox20b(),
      NemotronH8b(),
      NemotronH56b(),
      Nemotron3Nano(),
      Qwen3Next80b(),
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
