// The costs of the frontier setups, term by term: sharded and low-precision state, expert and
// context parallelism, FP8 GEMMs, overlapped tensor-parallel collectives, offloading, headroom.
#include <algorithm>
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "bmpipe/cost/layer_ops.h"
#include "bmpipe/cost/problem_builder.h"

namespace bmpipe {
namespace {

TrainingSetup MakeSetup(int tp, int pp, int dp, int seq) {
  TrainingSetup s;
  s.tp = tp;
  s.pp = pp;
  s.dp = dp;
  s.seq = seq;
  s.global_batch_size = 8 * dp;
  s.sequence_parallel = tp > 1;
  s.flash_attention = true;
  return s;
}

DeviceSpec H100() { return DevicePreset("h100-80gb").value(); }

// The H100 without the host's wait in MoE layers: the exchanges alone on the dispatch.
DeviceSpec H100WithoutHostWait() {
  DeviceSpec d = H100();
  d.efficiency.moe_host_ms = d.efficiency.moe_host_expert_ms = 0;
  return d;
}

Result<Problem> Build(const std::string& model, const TrainingSetup& s, const DeviceSpec& d = H100()) {
  return BuildProblem(ModelPreset(model).value(), d, s);
}

const LayerOp& Op(const LayerGraph& g, const std::string& name) {
  for (const LayerOp& op : g.ops) {
    if (op.name == name) return op;
  }
  ADD_FAILURE() << "no op " << name;
  return g.ops.front();
}

const LayerOption& OptionOf(const Layer& layer, const std::string& name) {
  for (const LayerOption& o : layer.options) {
    if (o.name == name) return o;
  }
  ADD_FAILURE() << "no option " << name;
  return layer.options.front();
}

// Weights (2), gradients (4 or 2) and the optimizer's fp32 master weights and two moments (4 + 8
// or 4 + 4), each sharded over the data-parallel group from its ZeRO stage on.
TEST(SetupCosts, BytesPerParameterFollowTheStageAndTheDtypes) {
  TrainingSetup s = MakeSetup(1, 1, 4, 2048);
  EXPECT_DOUBLE_EQ(BytesPerParameter(s), 18);
  s.zero = 1;
  EXPECT_DOUBLE_EQ(BytesPerParameter(s), 2 + 4 + 12.0 / 4);
  s.zero = 2;
  EXPECT_DOUBLE_EQ(BytesPerParameter(s), 2 + 4.0 / 4 + 12.0 / 4);
  s.zero = 3;
  EXPECT_DOUBLE_EQ(BytesPerParameter(s), 2.0 / 4 + 4.0 / 4 + 12.0 / 4);
  s.zero = 0;
  s.distributed_optimizer = true;  // the old flag is ZeRO-1
  EXPECT_DOUBLE_EQ(BytesPerParameter(s), 6 + 12.0 / 4);
  s.grad_dtype = StateDtype::kBf16;
  s.optimizer_dtype = StateDtype::kBf16;
  EXPECT_DOUBLE_EQ(BytesPerParameter(s), 2 + 2 + 8.0 / 4);
  s.offload_optimizer = true;
  EXPECT_DOUBLE_EQ(BytesPerParameter(s), 2 + 2);
  EXPECT_DOUBLE_EQ(HostBytesPerParameter(s, 4), (4 + 4 + 2) / 4.0);
  // Megatron's offload without the precision-aware optimizer keeps the fp32 master weights on the
  // device; the host holds the same state.
  s.offload_keeps_master = true;
  EXPECT_DOUBLE_EQ(BytesPerParameter(s), 2 + 2 + 4.0 / 4);
  EXPECT_DOUBLE_EQ(HostBytesPerParameter(s, 4), (4 + 4 + 2) / 4.0);
  // Context-parallel ranks share the state too: the data-parallel group is dp x cp.
  TrainingSetup c = MakeSetup(1, 1, 2, 4096);
  c.cp = 2;
  c.zero = 1;
  EXPECT_DOUBLE_EQ(BytesPerParameter(c), 6 + 12.0 / 4);
}

// Nemotron-4 340B's NeMo setup keeps bf16 gradients and optimizer moments: 2 + 2 + (4 + 4) / dp.
TEST(SetupCosts, LowPrecisionStateShrinksStaticMemory) {
  TrainingSetup s = MakeSetup(8, 4, 2, 4096);
  s.distributed_optimizer = true;
  const Problem fp32 = Build("llama3-70b", s).value();
  s.grad_dtype = StateDtype::kBf16;
  s.optimizer_dtype = StateDtype::kBf16;
  const Problem bf16 = Build("llama3-70b", s).value();
  const double parameters = static_cast<double>(CountParameters(ModelPreset("llama3-70b").value()).dense_layer) / 8;
  EXPECT_NEAR(static_cast<double>(fp32.layers[1].static_bytes), parameters * (6 + 12.0 / 2), 2);
  EXPECT_NEAR(static_cast<double>(bf16.layers[1].static_bytes), parameters * (4 + 8.0 / 2), 2);
}

// Routed experts split over ep x etp; their state shards over the expert data-parallel group,
// the rest of the layer's over dp x cp.
TEST(SetupCosts, ExpertParallelismShardsTheExperts) {
  const ModelSpec m = ModelPreset("mixtral-8x7b").value();
  TrainingSetup s = MakeSetup(1, 4, 8, 4096);
  s.distributed_optimizer = true;
  s.ep = 8;
  const Problem p = Build("mixtral-8x7b", s).value();
  const double routed = 8.0 * 3 * 4096 * 14336;
  const double rest = static_cast<double>(CountParameters(m).moe_layer) - routed;
  // Expert data parallelism: tp x cp x dp / (ep x etp) = 1, so the experts' state is unsharded.
  EXPECT_EQ(ExpertDataParallel(s), 1);
  EXPECT_NEAR(static_cast<double>(p.layers[1].static_bytes), rest * (6 + 12.0 / 8) + routed / 8 * 18, 2);
  s.ep = 1;
  const Problem unsharded = Build("mixtral-8x7b", s).value();
  EXPECT_NEAR(static_cast<double>(unsharded.layers[1].static_bytes), (rest + routed) * (6 + 12.0 / 8), 2);
}

// Dispatch and combine are all-to-alls over the expert-parallel group: on NVLink inside a node,
// on the network beyond it, each member keeping its own share.
TEST(SetupCosts, ExpertAllToAllUsesTheGroupsLinks) {
  const ModelSpec m = ModelPreset("mixtral-8x7b").value();
  const DeviceSpec d = H100WithoutHostWait();
  TrainingSetup s = MakeSetup(1, 1, 16, 4096);
  s.ep = 8;
  s.moe_routing = MoeRouting::kBalanced;  // every member sends its even share
  const LayerGraph inside = DecoderLayerGraph(m, d, s, /*moe=*/true);
  const double routed_bytes = 4096.0 * 2 * 4096 * 2;  // T x top-2 tokens x h x 2 bytes
  const double intra = d.intra_node_bandwidth_bytes_per_s * d.efficiency.link;
  const double inter = d.inter_node_bandwidth_bytes_per_s * d.efficiency.link;
  EXPECT_NEAR(Op(inside, "dispatch").forward_comm_s, routed_bytes * 7 / 8 / intra + d.intra_node_latency_s, 1e-12);
  EXPECT_DOUBLE_EQ(Op(inside, "combine").forward_comm_s, Op(inside, "dispatch").forward_comm_s);
  s.ep = 16;
  const LayerGraph across = DecoderLayerGraph(m, d, s, /*moe=*/true);
  EXPECT_NEAR(Op(across, "dispatch").forward_comm_s,
              std::max(routed_bytes * 7 / 16 / intra, routed_bytes * 8 / 16 / inter) + d.inter_node_latency_s, 1e-12);
  // Without expert parallelism there is nothing to exchange.
  s.ep = 1;
  EXPECT_EQ(Op(DecoderLayerGraph(m, d, s, true), "dispatch").forward_comm_s, 0);
}

// The flex dispatcher sends a token once to each other node holding one of its experts: Mixtral's
// top-2 of 8 experts over two nodes of 4 experts each reaches the other node with probability
// 1 - C(4, 2) / C(8, 2) = 1 - 6/28, against the all-to-all's one copy in two for each routed copy.
// An overlap fraction hides that part of the exchange; dense models refuse both settings.
TEST(SetupCosts, FlexDispatchSendsATokenOncePerNode) {
  const ModelSpec m = ModelPreset("mixtral-8x7b").value();
  const DeviceSpec d = H100WithoutHostWait();
  TrainingSetup s = MakeSetup(1, 1, 16, 4096);
  s.ep = 8;
  s.etp = 2;  // ep x etp = 16 spans two nodes: 4 expert-parallel members a node
  s.moe_dispatcher = MoeDispatcher::kFlex;
  s.moe_routing = MoeRouting::kBalanced;
  const double routed_bytes = 4096.0 * 2 * 4096 * 2;
  const double intra = d.intra_node_bandwidth_bytes_per_s * d.efficiency.link;
  const double inter = d.inter_node_bandwidth_bytes_per_s * d.efficiency.link;
  const double flex = std::max(routed_bytes * 3 / 4 / intra, routed_bytes / 2 * (1 - 6.0 / 28) / inter) +
                      d.inter_node_latency_s;
  EXPECT_NEAR(Op(DecoderLayerGraph(m, d, s, true), "dispatch").forward_comm_s, flex, 1e-12);
  s.moe_dispatcher = MoeDispatcher::kAllToAll;
  EXPECT_NEAR(Op(DecoderLayerGraph(m, d, s, true), "dispatch").forward_comm_s,
              std::max(routed_bytes * 3 / 8 / intra, routed_bytes * 4 / 8 / inter) + d.inter_node_latency_s, 1e-12);
  s.moe_dispatcher = MoeDispatcher::kFlex;
  s.ep_comm_overlap = 0.75;
  EXPECT_NEAR(Op(DecoderLayerGraph(m, d, s, true), "combine").backward_comm_s, 0.25 * flex, 1e-12);
  TrainingSetup dense = MakeSetup(1, 1, 8, 4096);
  dense.moe_dispatcher = MoeDispatcher::kFlex;
  const Result<Problem> refused = Build("llama3-8b", dense);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("--moe-dispatcher"), std::string::npos) << refused.error().message;
  dense = MakeSetup(1, 1, 8, 4096);
  dense.ep_comm_overlap = 1.5;
  ASSERT_FALSE(Build("llama3-8b", dense).ok());
}

// Dropless routing runs at the busiest expert-parallel rank's load: 1.2 x the even share with a
// learned router (the default), the even share forced balanced, or as --moe-imbalance says; a
// capacity factor caps it.
TEST(SetupCosts, ImbalanceAndCapacityScaleTheExpertGemms) {
  const ModelSpec m = ModelPreset("mixtral-8x7b").value();
  TrainingSetup s = MakeSetup(1, 1, 8, 4096);
  s.ep = 8;
  const LayerGraph natural = DecoderLayerGraph(m, H100(), s, true);
  s.moe_routing = MoeRouting::kBalanced;
  const LayerGraph balanced = DecoderLayerGraph(m, H100(), s, true);
  const double even = Op(balanced, "experts.fc1").forward_flops;
  EXPECT_DOUBLE_EQ(Op(natural, "experts.fc1").forward_flops, kNaturalRoutingImbalance * even);
  EXPECT_DOUBLE_EQ(Op(natural, "dispatch").forward_comm_s - Op(balanced, "dispatch").forward_comm_s,
                   (kNaturalRoutingImbalance - 1) * (Op(balanced, "dispatch").forward_comm_s -
                                                     H100().intra_node_latency_s -
                                                     H100().efficiency.moe_host_ms * 1e-3 -
                                                     H100().efficiency.moe_host_expert_ms * 1e-3));
  s.moe_imbalance = 1.5;
  EXPECT_DOUBLE_EQ(Op(DecoderLayerGraph(m, H100(), s, true), "experts.fc1").forward_flops, 1.5 * even);
  s.moe_capacity_factor = 1.25;  // a capacity factor replaces the imbalance
  EXPECT_DOUBLE_EQ(Op(DecoderLayerGraph(m, H100(), s, true), "experts.fc1").forward_flops, 1.25 * even);
}

// Expert tensor parallelism: each etp rank runs 1/etp of the gathered tokens' expert GEMMs.
TEST(SetupCosts, ExpertTensorParallelismGathersTheTokens) {
  const ModelSpec m = ModelPreset("mixtral-8x7b").value();
  TrainingSetup s = MakeSetup(4, 1, 2, 4096);
  s.ep = 2;
  s.etp = 1;
  const LayerGraph no_etp = DecoderLayerGraph(m, H100(), s, true);
  EXPECT_EQ(Op(no_etp, "experts.fc1").forward_comm_s, 0);
  s.etp = 4;
  const LayerGraph etp = DecoderLayerGraph(m, H100(), s, true);
  EXPECT_DOUBLE_EQ(Op(etp, "experts.fc1").forward_flops, Op(no_etp, "experts.fc1").forward_flops);
  EXPECT_GT(Op(etp, "experts.fc1").forward_comm_s, 0);
  const Result<Problem> p = Build("mixtral-8x7b", s);
  ASSERT_TRUE(p.ok()) << p.error().message;
}

// Context parallelism splits every activation; ring attention's exchange hides behind the kernel.
TEST(SetupCosts, ContextParallelismSplitsTheSequence) {
  const ModelSpec m = ModelPreset("llama3-8b").value();
  const DeviceSpec d = H100();
  TrainingSetup s = MakeSetup(2, 1, 1, 32768);
  const LayerGraph one = DecoderLayerGraph(m, d, s, false);
  s.cp = 4;
  const LayerGraph four = DecoderLayerGraph(m, d, s, false);
  const OptionCost a = EvaluateOption(one, "none"), b = EvaluateOption(four, "none");
  EXPECT_NEAR(b.saved_bytes, a.saved_bytes / 4, 1e-6 * a.saved_bytes);
  EXPECT_NEAR(Op(four, "qkv").forward_flops, Op(one, "qkv").forward_flops / 4, 1);
  // The causal kernel's work on this rank's quarter of the queries: a quarter of the whole.
  const LayerOp& attention = Op(four, "flash_attention");
  EXPECT_NEAR(attention.forward_flops, Op(one, "flash_attention").forward_flops / 4, 1);
  // Keys and values (8 kv heads x 128, over tp 2) pass the 3 other ranks of the ring.
  const double kv_bytes = 2 * (32768.0 / 4) * (8 * 128 / 2) * 2;
  const double link = d.intra_node_bandwidth_bytes_per_s * d.efficiency.link;
  EXPECT_NEAR(attention.hidden_forward_comm_s, 3 * (kv_bytes / link + d.intra_node_latency_s), 1e-12);
  EXPECT_DOUBLE_EQ(attention.hidden_backward_comm_s, 2 * attention.hidden_forward_comm_s);
  const double compute = attention.forward_flops / (d.peak_flops * d.efficiency.attention);
  EXPECT_NEAR(attention.forward_s, std::max(compute, attention.hidden_forward_comm_s), 1e-12);
}

// With a window, the busiest rank of the load-balanced layout (rank r: chunks r and 2cp-1-r of
// c = s/2cp tokens) sets the kernel's work; the ring still makes all cp - 1 hops.
TEST(SetupCosts, ContextParallelismWithAWindow) {
  ModelSpec m = ModelPreset("llama3-8b").value();
  m.sliding_window = 4096;
  m.windowed_layers = WindowedLayers(m.layers, 0);
  const DeviceSpec d = H100();
  TrainingSetup s = MakeSetup(2, 1, 1, 32768);
  s.cp = 4;  // c = 4096 tokens, 8192 queries per rank
  const double per_key = 2 * 8192.0 * 32 * (128 + 128) / 2;  // 2 T a (d + d_v) / t
  // w = c: ranks 1 to 3 see the whole window for every query (the average over the sequence
  // would be w - w^2/2s = 3840).
  const LayerGraph narrow = DecoderLayerGraph(m, d, s, false, /*windowed=*/true);
  EXPECT_DOUBLE_EQ(Op(narrow, "flash_attention").forward_flops, per_key * 4096);
  // w = 4c: rank 3 (chunks 3 and 4, queries 12288..20479) sees (K(16384) - K(12288) + 4096 w) /
  // 8192 = 15360 keys per query, K(n) = n^2/2 up to w (the average: 12288).
  m.sliding_window = 16384;
  const LayerGraph wide = DecoderLayerGraph(m, d, s, false, /*windowed=*/true);
  EXPECT_DOUBLE_EQ(Op(wide, "flash_attention").forward_flops, per_key * 15360);
  // The ring passes every rank's keys and values, as without the window.
  const LayerGraph full = DecoderLayerGraph(m, d, s, false, /*windowed=*/false);
  EXPECT_DOUBLE_EQ(Op(full, "flash_attention").forward_flops, per_key * 16384);
  EXPECT_DOUBLE_EQ(Op(narrow, "flash_attention").hidden_forward_comm_s, Op(full, "flash_attention").hidden_forward_comm_s);
  // Without context parallelism the window's average holds: w - w^2/2s.
  s.cp = 1;
  const double per_key_one = 2 * 32768.0 * 32 * (128 + 128) / 2;
  EXPECT_DOUBLE_EQ(Op(DecoderLayerGraph(m, d, s, false, true), "flash_attention").forward_flops,
                   per_key_one * (16384 - 16384.0 * 16384 / (2 * 32768)));
}

// FP8: the linear layers run at the FP8 peak, their saved inputs take half, and Transformer
// Engine's weight caches add 2 bytes per parameter.
TEST(SetupCosts, Fp8GemmsAndTheirMemory) {
  const ModelSpec m = ModelPreset("llama3-8b").value();
  const DeviceSpec d = H100();
  TrainingSetup s = MakeSetup(1, 1, 1, 4096);
  const LayerGraph bf16 = DecoderLayerGraph(m, d, s, false);
  s.precision = Precision::kFp8;
  const LayerGraph fp8 = DecoderLayerGraph(m, d, s, false);
  const LayerOp& fc1 = Op(fp8, "fc1");
  EXPECT_TRUE(fc1.fp8);
  EXPECT_NEAR(fc1.forward_s, fc1.forward_flops / (d.peak_fp8_flops * d.efficiency.fp8_gemm), 1e-12);
  EXPECT_FALSE(Op(fp8, "flash_attention").fp8);
  EXPECT_LT(EvaluateOption(fp8, "none").saved_bytes, EvaluateOption(bf16, "none").saved_bytes);
  // The MLP's input (norm2's output) is saved only by fc1: half its bytes.
  EXPECT_LT(EvaluateOption(fp8, "none").forward_s, EvaluateOption(bf16, "none").forward_s);
  const double parameters = static_cast<double>(CountParameters(m).dense_layer);
  TrainingSetup b = MakeSetup(1, 1, 1, 4096);
  const Problem pb = Build("llama3-8b", b).value();
  b.precision = Precision::kFp8;
  const Problem pf = Build("llama3-8b", b).value();
  EXPECT_NEAR(static_cast<double>(pf.layers[1].static_bytes - pb.layers[1].static_bytes), 2 * parameters, 2);
  // A device without FP8 units refuses it.
  const Result<Problem> a100 = Build("llama3-8b", b, DevicePreset("a100-80gb").value());
  ASSERT_FALSE(a100.ok());
  EXPECT_NE(a100.error().message.find("FP8"), std::string::npos) << a100.error().message;
}

// MXFP8 (Blackwell's block scaling): the FP8 GEMMs' rate, and every FP8 tensor or weight copy
// 1/32 bigger (a one-byte scale per 32 elements); refused on a device without MX formats.
TEST(SetupCosts, MxFp8IsFp8WithBlockScales) {
  const ModelSpec m = ModelPreset("llama3-8b").value();
  const DeviceSpec d = DevicePreset("b200-180gb").value();
  TrainingSetup s = MakeSetup(1, 1, 8, 4096);
  s.distributed_optimizer = true;
  s.precision = Precision::kFp8;
  const LayerGraph fp8 = DecoderLayerGraph(m, d, s, false);
  const Problem fp8_problem = Build("llama3-8b", s, d).value();
  s.precision = Precision::kMxFp8;
  const LayerGraph mx = DecoderLayerGraph(m, d, s, false);
  const Problem mx_problem = Build("llama3-8b", s, d).value();
  EXPECT_DOUBLE_EQ(Op(mx, "fc1").forward_s, Op(fp8, "fc1").forward_s);
  EXPECT_DOUBLE_EQ(EvaluateOption(mx, "none").forward_s, EvaluateOption(fp8, "none").forward_s);
  // The MLP's input is saved by fc1 alone: in FP8 half its 16-bit bytes, in MXFP8 33/32 of that.
  const double fp8_saved = EvaluateOption(fp8, "none").saved_bytes;
  const double mx_saved = EvaluateOption(mx, "none").saved_bytes;
  EXPECT_GT(mx_saved, fp8_saved);
  EXPECT_LT(mx_saved, fp8_saved * 33 / 32);
  // The weight and its transpose: 2 x 1/32 bytes a parameter more.
  const double parameters = static_cast<double>(CountParameters(m).dense_layer);
  EXPECT_NEAR(static_cast<double>(mx_problem.layers[1].static_bytes - fp8_problem.layers[1].static_bytes),
              parameters / 16, 2);
  EXPECT_EQ(mx_problem.training->precision, "mxfp8");
  const Result<Problem> hopper = Build("llama3-8b", s);
  ASSERT_FALSE(hopper.ok());
  EXPECT_NE(hopper.error().message.find("--precision mxfp8: the device 'h100-80gb' has no block-scaled (MX) tensor "
                                        "cores"),
            std::string::npos)
      << hopper.error().message;
}

// NVFP4: the quantized GEMMs at the FP4 peak x fp4_gemm (attention stays 16-bit), the saved GEMM
// inputs and the weight copies at 0.5625 bytes an element (a half byte and a one-byte scale per
// 16); FP4 weights replace the 16-bit copy; refused without FP4 tensor cores.
TEST(SetupCosts, NvFp4GemmsAtTheFp4Peak) {
  const ModelSpec m = ModelPreset("llama3-8b").value();
  const DeviceSpec d = DevicePreset("gb200").value();
  ASSERT_DOUBLE_EQ(d.peak_fp4_flops, 2 * d.peak_fp8_flops);  // Blackwell: FP4 twice FP8
  TrainingSetup s = MakeSetup(1, 1, 8, 4096);
  s.distributed_optimizer = true;
  s.flash_attention = true;
  s.precision = Precision::kFp8;
  const LayerGraph fp8 = DecoderLayerGraph(m, d, s, false);
  const Problem fp8_problem = Build("llama3-8b", s, d).value();
  s.precision = Precision::kNvFp4;
  const LayerGraph fp4 = DecoderLayerGraph(m, d, s, false);
  const Problem fp4_problem = Build("llama3-8b", s, d).value();
  const LayerOp& fc1 = Op(fp4, "fc1");
  EXPECT_DOUBLE_EQ(fc1.forward_s, std::max(fc1.forward_flops / (d.peak_fp4_flops * d.efficiency.fp4_gemm),
                                           fc1.forward_bytes / (d.memory_bandwidth_bytes_per_s * d.efficiency.memory)));
  EXPECT_LT(Op(fp4, "fc1").forward_s, Op(fp8, "fc1").forward_s);
  EXPECT_DOUBLE_EQ(Op(fp4, "flash_attention").forward_s, Op(fp8, "flash_attention").forward_s);
  // The MLP's input, saved by fc1 alone: 0.5625 of FP8's byte.
  const double fp8_saved = EvaluateOption(fp8, "none").saved_bytes;
  const double fp4_saved = EvaluateOption(fp4, "none").saved_bytes;
  EXPECT_LT(fp4_saved, fp8_saved);
  // The weight's two FP4 copies: 2 x (1 - 0.5625) bytes a parameter fewer than FP8's.
  const double parameters = static_cast<double>(CountParameters(m).dense_layer);
  EXPECT_NEAR(static_cast<double>(fp8_problem.layers[1].static_bytes - fp4_problem.layers[1].static_bytes),
              2 * 0.4375 * parameters, 2);
  EXPECT_EQ(fp4_problem.training->precision, "nvfp4");
  s.fp8_params = true;
  const Problem weights = Build("llama3-8b", s, d).value();
  EXPECT_NEAR(static_cast<double>(fp4_problem.layers[1].static_bytes - weights.layers[1].static_bytes),
              2 * parameters, 2);
  s.fp8_params = false;
  const Result<Problem> hopper = Build("llama3-8b", s);
  ASSERT_FALSE(hopper.ok());
  EXPECT_NE(hopper.error().message.find("--precision nvfp4: the device 'h100-80gb' has no FP4 tensor cores"),
            std::string::npos)
      << hopper.error().message;
}

// FP8 weights (--fp8-params): no caches beside a 16-bit copy, and the ZeRO-1 parameter all-gather
// moves 1 byte per parameter instead of 2; refused without FP8 GEMMs or a distributed optimizer.
TEST(SetupCosts, Fp8WeightsReplaceTheCaches) {
  const double parameters = static_cast<double>(CountParameters(ModelPreset("llama3-8b").value()).dense_layer);
  TrainingSetup s = MakeSetup(1, 1, 8, 4096);
  s.distributed_optimizer = true;
  const Problem bf16 = Build("llama3-8b", s).value();
  s.precision = Precision::kFp8;
  const Problem fp8 = Build("llama3-8b", s).value();
  s.fp8_params = true;
  const Problem weights = Build("llama3-8b", s).value();
  EXPECT_EQ(weights.layers[1].static_bytes, bf16.layers[1].static_bytes);
  EXPECT_NEAR(static_cast<double>(fp8.layers[1].static_bytes - weights.layers[1].static_bytes), 2 * parameters, 2);
  // The update: the gradient reduce-scatter (4 bytes) and the parameter all-gather (2, or 1) plus
  // the step, the same in both.
  EXPECT_LT(weights.layers[1].update_ns, fp8.layers[1].update_ns);
  EXPECT_EQ(weights.layers[0].update_ns, fp8.layers[0].update_ns);  // the embedding stays 16-bit
  EXPECT_TRUE(weights.training->fp8_params);
  s.precision = Precision::kBf16;
  Result<Problem> refused = Build("llama3-8b", s);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("add --precision fp8"), std::string::npos) << refused.error().message;
  s.precision = Precision::kFp8;
  s.distributed_optimizer = false;
  refused = Build("llama3-8b", s);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("add --distributed-optimizer"), std::string::npos) << refused.error().message;
}

