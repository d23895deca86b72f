// The cost model on the newer model shapes: windowed and chunked attention, DeepSeek's sparse
// attention, GeGLU and squared-ReLU MLPs, Gemma's extra norms, DeepSeek-V3's
// multi-token-prediction modules in the head layer, and hybrid stacks (Mamba-2, Gated DeltaNet,
// gated attention, blocks without an MLP or without a mixer).
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

// The keys per query a causal kernel computes, against a count over the sequence's positions:
// query i (from 0) sees i + 1 keys, min(i + 1, w) in a window, (i mod c) + 1 in a chunk; with
// context parallelism the busiest rank's two chunks (Megatron's load-balanced layout) count.
double CountedKeysPerQuery(int seq, int cp, LocalAttention kind, int span) {
  auto keys = [&](int i) -> double {
    if (span == 0) return i + 1;
    return kind == LocalAttention::kChunked ? (i % span) + 1 : std::min(i + 1, span);
  };
  const int c = seq / (2 * cp);
  double busiest = 0;
  for (int r = 0; r < cp; ++r) {
    double sum = 0;
    for (int chunk : {r, 2 * cp - 1 - r}) {
      for (int i = chunk * c; i < (chunk + 1) * c; ++i) sum += keys(i);
    }
    busiest = std::max(busiest, sum / (2.0 * c));
  }
  return busiest;
}

TEST(LocalAttention, KeysPerQueryMatchTheMaskOnEveryContextParallelRank) {
  ModelSpec m = ModelPreset("llama4-scout").value();
  const double a = m.heads, dh = m.head_dim;
  for (LocalAttention kind : {LocalAttention::kSlidingWindow, LocalAttention::kChunked}) {
    for (int span : {3000, 8192, 20000}) {
      for (int cp : {1, 2, 4}) {
        m.local_attention = kind;
        m.sliding_window = span;
        TrainingSetup s = SeqSetup(32768, true);
        s.cp = cp;
        const double tokens = 32768.0 / cp;
        const double flops = OpNamed(DecoderLayerGraph(m, H100(), s, true, true), "flash_attention").forward_flops;
        const double keys = flops / (2 * tokens * a * 2 * dh);
        const double counted = CountedKeysPerQuery(32768, cp, kind, span);
        EXPECT_NEAR(keys / counted, 1.0, 2e-3)
            << (kind == LocalAttention::kChunked ? "chunk " : "window ") << span << " cp " << cp;
      }
    }
  }
}

// Llama 4's chunked layers: as full attention within a chunk, c/2 keys per query beyond it.
TEST(LocalAttention, ChunkedLayersCostLessBeyondAChunk) {
  const ModelSpec m = ModelPreset("llama4-scout").value();
  const double a = m.heads, dh = m.head_dim;
  const TrainingSetup within = SeqSetup(8192, true);
  EXPECT_DOUBLE_EQ(OpNamed(DecoderLayerGraph(m, H100(), within, true, true), "flash_attention").forward_flops,
                   OpNamed(DecoderLayerGraph(m, H100(), within, true, false), "flash_attention").forward_flops);
  const TrainingSetup beyond = SeqSetup(65536, true);
  const LayerGraph chunked = DecoderLayerGraph(m, H100(), beyond, true, true);
  EXPECT_EQ(chunked.name, "decoder (MoE) chunked");
  EXPECT_DOUBLE_EQ(OpNamed(chunked, "flash_attention").forward_flops, 2.0 * 65536 * 4096 * a * 2 * dh);
  TrainingSetup s = beyond;
  s.tp = 8;
  s.pp = 4;
  s.ep = 2;
  s.etp = 1;
  s.dp = 2;
  s.global_batch_size = 8;
  const Result<Problem> built = BuildProblem(m, H100(), s);
  ASSERT_TRUE(built.ok()) << built.error().message;
  EXPECT_EQ(built.value().layers[1].name, "decoder-moe-local");
  EXPECT_EQ(built.value().layers[4].name, "decoder-moe");
  // The difference is the attention kernel's: 32768 - 4096 keys per query fewer.
  const LayerGraph full = DecoderLayerGraph(m, H100(), s, true, false);
  const LayerGraph local = DecoderLayerGraph(m, H100(), s, true, true);
  EXPECT_NEAR(OpNamed(full, "flash_attention").forward_s - OpNamed(local, "flash_attention").forward_s,
              1e-9 * static_cast<double>(built.value().layers[4].options[0].forward_ns -
                                         built.value().layers[1].options[0].forward_ns),
              2e-9);
  EXPECT_LT(built.value().layers[1].options[0].forward_ns, built.value().layers[4].options[0].forward_ns);
}

