// The op decomposition against Korthikanti et al. (2022) Table 2 and the 22B layer measurement
// (FACTS.md), and recomputation options as op subsets.
#include "bmpipe/cost/layer_ops.h"

#include <algorithm>
#include <map>
#include <string>

#include <gtest/gtest.h>

namespace bmpipe {
namespace {

// A GPT layer as in the paper: LayerNorm, GELU MLP of 4h, dropout, full multi-head attention.
ModelSpec Gpt(int layers, int hidden, int heads) {
  ModelSpec m;
  m.name = "gpt";
  m.family = "gpt";
  m.layers = layers;
  m.hidden = hidden;
  m.ffn = 4 * hidden;
  m.vocab = 51200;
  m.heads = heads;
  m.kv_heads = heads;
  m.head_dim = hidden / heads;
  m.v_head_dim = hidden / heads;
  m.mlp = MlpKind::kGelu;
  m.norm = NormKind::kLayerNorm;
  m.tied_embeddings = true;
  m.learned_positions = 2048;
  m.qkv_bias = m.linear_bias = true;
  m.dropout = true;
  return m;
}

TrainingSetup TrainingOf(int tp, int mbs, int seq, bool sp) {
  TrainingSetup s;
  s.tp = tp;
  s.micro_batch_size = mbs;
  s.global_batch_size = mbs;
  s.seq = seq;
  s.sequence_parallel = sp;
  return s;
}

const DeviceSpec& A100() {
  static const DeviceSpec d = DevicePreset("a100-80gb").value();
  return d;
}

double Saved(const ModelSpec& m, const TrainingSetup& s, const std::string& option) {
  return EvaluateOption(DecoderLayerGraph(m, A100(), s, false), option).saved_bytes;
}

struct PaperConfig {
  const char* name;
  int layers, hidden, heads, tp;
};

// Table 2, every row, for the paper's four models (s = 2048, b = 1 and 4).
TEST(LayerOps, ReproducesKorthikantiTable2) {
  for (const PaperConfig& c : {PaperConfig{"22B", 48, 6144, 64, 8}, PaperConfig{"175B", 96, 12288, 96, 8},
                               PaperConfig{"530B", 105, 20480, 128, 8}, PaperConfig{"1T", 128, 25600, 160, 8}}) {
    for (int b : {1, 4}) {
      SCOPED_TRACE(std::string(c.name) + " b=" + std::to_string(b));
      const ModelSpec m = Gpt(c.layers, c.hidden, c.heads);
      const double s = 2048, h = c.hidden, a = c.heads, t = c.tp;
      const double sbh = s * b * h;
      EXPECT_DOUBLE_EQ(Saved(m, TrainingOf(1, b, 2048, false), "none"), sbh * (34 + 5 * a * s / h));
      EXPECT_DOUBLE_EQ(Saved(m, TrainingOf(c.tp, b, 2048, false), "none"), sbh * (10 + 24 / t + 5 * a * s / (h * t)));
      EXPECT_DOUBLE_EQ(Saved(m, TrainingOf(c.tp, b, 2048, true), "none"), sbh / t * (34 + 5 * a * s / h));
      EXPECT_DOUBLE_EQ(Saved(m, TrainingOf(c.tp, b, 2048, false), "selective"), sbh * (10 + 24 / t));
      EXPECT_DOUBLE_EQ(Saved(m, TrainingOf(c.tp, b, 2048, true), "selective"), 34 * sbh / t);
      EXPECT_DOUBLE_EQ(Saved(m, TrainingOf(c.tp, b, 2048, false), "full"), 2 * sbh);
      EXPECT_DOUBLE_EQ(Saved(m, TrainingOf(c.tp, b, 2048, true), "full"), 2 * sbh / t);
    }
  }
}

// Megatron's generalization for any FFN size f (SP + selective): sbh (18 + 4f/h) / t.
TEST(LayerOps, SelectiveWithAnyFfnSize) {
  ModelSpec m = Gpt(32, 4096, 32);
  m.ffn = 11008;
  const double sbh = 2048.0 * 2 * 4096;
  EXPECT_DOUBLE_EQ(Saved(m, TrainingOf(4, 2, 2048, true), "selective"), sbh * (18 + 4.0 * 11008 / 4096) / 4);
}

// Flash attention removes the 5as/h term (keeping a 4-byte log-sum-exp per head and token).
TEST(LayerOps, FlashAttentionRemovesTheScoreTerm) {
  const ModelSpec m = Gpt(48, 6144, 64);
  TrainingSetup s = TrainingOf(8, 4, 2048, true);
  s.flash_attention = true;
  const double sbh = 2048.0 * 4 * 6144;
  EXPECT_DOUBLE_EQ(Saved(m, s, "none"), 34 * sbh / 8 + 2048.0 * 4 * 64 * 4 / 8);
}

// The forward time of the ops of `graph` in recomputation group `group` (every op for "full").
double GroupForward(const LayerGraph& graph, const std::string& group) {
  double seconds = 0;
  for (const LayerOp& op : graph.ops) {
    const bool in = group == "full" || std::find(op.groups.begin(), op.groups.end(), group) != op.groups.end();
    if (in) seconds += op.forward_s;
  }
  return seconds;
}

// Options are op subsets: each saves no more than none and costs no less; an option's
// recomputation time is the forward time of the ops it reruns, full's the whole forward; unions
// combine.
TEST(LayerOps, OptionsAreOpSubsets) {
  const ModelSpec m = Gpt(48, 6144, 64);
  const LayerGraph g = DecoderLayerGraph(m, A100(), TrainingOf(8, 4, 2048, false), false);
  const OptionCost none = EvaluateOption(g, "none");
  EXPECT_EQ(none.recompute_s, 0);
  const OptionCost full = EvaluateOption(g, "full");
  EXPECT_GT(full.recompute_s, 0);
  // The group each basic option reruns (recompute.h); a GPT layer has no latent attention, so
  // mla_up_proj reruns nothing.
  const std::map<std::string, std::string> group = {{"selective", "core_attn"}, {"attn", "attn"}, {"mlp", "mlp"},
                                                    {"mlp_act", "mlp_act"},      {"norm", "norm"}, {"full", "full"}};
  for (const std::string& name : RecomputeOptionNames()) {
    if (name == "offload") continue;  // not a recomputation (OffloadMovesActivationsToTheHost)
    const OptionCost c = EvaluateOption(g, name);
    EXPECT_LE(c.saved_bytes, none.saved_bytes) << name;
    EXPECT_EQ(c.forward_s, none.forward_s) << name;
    EXPECT_LE(c.recompute_s, full.recompute_s) << name;
    if (name == "none" || name == "mla_up_proj") {
      EXPECT_EQ(c.recompute_s, 0) << name;
      EXPECT_EQ(c.saved_bytes, none.saved_bytes) << name;
      continue;
    }
    // Something is rerun, and less than the whole layer unless the option is full. Each saves
    // memory but mlp_act: the activation's output, which fc2 saves, is kept (only the norm and
    // mla_up_proj groups discard their outputs), so it saves nothing on this layer.
    EXPECT_GT(c.recompute_s, 0) << name;
    if (name != "mlp_act") {
      EXPECT_LT(c.saved_bytes, none.saved_bytes) << name;
    }
    if (name != "full") {
      EXPECT_LT(c.recompute_s, full.recompute_s) << name;
    }
    EXPECT_DOUBLE_EQ(c.recompute_s, GroupForward(g, group.at(name))) << name;
  }
  EXPECT_DOUBLE_EQ(full.recompute_s, full.forward_s);
  const OptionCost attn = EvaluateOption(g, "attn"), mlp = EvaluateOption(g, "mlp");
  EXPECT_NEAR(attn.recompute_s + mlp.recompute_s, full.recompute_s, 1e-12);
  // A block covers its kernel or activation; unions of disjoint groups add up.
  const OptionCost selective = EvaluateOption(g, "selective"), mlp_act = EvaluateOption(g, "mlp_act");
  const OptionCost norm = EvaluateOption(g, "norm");
  EXPECT_LT(selective.recompute_s, attn.recompute_s);
  EXPECT_LT(mlp_act.recompute_s, mlp.recompute_s);
  EXPECT_NEAR(EvaluateOption(g, "selective+mlp").recompute_s, selective.recompute_s + mlp.recompute_s, 1e-12);
  EXPECT_NEAR(EvaluateOption(g, "selective+norm").recompute_s, selective.recompute_s + norm.recompute_s, 1e-12);
  EXPECT_NEAR(EvaluateOption(g, "mlp_act+norm").recompute_s, mlp_act.recompute_s + norm.recompute_s, 1e-12);
  EXPECT_DOUBLE_EQ(EvaluateOption(g, "attn+selective").recompute_s, attn.recompute_s);
  // norm: the two norm outputs (2sbh each, not split without sequence parallelism) are dropped.
  EXPECT_DOUBLE_EQ(none.saved_bytes - EvaluateOption(g, "norm").saved_bytes, 4 * 2048.0 * 4 * 6144);
  const OptionCost both = EvaluateOption(g, "selective+norm");
  EXPECT_DOUBLE_EQ(both.saved_bytes, EvaluateOption(g, "selective").saved_bytes - 4 * 2048.0 * 4 * 6144);
  EXPECT_FALSE(ParseRecompute("selectve").ok());
  EXPECT_NE(ParseRecompute("selectve").error().message.find("did you mean 'selective'"), std::string::npos);
}

// FACTS.md: GPT-22B on A100-80GB, TP 8, b 4, s 2048, per layer: forward 7.7 ms, backward 11.9 ms;
// full recompute +39 %, selective +7 % (Korthikanti et al. Table 4). Within 15 % with the default
// efficiencies.
TEST(LayerOps, Predicts22BLayerTimesWithin15Percent) {
  const ModelSpec m = Gpt(48, 6144, 64);
  const LayerGraph g = DecoderLayerGraph(m, A100(), TrainingOf(8, 4, 2048, false), false);
  const OptionCost none = EvaluateOption(g, "none");
  const OptionCost full = EvaluateOption(g, "full");
  const OptionCost selective = EvaluateOption(g, "selective");
  const double total = none.forward_s + none.backward_s;
  std::printf("22B layer: forward %.2f ms, backward %.2f ms, full +%.1f %%, selective +%.1f %%\n",
              1e3 * none.forward_s, 1e3 * none.backward_s, 100 * full.recompute_s / total,
              100 * selective.recompute_s / total);
  EXPECT_NEAR(none.forward_s, 7.7e-3, 0.15 * 7.7e-3);
  EXPECT_NEAR(none.backward_s, 11.9e-3, 0.15 * 11.9e-3);
  EXPECT_NEAR(total + full.recompute_s, 27.2e-3, 0.15 * 27.2e-3);
  EXPECT_NEAR(total + selective.recompute_s, 20.9e-3, 0.15 * 20.9e-3);
}

}  // namespace
}  // namespace bmpipe