// Without the transpose cache (--no-fp8-transpose-cache) an FP8 weight takes a byte less, with or
// without FP8 weights, and each backward transposes it again; refused without FP8 and with ZeRO-3.
TEST(SetupCosts, Fp8TransposeCacheOff) {
  const ModelSpec m = ModelPreset("llama3-8b").value();
  const double parameters = static_cast<double>(CountParameters(m).dense_layer);
  TrainingSetup s = MakeSetup(1, 1, 8, 4096);
  s.distributed_optimizer = true;
  s.precision = Precision::kFp8;
  for (const bool weights : {false, true}) {
    s.fp8_params = weights;
    s.no_fp8_transpose_cache = false;
    const Problem cached = Build("llama3-8b", s).value();
    const double cached_backward = Op(DecoderLayerGraph(m, H100(), s, false), "fc1").backward_bytes;
    s.no_fp8_transpose_cache = true;
    const Problem uncached = Build("llama3-8b", s).value();
    EXPECT_NEAR(static_cast<double>(cached.layers[1].static_bytes - uncached.layers[1].static_bytes), parameters, 2);
    EXPECT_EQ(cached.layers[0].static_bytes, uncached.layers[0].static_bytes);  // the embedding is not FP8
    const LayerGraph g = DecoderLayerGraph(m, H100(), s, false);
    EXPECT_NEAR(Op(g, "fc1").backward_bytes - cached_backward, 2.0 * m.hidden * 2 * m.ffn, 1);
    EXPECT_TRUE(uncached.training->no_fp8_transpose_cache);
  }
  s.zero = 3;
  Result<Problem> refused = Build("llama3-8b", s);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("use --zero 2 or less"), std::string::npos) << refused.error().message;
  s.zero = 0;
  s.fp8_params = false;
  s.precision = Precision::kBf16;
  refused = Build("llama3-8b", s);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("add --precision fp8"), std::string::npos) << refused.error().message;
}