// DeepSeek-V3.2's sparse attention: the indexer scores every earlier key with its 64 heads of
// 128, and the latent attention (absorbed: 576-wide keys, 512-wide values) attends to 2048.
TEST(SparseAttention, IndexerAndSelectedKeys) {
  const ModelSpec v32 = ModelPreset("deepseek-v3.2").value();
  const ModelSpec v3 = ModelPreset("deepseek-v3").value();
  const double a = v32.heads;
  for (int seq : {4096, 65536}) {
    TrainingSetup s = SeqSetup(seq, true);
    const LayerGraph g = DecoderLayerGraph(v32, H100(), s, true);
    const double selected = 2048 - 2048.0 * 2048 / (2 * seq);  // a window of 2048 keys
    EXPECT_DOUBLE_EQ(OpNamed(g, "sparse_attention").forward_flops, 2.0 * seq * selected * a * (576 + 512));
    EXPECT_DOUBLE_EQ(OpNamed(g, "indexer_topk").forward_flops,
                     2.0 * seq * (seq / 2.0) * 64 * 128 + 2.0 * seq * selected * a * 576);
    const LayerOp& proj = OpNamed(g, "indexer_proj");
    EXPECT_DOUBLE_EQ(proj.forward_flops, 2.0 * seq * (1536.0 * 64 * 128 + 7168.0 * 128 + 7168.0 * 64));
    EXPECT_DOUBLE_EQ(proj.backward_flops, proj.forward_flops);  // weight gradients only: its input is detached
    // The absorbed projections are kv_up's FLOPs, reordered.
    const LayerGraph dense = DecoderLayerGraph(v3, H100(), s, true);
    EXPECT_DOUBLE_EQ(OpNamed(g, "q_absorb").forward_flops + OpNamed(g, "v_up").forward_flops,
                     OpNamed(dense, "kv_up").forward_flops);
  }
  // Long sequences: the sparse layer is faster than the dense one, short ones slower (the indexer
  // and the absorbed form's wider keys cost more than the keys it drops).
  auto layer_s = [&](const ModelSpec& m, int seq) {
    const OptionCost c = EvaluateOption(DecoderLayerGraph(m, H100(), SeqSetup(seq, true), true), "none");
    return c.forward_s + c.backward_s;
  };
  EXPECT_LT(layer_s(v32, 131072), 0.5 * layer_s(v3, 131072));
  EXPECT_GT(layer_s(v32, 4096), layer_s(v3, 4096));
  // It runs as fused kernels only.
  TrainingSetup unfused = SeqSetup(4096, false);
  unfused.pp = 8;
  unfused.ep = 8;
  unfused.dp = 8;
  unfused.global_batch_size = 64;
  const Result<Problem> refused = BuildProblem(v32, H100(), unfused);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("DeepSeek sparse attention runs as fused kernels"), std::string::npos)
      << refused.error().message;
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

bool HasOp(const LayerGraph& g, const std::string& name) {
  return std::any_of(g.ops.begin(), g.ops.end(), [&](const LayerOp& op) { return op.name == name; });
}

// Nemotron-H 8B's Mamba-2 block at 8192 tokens: the SSD scan's FLOPs by the chunked algorithm
// (layer_ops.cc), the projections', and both halved by two tensor-parallel ranks.
TEST(HybridStack, MambaBlockCostsItsScanAndProjections) {
  const ModelSpec m = ModelPreset("nemotron-h-8b").value();
  const DecoderKind mamba{Mixer::kMamba2, Ffn::kNone, false};
  TrainingSetup s = SeqSetup(8192, true);
  const LayerGraph g = DecoderLayerGraph(m, H100(), s, mamba);
  EXPECT_EQ(g.name, "mamba");
  const double T = 8192, Q = 128, N = 128, G = 8, P = 64, H = 128, h = 4096;
  EXPECT_DOUBLE_EQ(OpNamed(g, "ssd_scan").forward_flops, T * (2 * Q * N * G + (2 * Q * P + 4 * N * P) * H));
  EXPECT_DOUBLE_EQ(OpNamed(g, "ssd_scan").backward_flops, 2.5 * OpNamed(g, "ssd_scan").forward_flops);
  EXPECT_EQ(OpNamed(g, "ssd_scan").kind, OpClass::kFusedAttention);
  EXPECT_DOUBLE_EQ(OpNamed(g, "in_proj").forward_flops, 2 * T * h * (2 * H * P + 2 * G * N + H));
  EXPECT_DOUBLE_EQ(OpNamed(g, "out_proj").forward_flops, 2 * T * H * P * h);
  // No MLP in a mixer block, no mixer in an MLP block.
  EXPECT_FALSE(HasOp(g, "fc1"));
  const LayerGraph mlp = DecoderLayerGraph(m, H100(), s, DecoderKind{Mixer::kNone, Ffn::kDense, false});
  EXPECT_EQ(mlp.name, "mlp");
  EXPECT_TRUE(HasOp(mlp, "fc1"));
  EXPECT_FALSE(HasOp(mlp, "in_proj") || HasOp(mlp, "qkv") || HasOp(mlp, "norm1"));
  s.tp = 2;
  s.sequence_parallel = true;
  const LayerGraph split = DecoderLayerGraph(m, H100(), s, mamba);
  EXPECT_DOUBLE_EQ(OpNamed(split, "ssd_scan").forward_flops, OpNamed(g, "ssd_scan").forward_flops / 2);
  EXPECT_DOUBLE_EQ(OpNamed(split, "in_proj").forward_flops, OpNamed(g, "in_proj").forward_flops / 2);
  EXPECT_GT(OpNamed(split, "in_proj").forward_comm_s, 0);  // the all-gather into the block
  // Megatron's selective recomputation (core attention) has nothing to rerun in a Mamba block;
  // full recomputation reruns the whole block and keeps only its input.
  const OptionCost none = EvaluateOption(g, "none"), selective = EvaluateOption(g, "selective");
  EXPECT_EQ(selective.recompute_s, 0);
  EXPECT_EQ(selective.saved_bytes, none.saved_bytes);
  const OptionCost full = EvaluateOption(g, "full");
  EXPECT_DOUBLE_EQ(full.recompute_s, none.forward_s);
  EXPECT_DOUBLE_EQ(full.saved_bytes, T * h * 2);
}

