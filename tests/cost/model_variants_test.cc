// The cost model on the newer model shapes: windowed attention, GeGLU and squared-ReLU MLPs,
// Gemma's extra norms, and DeepSeek-V3's multi-token-prediction modules in the head layer.
#include <algorithm>
#include <string>

#include <gtest/gtest.h>

#include "bmpipe/cost/layer_ops.h"
#include "bmpipe/cost/problem_builder.h"

namespace bmpipe {
namespace {

const DeviceSpec& H100() {
  static const DeviceSpec d = DevicePreset("h100-80gb").value();
  return d;
}

TrainingSetup SeqSetup(int seq, bool flash) {
  TrainingSetup s;
  s.micro_batch_size = 1;
  s.global_batch_size = 8;
  s.seq = seq;
  s.flash_attention = flash;
  return s;
}

const LayerOp& OpNamed(const LayerGraph& g, const std::string& name) {
  auto it = std::find_if(g.ops.begin(), g.ops.end(), [&](const LayerOp& op) { return op.name == name; });
  EXPECT_NE(it, g.ops.end()) << name;
  return it == g.ops.end() ? g.ops.front() : *it;
}

// Gemma 3 27B at 32k tokens: a windowed layer (1024 keys) against a full one.
TEST(WindowedAttention, CheaperThanFullAtLongSequence) {
  const ModelSpec m = ModelPreset("gemma3-27b").value();
  ASSERT_EQ(m.sliding_window, 1024);
  const int seq = 32768;
  const double a = m.heads, dh = m.head_dim;

  // Fused kernel: causal full attention computes s/2 keys per query on average, a window of w
  // keys w - w^2 / 2s.
  const TrainingSetup fused = SeqSetup(seq, true);
  const LayerGraph full_fused = DecoderLayerGraph(m, H100(), fused, false, false);
  const LayerGraph local_fused = DecoderLayerGraph(m, H100(), fused, false, true);
  const LayerOp& full = OpNamed(full_fused, "flash_attention");
  const LayerOp& local = OpNamed(local_fused, "flash_attention");
  EXPECT_DOUBLE_EQ(full.forward_flops, 2.0 * seq * (seq / 2.0) * a * (2 * dh));
  EXPECT_DOUBLE_EQ(local.forward_flops, 2.0 * seq * (1024 - 1024.0 * 1024 / (2 * seq)) * a * (2 * dh));
  EXPECT_LT(local.forward_s, full.forward_s / 10);

  // Unfused: the score and probability tensors hold min(s, w) keys per query instead of s.
  const TrainingSetup unfused = SeqSetup(seq, false);
  const LayerGraph full_graph = DecoderLayerGraph(m, H100(), unfused, false, false);
  const LayerGraph local_graph = DecoderLayerGraph(m, H100(), unfused, false, true);
  EXPECT_DOUBLE_EQ(OpNamed(full_graph, "attention_scores").forward_flops, 2.0 * seq * seq * a * dh);
  EXPECT_DOUBLE_EQ(OpNamed(local_graph, "attention_scores").forward_flops, 2.0 * seq * 1024 * a * dh);
  EXPECT_DOUBLE_EQ(OpNamed(local_graph, "softmax").forward_bytes * seq, OpNamed(full_graph, "softmax").forward_bytes * 1024);
  EXPECT_LT(EvaluateOption(local_graph, "none").saved_bytes, EvaluateOption(full_graph, "none").saved_bytes);
  EXPECT_LT(EvaluateOption(local_graph, "none").forward_s, EvaluateOption(full_graph, "none").forward_s);

  // A sequence within the window: the same cost either way.
  const TrainingSetup short_seq = SeqSetup(1024, true);
  const LayerGraph short_local = DecoderLayerGraph(m, H100(), short_seq, false, true);
  const LayerGraph short_full = DecoderLayerGraph(m, H100(), short_seq, false, false);
  EXPECT_DOUBLE_EQ(OpNamed(short_local, "flash_attention").forward_flops,
                   OpNamed(short_full, "flash_attention").forward_flops);
}

TEST(WindowedAttention, ProblemHasLayerKindsPerWindow) {
  const ModelSpec m = ModelPreset("gemma3-27b").value();
  TrainingSetup s = SeqSetup(8192, true);
  s.tp = 8;
  s.pp = 2;
  s.global_batch_size = 16;
  const Result<Problem> built = BuildProblem(m, H100(), s);
  ASSERT_TRUE(built.ok()) << built.error().message;
  const Problem& p = built.value();
  ASSERT_EQ(p.num_layers(), 62 + 2);
  // Five windowed layers, then a global one.
  for (int i = 0; i < 62; ++i) {
    EXPECT_EQ(p.layers[1 + i].name, (i + 1) % 6 == 0 ? "decoder" : "decoder-local") << i;
  }
  EXPECT_LT(p.layers[1].options[0].forward_ns, p.layers[6].options[0].forward_ns);
  EXPECT_EQ(p.layers[1].static_bytes, p.layers[6].static_bytes);

  // gpt-oss: MoE on every layer, windows on alternate ones.
  const ModelSpec oss = ModelPreset("gpt-oss-120b").value();
  s.tp = 1;
  s.dp = 8;
  s.ep = 8;
  const Result<Problem> oss_built = BuildProblem(oss, H100(), s);
  ASSERT_TRUE(oss_built.ok()) << oss_built.error().message;
  const Problem& q = oss_built.value();
  EXPECT_EQ(q.layers[1].name, "decoder-moe-local");
  EXPECT_EQ(q.layers[2].name, "decoder-moe");

  // Model FLOPs count each kind once per layer of it: fewer than if every layer were global.
  ModelSpec global = m;
  global.sliding_window = 0;
  global.windowed_layers.clear();
  EXPECT_LT(ModelFlopsPerIteration(m, H100(), s, AttentionFlops::kCausal),
            ModelFlopsPerIteration(global, H100(), s, AttentionFlops::kCausal));
}

TEST(MlpVariants, GeGluIsGatedAndSquaredReluIsNot) {
  const TrainingSetup s = SeqSetup(4096, true);
  const ModelSpec gemma = ModelPreset("gemma3-27b").value();
  const LayerGraph g = DecoderLayerGraph(gemma, H100(), s, false);
  EXPECT_DOUBLE_EQ(OpNamed(g, "fc1").forward_flops, 2.0 * 4096 * gemma.hidden * 2 * gemma.ffn);
  OpNamed(g, "geglu");
  OpNamed(g, "post_attention_norm");
  OpNamed(g, "post_mlp_norm");

  const ModelSpec nemotron = ModelPreset("nemotron-4-340b").value();
  const LayerGraph n = DecoderLayerGraph(nemotron, H100(), s, false);
  EXPECT_DOUBLE_EQ(OpNamed(n, "fc1").forward_flops, 2.0 * 4096 * nemotron.hidden * nemotron.ffn);
  OpNamed(n, "squared_relu");
}

// DeepSeek-V3's multi-token-prediction module runs in the head layer: a projection, a MoE decoder
// layer and a second pass through the LM head and loss.
TEST(MultiTokenPrediction, InTheHeadLayer) {
  const ModelSpec m = ModelPreset("deepseek-v3").value();
  ASSERT_EQ(m.mtp_layers, 1);
  TrainingSetup s = SeqSetup(4096, true);
  s.tp = 8;
  s.ep = 8;
  s.etp = 1;
  s.pp = 8;
  s.global_batch_size = 64;
  s.zero = 1;
  const LayerGraph head = HeadGraph(m, H100(), s);
  const LayerGraph with_mtp = HeadWithMtpGraph(m, H100(), s);
  const LayerGraph moe = DecoderLayerGraph(m, H100(), s, true);
  EXPECT_EQ(with_mtp.ops.size(), 2 * head.ops.size() + moe.ops.size() + 4);
  OpNamed(with_mtp, "mtp.projection");
  OpNamed(with_mtp, "router");
  EXPECT_EQ(std::count_if(with_mtp.ops.begin(), with_mtp.ops.end(), [](const LayerOp& op) { return op.name == "lm_head"; }),
            2);
  EXPECT_GT(EvaluateOption(with_mtp, "none").forward_s,
            EvaluateOption(head, "none").forward_s + EvaluateOption(moe, "none").forward_s);

  const Result<Problem> built = BuildProblem(m, H100(), s);
  ASSERT_TRUE(built.ok()) << built.error().message;
  const Problem& p = built.value();
  ASSERT_EQ(p.num_layers(), 61 + 2);  // the module is no decoder layer of its own
  ModelSpec without = m;
  without.mtp_layers = 0;
  const Problem q = BuildProblem(without, H100(), s).value();
  EXPECT_GT(p.layers.back().static_bytes, q.layers.back().static_bytes);
  EXPECT_GT(p.layers.back().options[0].forward_ns, q.layers.back().options[0].forward_ns);
  EXPECT_EQ(p.layers[5].static_bytes, q.layers[5].static_bytes);
  EXPECT_GT(ModelFlopsPerIteration(m, H100(), s, AttentionFlops::kCausal),
            ModelFlopsPerIteration(without, H100(), s, AttentionFlops::kCausal));
}

}  // namespace
}  // namespace bmpipe