// Each pass of a decoder layer with FP8 GEMMs waits fp8_host_ms for the host; a bf16 layer does not.
TEST(SetupCosts, Fp8LayersWaitForTheHost) {
  const ModelSpec m = ModelPreset("llama3-8b").value();
  TrainingSetup s = MakeSetup(1, 1, 8, 4096);
  s.precision = Precision::kFp8;
  DeviceSpec d = H100();
  EXPECT_GT(d.efficiency.fp8_host_ms, 0);
  const OptionCost waits = EvaluateOption(DecoderLayerGraph(m, d, s, false), "none");
  const double host = d.efficiency.fp8_host_ms * 1e-3;
  d.efficiency.fp8_host_ms = 0;
  const OptionCost without = EvaluateOption(DecoderLayerGraph(m, d, s, false), "none");
  EXPECT_NEAR(waits.forward_s - without.forward_s, host, 1e-12);
  EXPECT_NEAR(waits.backward_s - without.backward_s, host, 1e-12);
  s.precision = Precision::kBf16;
  EXPECT_EQ(EvaluateOption(DecoderLayerGraph(m, H100(), s, false), "none").forward_s,
            EvaluateOption(DecoderLayerGraph(m, d, s, false), "none").forward_s);
}

// A fully overlapped tensor-parallel collective costs nothing on the critical path.
TEST(SetupCosts, TensorParallelOverlapHidesTheCollectives) {
  const ModelSpec m = ModelPreset("llama3-8b").value();
  TrainingSetup s = MakeSetup(8, 1, 1, 4096);
  const double exposed = Op(DecoderLayerGraph(m, H100(), s, false), "out_proj").forward_comm_s;
  EXPECT_GT(exposed, 0);
  s.tp_comm_overlap = 0.75;
  EXPECT_NEAR(Op(DecoderLayerGraph(m, H100(), s, false), "out_proj").forward_comm_s, 0.25 * exposed, 1e-15);
  s.tp_comm_overlap = 1;
  EXPECT_EQ(Op(DecoderLayerGraph(m, H100(), s, false), "out_proj").forward_comm_s, 0);
}