// Qwen3-Next: the gated delta rule's FLOPs, the gated attention's wider query projection and its
// output gate.
TEST(HybridStack, GatedDeltaNetAndGatedAttention) {
  const ModelSpec m = ModelPreset("qwen3-next-80b-a3b").value();
  const TrainingSetup s = SeqSetup(4096, true);
  const LayerGraph dn = DecoderLayerGraph(m, H100(), s, DecoderKindOf(m, 0));
  EXPECT_EQ(dn.name, "deltanet-moe");
  const double T = 4096, C = 64, dk = 128, dv = 128, nv = 32, nk = 16, h = 2048;
  EXPECT_DOUBLE_EQ(OpNamed(dn, "delta_rule").forward_flops,
                   T * nv * (6 * dk * dv + 2 * C * (3 * dk + 2 * dv) + C * C / 3));
  EXPECT_DOUBLE_EQ(OpNamed(dn, "in_proj").forward_flops, 2 * T * h * (2 * nk * dk + 2 * nv * dv + 2 * nv));
  EXPECT_TRUE(HasOp(dn, "experts.fc1"));
  const LayerGraph attention = DecoderLayerGraph(m, H100(), s, DecoderKindOf(m, 3));
  EXPECT_EQ(attention.name, "decoder (MoE)");
  ModelSpec ungated = m;
  ungated.attention_output_gate = false;
  const LayerGraph plain = DecoderLayerGraph(ungated, H100(), s, DecoderKindOf(m, 3));
  EXPECT_DOUBLE_EQ(OpNamed(attention, "qkv").forward_flops - OpNamed(plain, "qkv").forward_flops,
                   2 * T * h * m.heads * m.head_dim);
  EXPECT_TRUE(HasOp(attention, "output_gate"));
  EXPECT_FALSE(HasOp(plain, "output_gate"));
}

// A hybrid problem has one layer kind per block kind, named as the plan shows them; setups the
// mixers cannot take are errors naming the flag.
TEST(HybridStack, ProblemLayersAndRefusedSetups) {
  const ModelSpec m = ModelPreset("nemotron-3-nano-30b-a3b").value();
  TrainingSetup s = SeqSetup(8192, true);
  s.ep = 8;
  s.dp = 8;
  s.global_batch_size = 64;
  s.distributed_optimizer = true;
  const Result<Problem> built = BuildProblem(m, H100(), s);
  ASSERT_TRUE(built.ok()) << built.error().message;
  const Problem& p = built.value();
  ASSERT_EQ(p.num_layers(), 54);
  EXPECT_EQ(p.layers[1].name, "mamba");
  EXPECT_EQ(p.layers[2].name, "moe");
  EXPECT_EQ(p.layers[6].name, "attention");
  ASSERT_TRUE(p.training.has_value());
  EXPECT_EQ(p.training->linear_mixers, std::vector<std::string>{"mamba2"});
  // Routed experts split over the expert-parallel ranks: only the MoE blocks shrink with ep.
  TrainingSetup one = s;
  one.ep = 1;
  const Problem q = BuildProblem(m, H100(), one).value();
  EXPECT_EQ(p.layers[1].static_bytes, q.layers[1].static_bytes);
  EXPECT_EQ(p.layers[6].static_bytes, q.layers[6].static_bytes);
  // ep 8 divides the experts' weights by 8; their optimizer state, sharded over the expert
  // data-parallel ranks (8 with ep 1, 1 with ep 8), does not shrink: 18 / 7.5 bytes a parameter.
  EXPECT_LT(p.layers[2].static_bytes, q.layers[2].static_bytes / 3);
  EXPECT_GT(p.layers[2].static_bytes, q.layers[2].static_bytes / 4);
  TrainingSetup cp = s;
  cp.cp = 2;
  cp.dp = 4;
  const Result<Problem> refused = BuildProblem(m, H100(), cp);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("--cp 2: context parallelism of the model's Mamba-2 layers"),
            std::string::npos)
      << refused.error().message;
  TrainingSetup tp = s;
  tp.tp = 16;
  tp.sequence_parallel = true;
  const Result<Problem> groups = BuildProblem(m, H100(), tp);
  ASSERT_FALSE(groups.ok());
  EXPECT_NE(groups.error().message.find("--tp 16 does not divide"), std::string::npos) << groups.error().message;
}

}  // namespace
}  // namespace bmpipe