// The overlapped part of a collective runs beside the GEMM it feeds or drains: free while the
// GEMM is longer, the difference once it is not.
TEST(SetupCosts, OverlappedCollectivesCostWhatOutlastsTheirGemm) {
  const ModelSpec m = ModelPreset("llama3-70b").value();
  TrainingSetup s = MakeSetup(8, 1, 1, 4096);
  s.tp_comm_overlap = 1;
  const LayerGraph g = DecoderLayerGraph(m, H100(), s, false);
  const DeviceSpec d = H100();
  for (const std::string name : {"qkv", "out_proj", "fc1", "fc2"}) {
    const LayerOp& op = Op(g, name);
    EXPECT_EQ(op.forward_comm_s, 0) << name;
    EXPECT_GT(op.hidden_forward_comm_s, 0) << name;
    const double gemm = std::max(op.forward_flops / (d.peak_flops * d.efficiency.gemm),
                                 op.forward_bytes / (d.memory_bandwidth_bytes_per_s * d.efficiency.memory));
    EXPECT_NEAR(op.forward_s, std::max(gemm, op.hidden_forward_comm_s), 1e-15) << name;
  }
  // Llama-3-70B at TP 8: the attention projections are shorter than their collectives, the MLP's
  // are longer.
  EXPECT_GT(Op(g, "out_proj").forward_s, Op(g, "out_proj").forward_flops / (d.peak_flops * d.efficiency.gemm));
  EXPECT_GT(Op(g, "fc1").forward_flops / (d.peak_flops * d.efficiency.gemm), Op(g, "fc1").hidden_forward_comm_s);
}

// The expert-parallel overlap hides a fraction of the exchanges behind another micro-batch's
// compute of the layer, never more than that compute: on slow links the rest is waited for.
TEST(SetupCosts, OverlappedExpertExchangesCostWhatOutlastsTheLayersCompute) {
  const ModelSpec m = ModelPreset("qwen3-235b-a22b").value();
  TrainingSetup s = MakeSetup(2, 1, 16, 4096);
  s.ep = 32;
  s.etp = 1;
  const auto graph = [&](double overlap, double link) {
    s.ep_comm_overlap = overlap;
    DeviceSpec d = H100WithoutHostWait();
    d.inter_node_bandwidth_bytes_per_s *= link;
    return DecoderLayerGraph(m, d, s, true);
  };
  const auto time = [](const LayerGraph& g) {
    const OptionCost c = EvaluateOption(g, "none");
    return c.forward_s + c.backward_s;
  };
  // Fast links: the overlap hides 80 % of each of the four exchanges (dispatch and combine, both
  // passes).
  const double fast = Op(graph(0, 100), "dispatch").forward_comm_s;
  EXPECT_GT(fast, 0);
  EXPECT_NEAR(time(graph(0, 100)) - time(graph(0.8, 100)), 0.8 * 4 * fast, 1e-12);
  // Slow links: the exchanges outlast the layer's compute, and the overlap saves just that.
  const LayerGraph none = graph(0, 0.05);
  double compute = 0;
  for (const LayerOp& op : none.ops) compute += op.forward_s + op.backward_s - op.forward_comm_s - op.backward_comm_s;
  EXPECT_GT(4 * Op(none, "dispatch").forward_comm_s, compute);
  EXPECT_NEAR(time(none) - time(graph(1, 0.05)), compute, 1e-12);
}

// Each pass of a MoE layer waits moe_host_ms plus moe_host_expert_ms per local expert for the host,
// moe_host_graphed_ms with CUDA graphs of its router; a dense layer does not wait.
TEST(SetupCosts, MoeLayersWaitForTheHost) {
  const ModelSpec m = ModelPreset("qwen3-30b-a3b").value();
  TrainingSetup s = MakeSetup(1, 1, 8, 4096);
  s.ep = 8;
  DeviceSpec d = H100();
  EXPECT_GT(d.efficiency.moe_host_expert_ms, 0);
  EXPECT_GT(d.efficiency.moe_host_graphed_ms, 0);
  const double eager_ms = d.efficiency.moe_host_ms + d.efficiency.moe_host_expert_ms * m.moe.experts / 8;
  const OptionCost eager = EvaluateOption(DecoderLayerGraph(m, d, s, true), "none");
  s.moe_cuda_graphs = true;
  const OptionCost graphed = EvaluateOption(DecoderLayerGraph(m, d, s, true), "none");
  const double saved = (eager_ms - d.efficiency.moe_host_graphed_ms) * 1e-3;
  EXPECT_NEAR(eager.forward_s - graphed.forward_s, saved, 1e-12);
  EXPECT_NEAR(eager.backward_s - graphed.backward_s, saved, 1e-12);
  const double host = d.efficiency.moe_host_graphed_ms * 1e-3;
  d.efficiency.moe_host_graphed_ms = 0;
  const OptionCost without = EvaluateOption(DecoderLayerGraph(m, d, s, true), "none");
  EXPECT_NEAR(graphed.forward_s - without.forward_s, host, 1e-12);
  EXPECT_NEAR(graphed.backward_s - without.backward_s, host, 1e-12);
  const ModelSpec dense = ModelPreset("llama3-8b").value();
  EXPECT_EQ(EvaluateOption(DecoderLayerGraph(dense, H100(), s, false), "none").forward_s,
            EvaluateOption(DecoderLayerGraph(dense, d, s, false), "none").forward_s);
}

// Megatron's mla_up_proj: the up-projections rerun in the backward, and the queries, keys and
// values they make are not kept.
TEST(SetupCosts, LatentUpProjectionRecomputation) {
  const ModelSpec m = ModelPreset("deepseek-v3").value();
  const TrainingSetup s = MakeSetup(2, 1, 1, 4096);
  const LayerGraph g = DecoderLayerGraph(m, H100(), s, true);
  const OptionCost none = EvaluateOption(g, "none"), up = EvaluateOption(g, "mla_up_proj");
  EXPECT_NEAR(up.recompute_s, Op(g, "q_up").forward_s + Op(g, "kv_up").forward_s, 1e-15);
  double qkv = 0;
  for (const int t : Op(g, "q_up").outputs) qkv += g.tensors[t].saved_bytes;
  for (const int t : Op(g, "kv_up").outputs) qkv += g.tensors[t].saved_bytes;
  EXPECT_NEAR(none.saved_bytes - up.saved_bytes, qkv, 1);
  // The whole attention block covers it; a model without latent attention has nothing to rerun.
  EXPECT_EQ(ParseRecompute("attn+mla_up_proj").value(), ParseRecompute("attn").value());
  const LayerGraph llama = DecoderLayerGraph(ModelPreset("llama3-8b").value(), H100(), s, false);
  EXPECT_EQ(EvaluateOption(llama, "mla_up_proj").saved_bytes, EvaluateOption(llama, "none").saved_bytes);
  EXPECT_EQ(EvaluateOption(llama, "mla_up_proj").recompute_s, 0);
}

// Offloading moves what a layer keeps to the host: nothing stays between its passes, the copies
// overlap its compute, and the bytes come back for its backward.
TEST(SetupCosts, OffloadKeepsNothingOnTheDevice) {
  const ModelSpec m = ModelPreset("llama3-8b").value();
  const DeviceSpec d = H100();
  TrainingSetup s = MakeSetup(1, 1, 1, 8192);
  const LayerGraph g = DecoderLayerGraph(m, d, s, false);
  const OptionCost none = EvaluateOption(g, "none"), off = EvaluateOption(g, "offload");
  EXPECT_EQ(off.saved_bytes, 0);
  EXPECT_DOUBLE_EQ(off.peak_extra_bytes, none.peak_extra_bytes + none.saved_bytes);
  const double copy = none.saved_bytes / (d.host_bandwidth_bytes_per_s * d.efficiency.link);
  EXPECT_DOUBLE_EQ(off.forward_s, std::max(none.forward_s, copy));
  EXPECT_DOUBLE_EQ(off.backward_s, std::max(none.backward_s, copy));
  // Offloading what full recomputation keeps (the layer input) costs less to copy.
  const OptionCost full_off = EvaluateOption(g, "full+offload");
  EXPECT_EQ(full_off.saved_bytes, 0);
  EXPECT_GT(full_off.recompute_s, 0);
  // A device without a host link cannot offload.
  DeviceSpec no_host = d;
  no_host.host_bandwidth_bytes_per_s = 0;
  s.recompute = {"none", "offload"};
  const Result<Problem> p = BuildProblem(m, no_host, s);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("host"), std::string::npos) << p.error().message;
}

// With offload modules (megatron-core's fine-grained offloading), an offload option moves only the
// tensors the modules' ops save: core_attn the flash kernel's inputs (its output is also the output
// projection's saved input, which keeps it on the device unless attn_proj goes too: why megatron-core
// refuses attn_proj without core_attn), qkv_linear the layer input and the normed input (the norm
// Transformer Engine fuses into the QKV projection). A recomputed op saves nothing; a MoE layer's
// experts move what their first GEMM saves.
TEST(SetupCosts, OffloadModulesMoveOnlyTheirTensors) {
  const ModelSpec m = ModelPreset("llama3-8b").value();
  const DeviceSpec d = H100();
  TrainingSetup s = MakeSetup(1, 1, 1, 8192);
  s.offload_modules = {"core_attn"};
  const LayerGraph g = DecoderLayerGraph(m, d, s, false);
  const OptionCost none = EvaluateOption(g, "none"), off = EvaluateOption(g, "offload");
  const LayerOp& fa = Op(g, "flash_attention");
  double kernel = 0;
  for (int t : fa.inputs) kernel += g.tensors[t].saved_bytes;
  EXPECT_GT(kernel, 0);
  EXPECT_DOUBLE_EQ(off.host_bytes, kernel);
  EXPECT_DOUBLE_EQ(off.saved_bytes, none.saved_bytes - kernel);
  EXPECT_DOUBLE_EQ(off.peak_extra_bytes, none.peak_extra_bytes + kernel);
  // Recomputing the kernel: its inputs are kept by the recomputation, outside every region.
  EXPECT_EQ(EvaluateOption(g, "selective+offload").host_bytes, 0);
  EXPECT_EQ(EvaluateOption(g, "full+offload").host_bytes, 0);
  // With attn_proj too, the kernel's output goes (its log-sum-exp is below Megatron's least size).
  s.offload_modules = {"core_attn", "attn_proj"};
  const LayerGraph both = DecoderLayerGraph(m, d, s, false);
  EXPECT_DOUBLE_EQ(EvaluateOption(both, "offload").host_bytes, kernel + g.tensors[fa.outputs[0]].saved_bytes);
  EXPECT_LT(g.tensors[fa.outputs[1]].bytes, kMinOffloadedTensorBytes);
  // qkv_linear: the input and the norm's output.
  s.offload_modules = {"qkv_linear"};
  const LayerGraph q = DecoderLayerGraph(m, d, s, false);
  const double moved = g.tensors[Op(q, "norm1").inputs[0]].saved_bytes + q.tensors[Op(q, "qkv").inputs[0]].saved_bytes;
  EXPECT_DOUBLE_EQ(EvaluateOption(q, "offload").host_bytes, moved);
  // Every module together moves less than the option keeps: the dense MLP has no offload region.
  s.offload_modules = {"qkv_linear", "core_attn", "attn_proj", "mlp_norm"};
  const LayerGraph all = DecoderLayerGraph(m, d, s, false);
  EXPECT_LT(EvaluateOption(all, "offload").host_bytes, none.saved_bytes);
  EXPECT_EQ(Op(all, "norm2").offload_module, "");  // fused into the dense MLP's first linear
  // A MoE layer: the experts' first GEMM saves the dispatched tokens.
  const ModelSpec moe = ModelPreset("qwen3-30b-a3b").value();
  s.offload_modules = {"expert_fc1"};
  const LayerGraph e = DecoderLayerGraph(moe, d, s, true);
  EXPECT_EQ(Op(e, "experts.fc1").offload_module, "expert_fc1");
  EXPECT_EQ(Op(e, "norm2").offload_module, "mlp_norm");
  const OptionCost moe_off = EvaluateOption(e, "offload");
  EXPECT_GT(moe_off.host_bytes, 0);
  EXPECT_DOUBLE_EQ(moe_off.saved_bytes + moe_off.host_bytes, EvaluateOption(e, "none").saved_bytes);
  // Without modules: everything the option keeps, as before.
  s.offload_modules.clear();
  EXPECT_DOUBLE_EQ(EvaluateOption(DecoderLayerGraph(m, d, s, false), "offload").host_bytes, none.saved_bytes);
  // The setup rules: modules need offload options, and each must be one bmpipe models.
  s.offload_modules = {"core_attn"};
  s.recompute = {"none"};
  Result<Problem> p = BuildProblem(m, d, s);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("--offload activations"), std::string::npos) << p.error().message;
  s.recompute = {"none", "offload"};
  s.offload_modules = {"attn_norm"};
  p = BuildProblem(m, d, s);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("'attn_norm'"), std::string::npos) << p.error().message;
}

// ZeRO-Offload keeps 16 bytes per updated parameter on the host (fp32 master weight, two fp32
// moments, fp32 gradient); no plan fits when a rank's least share exceeds host memory.
TEST(SetupCosts, OptimizerOffloadMustFitHostMemory) {
  TrainingSetup s = MakeSetup(1, 1, 4, 4096);
  s.zero = 1;
  s.offload_optimizer = true;
  s.recompute = {"none"};
  EXPECT_DOUBLE_EQ(HostBytesPerParameter(s, 4), 16.0 / 4);
  s.zero = 0;
  EXPECT_DOUBLE_EQ(HostBytesPerParameter(s, 4), 16);
  s.zero = 1;
  s.grad_dtype = StateDtype::kBf16;
  s.optimizer_dtype = StateDtype::kBf16;
  EXPECT_DOUBLE_EQ(HostBytesPerParameter(s, 4), (4 + 4 + 2) / 4.0);
  s.grad_dtype = s.optimizer_dtype = StateDtype::kFp32;
  // llama3-70b at tp 1: 70553706496 parameters x 16 / 4 = 282214825984 bytes on one rank, over
  // the h100-80gb's 256 GB per device; two pipeline ranks halve it.
  const Result<Problem> one = Build("llama3-70b", s);
  ASSERT_FALSE(one.ok());
  const std::string& message = one.error().message;
  for (const char* part : {"--offload optimizer", "282214825984", "256000000000", "host_memory_bytes", "--pp"}) {
    EXPECT_NE(message.find(part), std::string::npos) << part << " in " << message;
  }
  s.pp = 2;
  EXPECT_TRUE(Build("llama3-70b", s).ok());
  // A device that does not say its host memory cannot offload.
  DeviceSpec no_host = H100();
  no_host.host_memory_bytes = 0;
  const Result<Problem> unknown = Build("llama3-70b", s, no_host);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("host_memory_bytes"), std::string::npos) << unknown.error().message;
}

// An activation offload option is offered while its host bytes x the first stage's in-flight
// micro-batches x the most decoder layers one rank can hold fit host memory.
TEST(SetupCosts, ActivationOffloadMustFitHostMemory) {
  const ModelSpec m = ModelPreset("llama3-8b").value();
  DeviceSpec d = H100();
  TrainingSetup s = MakeSetup(1, 4, 1, 8192);  // 8 micro-batches
  s.recompute = {"none", "full", "offload", "full+offload"};
  const LayerGraph g = DecoderLayerGraph(m, d, s, false);
  const double host = EvaluateOption(g, "offload").host_bytes;
  EXPECT_EQ(host, EvaluateOption(g, "none").saved_bytes);
  // 1F1B: the first stage holds min(pp, m) = 4 micro-batches. A rank holds at most 34 - 3 = 31
  // layers, and (85520809984 - 5349782323 reserved) / (218112000 x 18) = 20 decoder layers' state.
  const double worst = host * 4 * 20;
  d.host_memory_bytes = static_cast<Bytes>(worst);
  ASSERT_EQ(static_cast<double>(d.host_memory_bytes), worst);
  std::vector<std::string> notes;
  const Problem fits = BuildProblem(m, d, s, &notes).value();
  EXPECT_EQ(fits.layers[1].options.size(), 4u);
  EXPECT_TRUE(notes.empty());
  d.host_memory_bytes -= 1;
  const Problem tight = BuildProblem(m, d, s, &notes).value();
  ASSERT_EQ(tight.layers[1].options.size(), 3u);
  EXPECT_EQ(tight.layers[1].options[2].name, "full+offload");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("option 'offload' of the decoder layers"), std::string::npos) << notes[0];
  // With only offload options left out, nothing remains to plan.
  s.recompute = {"offload"};
  const Result<Problem> none = BuildProblem(m, d, s);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("--recompute"), std::string::npos) << none.error().message;
}

// ZeRO-2 reduce-scatters gradients per micro-batch; ZeRO-3 also gathers parameters (twice) and
// holds a layer's gathered parameters, and the next one's, while it runs.
TEST(SetupCosts, ShardedStateTraffic) {
  TrainingSetup s = MakeSetup(1, 2, 8, 4096);
  s.recompute = {"none"};
  s.zero = 1;
  const Problem one = Build("llama3-8b", s).value();
  s.zero = 2;
  const Problem two = Build("llama3-8b", s).value();
  s.zero = 3;
  const Problem three = Build("llama3-8b", s).value();
  const Layer &l1 = one.layers[1], &l2 = two.layers[1], &l3 = three.layers[1];
  EXPECT_EQ(OptionOf(l2, "none").forward_ns, OptionOf(l1, "none").forward_ns);
  EXPECT_GT(OptionOf(l2, "none").backward_ns, OptionOf(l1, "none").backward_ns);
  EXPECT_GT(OptionOf(l3, "none").forward_ns, OptionOf(l2, "none").forward_ns);
  EXPECT_LT(l2.update_ns, l1.update_ns);  // no end-of-iteration sync left
  const double parameters = static_cast<double>(CountParameters(ModelPreset("llama3-8b").value()).dense_layer);
  EXPECT_NEAR(static_cast<double>(OptionOf(l3, "none").peak_extra_bytes - OptionOf(l2, "none").peak_extra_bytes),
              4 * parameters, 2);
  EXPECT_LT(l3.static_bytes, l2.static_bytes);
  // Ring collectives over the 8 ranks, inside a node: each moves 7/8 of the layer's fp32
  // gradients (reduce-scatter) or 16-bit parameters (all-gather, forward and backward).
  const DeviceSpec d = H100();
  const double link = d.intra_node_bandwidth_bytes_per_s * d.efficiency.link;
  const double scatter_ns = 7.0 / 8 * 4 * parameters / link * 1e9, gather_ns = 7.0 / 8 * 2 * parameters / link * 1e9;
  EXPECT_NEAR(static_cast<double>(OptionOf(l2, "none").backward_ns - OptionOf(l1, "none").backward_ns), scatter_ns, 2);
  EXPECT_NEAR(static_cast<double>(OptionOf(l3, "none").forward_ns - OptionOf(l2, "none").forward_ns), gather_ns, 2);
  EXPECT_NEAR(static_cast<double>(OptionOf(l3, "none").backward_ns - OptionOf(l2, "none").backward_ns), gather_ns, 2);
  // Overlapping the data-parallel traffic hides it.
  s.dp_overlap = 1;
  EXPECT_EQ(OptionOf(Build("llama3-8b", s).value().layers[1], "none").forward_ns, OptionOf(l1, "none").forward_ns);
}

TEST(SetupCosts, HeadroomLowersTheCapacity) {
  TrainingSetup s = MakeSetup(1, 2, 1, 2048);
  const Problem plain = Build("llama3-8b", s).value();
  s.headroom_bytes = Bytes{5} << 30;
  const Problem kept = Build("llama3-8b", s).value();
  EXPECT_EQ(kept.memory_bytes, plain.memory_bytes - (Bytes{5} << 30));
  EXPECT_EQ(kept.reserved_bytes, plain.reserved_bytes);  // peaks count the reserve, not the headroom
  EXPECT_EQ(DeviceMemoryBytes(kept), plain.memory_bytes);
}

// Every rule names the flag and the fix.
TEST(SetupCosts, InvalidCombinationsSayWhatToChange) {
  auto error = [](const std::string& model, const TrainingSetup& s) {
    const Result<Problem> p = Build(model, s);
    return p.ok() ? std::string("(no error)") : p.error().message;
  };
  TrainingSetup s = MakeSetup(1, 1, 2, 4096);
  s.cp = 2;
  s.flash_attention = false;
  EXPECT_NE(error("llama3-8b", s).find("--flash-attn"), std::string::npos) << error("llama3-8b", s);
  s = MakeSetup(1, 1, 2, 4096);
  s.ep = 2;
  EXPECT_NE(error("llama3-8b", s).find("--ep"), std::string::npos) << error("llama3-8b", s);  // no MoE
  s.ep = 3;
  EXPECT_NE(error("mixtral-8x7b", s).find("--ep"), std::string::npos) << error("mixtral-8x7b", s);
  s = MakeSetup(1, 1, 2, 4096);
  s.ep = 8;  // more than tp x cp x dp = 2
  EXPECT_NE(error("mixtral-8x7b", s).find("--ep"), std::string::npos) << error("mixtral-8x7b", s);
  s = MakeSetup(1, 1, 2, 4096);
  s.zero = 4;
  EXPECT_NE(error("llama3-8b", s).find("--zero"), std::string::npos) << error("llama3-8b", s);
  s = MakeSetup(1, 1, 2, 4096);
  s.tp_comm_overlap = 1.5;
  EXPECT_NE(error("llama3-8b", s).find("--tp-comm-overlap"), std::string::npos) << error("llama3-8b", s);
  s = MakeSetup(1, 1, 2, 4096);
  s.moe_imbalance = 0.5;
  EXPECT_NE(error("mixtral-8x7b", s).find("--moe-imbalance"), std::string::npos) << error("mixtral-8x7b", s);
}

}  // namespace
}  // namespace bmpipe
