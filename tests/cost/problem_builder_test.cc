// From a model, a device and a setup to a Problem: sizes, memory terms, validation, and the
// problem file written back.
#include "bmpipe/cost/problem_builder.h"

#include <gtest/gtest.h>

#include "bmpipe/cost/layer_ops.h"
#include "bmpipe/io/problem_json.h"
#include "bmpipe/problem/plan.h"
#include "bmpipe/problem/problem_reader.h"

namespace bmpipe {
namespace {

TrainingSetup Llama8bSetup() {
  TrainingSetup s;
  s.tp = 2;
  s.pp = 4;
  s.dp = 2;
  s.micro_batch_size = 1;
  s.global_batch_size = 64;
  s.seq = 4096;
  return s;
}

Result<Problem> Build(const std::string& model, const TrainingSetup& s, const std::string& device = "h100-80gb") {
  return BuildProblem(ModelPreset(model).value(), DevicePreset(device).value(), s);
}

std::string ErrorOf(const std::string& model, const TrainingSetup& s) {
  const Result<Problem> p = Build(model, s);
  return p.ok() ? "(no error)" : p.error().message;
}

TEST(ProblemBuilder, LayersPipelineAndStaticMemory) {
  const ModelSpec m = ModelPreset("llama3-8b").value();
  const Problem p = Build("llama3-8b", Llama8bSetup()).value();
  ASSERT_EQ(p.num_layers(), 34);
  EXPECT_EQ(p.layers.front().name, "embedding");
  EXPECT_EQ(p.layers[1].name, "decoder");
  EXPECT_EQ(p.layers.back().name, "head");
  EXPECT_EQ(p.pipeline.ranks, 4);
  EXPECT_EQ(p.pipeline.micro_batches, 32);  // 64 / (1 x 2)
  EXPECT_EQ(p.pipeline.schedule, ScheduleKind::kOneFOneB);
  // 18 bytes per parameter, the layer's parameters split over tp = 2.
  const ParameterCounts counts = CountParameters(m);
  EXPECT_EQ(p.layers[1].static_bytes, counts.dense_layer / 2 * 18);
  // Untied head: the padded vocabulary (128256 is a multiple of 256) x h over tp, and the norm.
  EXPECT_EQ(p.layers.back().static_bytes, (128256LL * 4096 / 2 + 4096) * 18);
  EXPECT_EQ(p.layers[1].options.size(), 6u);
  EXPECT_EQ(p.memory_bytes, DevicePreset("h100-80gb").value().memory_bytes);
  EXPECT_EQ(p.reserved_bytes, ReservedBytesDefault(DevicePreset("h100-80gb").value()));
  EXPECT_GT(p.p2p_ns, 0);
  EXPECT_GT(p.layers[1].update_ns, 0);  // gradient sync over dp = 2 and the optimizer step
}

TEST(ProblemBuilder, DistributedOptimizerShardsTheOptimizerState) {
  TrainingSetup s = Llama8bSetup();
  s.distributed_optimizer = true;
  const Problem p = Build("llama3-8b", s).value();
  const ParameterCounts counts = CountParameters(ModelPreset("llama3-8b").value());
  EXPECT_EQ(p.layers[1].static_bytes, counts.dense_layer / 2 * 12);  // 6 + 12/2
}

TEST(ProblemBuilder, TiedHeadKeepsItsOwnCopyOnlyAcrossPipelineRanks) {
  TrainingSetup s;
  s.tp = 8;
  s.global_batch_size = 8;
  s.seq = 2048;
  const Problem one = Build("gpt-22b", s, "a100-80gb").value();
  EXPECT_EQ(one.layers.back().static_bytes, 2 * 6144 * 18);  // the final LayerNorm only
  s.pp = 4;
  const Problem four = Build("gpt-22b", s, "a100-80gb").value();
  EXPECT_EQ(four.layers.back().static_bytes, (51200LL * 6144 / 8 + 2 * 6144) * 18);
}

TEST(ProblemBuilder, InterleavingAndGPipe) {
  TrainingSetup s = Llama8bSetup();
  s.vpp = 2;
  EXPECT_EQ(Build("llama3-8b", s).value().pipeline.schedule, ScheduleKind::kInterleavedOneFOneB);
  s.vpp = 1;
  s.schedule = ScheduleKind::kGPipe;
  EXPECT_EQ(Build("llama3-8b", s).value().pipeline.schedule, ScheduleKind::kGPipe);
}

// The weight-gradient part of a decoder layer's backward: half of every weighted GEMM's backward
// compute, which the ZB paper's Table 1 puts at 24 sbh^2 of (48 sbh^2 + 8 s^2 bh) FLOPs for a GPT
// layer; recomputation leaves it alone, and it is at most every option's backward.
TEST(ProblemBuilder, DecoderLayersSplitTheirBackward) {
  TrainingSetup s = Llama8bSetup();
  s.schedule = ScheduleKind::kZeroBubbleH1;
  const Problem p = Build("llama3-8b", s).value();
  EXPECT_EQ(p.pipeline.schedule, ScheduleKind::kZeroBubbleH1);
  const Layer& decoder = p.layers[1];
  ASSERT_GT(decoder.weight_grad_ns, 0);
  for (const LayerOption& o : decoder.options) EXPECT_LE(decoder.weight_grad_ns, o.backward_ns) << o.name;
  // GEMMs dominate a Llama layer at 8K: W is most of half the backward, not more.
  const double share = static_cast<double>(decoder.weight_grad_ns) / static_cast<double>(decoder.options[0].backward_ns);
  EXPECT_GT(share, 0.3);
  EXPECT_LT(share, 0.5);
  // It holds the GEMMs' inputs and output gradients: more than nothing, less than the layer keeps
  // without recomputation plus those outputs.
  EXPECT_GT(decoder.weight_grad_bytes, 0);
  EXPECT_EQ(p.layers[0].weight_grad_ns, 0);  // the embedding lookup has no weight GEMM
}

// DualPipe: pp stages, each on two ranks, half the micro-batches fed from each end; rank r holds
// two stages' static memory, and the setups it cannot run say what to change.
TEST(ProblemBuilder, DualPipeKeepsTwoCopiesOfEveryStage) {
  TrainingSetup s = Llama8bSetup();  // pp 4, 32 micro-batches
  s.schedule = ScheduleKind::kDualPipe;
  s.vpp = 2;
  const Problem p = Build("llama3-8b", s).value();
  EXPECT_EQ(p.pipeline.stages(), 4);
  const Plan plan = EvenPlan(p);
  const std::vector<RankCost> ranks = ComputeRankCosts(p, plan);
  Bytes stage_static[4] = {};
  for (StageIdx st = 0; st < 4; ++st) {
    for (LayerIdx l = plan.begin(st); l < plan.end(st); ++l) stage_static[st] += p.layers[l].static_bytes;
  }
  EXPECT_EQ(ranks[0].static_bytes, p.reserved_bytes + stage_static[0] + stage_static[3]);
  EXPECT_EQ(ranks[2].static_bytes, p.reserved_bytes + stage_static[1] + stage_static[2]);
  s.pp = 3;
  s.global_batch_size = 48;
  s.vpp = 2;
  EXPECT_NE(ErrorOf("llama3-8b", s).find("needs an even --pp, not 3"), std::string::npos) << ErrorOf("llama3-8b", s);
  s = Llama8bSetup();
  s.schedule = ScheduleKind::kDualPipe;
  s.vpp = 2;
  s.global_batch_size = 14;  // 7 micro-batches
  EXPECT_NE(ErrorOf("llama3-8b", s).find("needs at least 2 micro-batches per pipeline rank, 2 x --pp 4 = 8"),
            std::string::npos)
      << ErrorOf("llama3-8b", s);
  s.global_batch_size = 18;  // 9 micro-batches
  EXPECT_NE(ErrorOf("llama3-8b", s).find("needs an even count, not gbs / (mbs x dp) = 9"), std::string::npos)
      << ErrorOf("llama3-8b", s);
  s.vpp = 1;
  s.global_batch_size = 64;
  EXPECT_NE(ErrorOf("llama3-8b", s).find("--schedule dualpipe runs 2 model chunks per pipeline rank; use --vpp 2"),
            std::string::npos)
      << ErrorOf("llama3-8b", s);
}

TEST(ProblemBuilder, MoeLayersHaveTheirOwnCosts) {
  TrainingSetup s = Llama8bSetup();
  const Problem p = Build("mixtral-8x7b", s).value();
  EXPECT_EQ(p.layers[1].name, "decoder-moe");
  const ParameterCounts counts = CountParameters(ModelPreset("mixtral-8x7b").value());
  EXPECT_EQ(p.layers[1].static_bytes, counts.moe_layer / 2 * 18);
  // Two experts per token: more MLP time than the dense Llama layer of the same shape.
  EXPECT_GT(p.layers[1].options[0].forward_ns, Build("llama3-8b", s).value().layers[1].options[0].forward_ns);
}

TEST(ProblemBuilder, InvalidSetupsSayWhatToChange) {
  TrainingSetup s = Llama8bSetup();
  s.tp = 3;
  EXPECT_NE(ErrorOf("llama3-8b", s).find("--tp 3 does not divide the model's 32 attention heads"), std::string::npos)
      << ErrorOf("llama3-8b", s);
  s.tp = 16;  // divides 32 query heads, not 8 key-value heads
  EXPECT_NE(ErrorOf("llama3-8b", s).find("8 key-value heads"), std::string::npos) << ErrorOf("llama3-8b", s);
  s = Llama8bSetup();
  s.devices = 64;
  EXPECT_NE(ErrorOf("llama3-8b", s).find("= 16 devices, but --devices is 64"), std::string::npos)
      << ErrorOf("llama3-8b", s);
  EXPECT_NE(ErrorOf("llama3-8b", s).find("--dp 8"), std::string::npos);
  s = Llama8bSetup();
  s.global_batch_size = 63;
  EXPECT_NE(ErrorOf("llama3-8b", s).find("--gbs 63 is not divisible by --mbs 1 x --dp 2"), std::string::npos)
      << ErrorOf("llama3-8b", s);
  s = Llama8bSetup();
  s.vpp = 2;
  s.global_batch_size = 12;  // 6 micro-batches, not a multiple of pp = 4
  EXPECT_NE(ErrorOf("llama3-8b", s).find("groups of --pp 4 micro-batches needs the micro-batch count"), std::string::npos) << ErrorOf("llama3-8b", s);
  s = Llama8bSetup();
  s.pp = 32;
  s.vpp = 2;
  EXPECT_NE(ErrorOf("llama3-8b", s).find("64 stages, but the model has only 34 layers"), std::string::npos)
      << ErrorOf("llama3-8b", s);
  s = Llama8bSetup();
  s.sequence_parallel = true;
  s.seq = 4095;
  EXPECT_NE(ErrorOf("llama3-8b", s).find("--seq 4095 is not a multiple"), std::string::npos)
      << ErrorOf("llama3-8b", s);
  s = Llama8bSetup();
  s.seq = 4096;
  s.tp = 8;
  EXPECT_NE(ErrorOf("gpt-22b", s).find("exceeds the model's 2048 learned positions"), std::string::npos)
      << ErrorOf("gpt-22b", s);
  s = Llama8bSetup();
  s.recompute = {"none", "ful"};
  EXPECT_NE(ErrorOf("llama3-8b", s).find("did you mean 'full'"), std::string::npos) << ErrorOf("llama3-8b", s);
  s = Llama8bSetup();
  s.reserved_bytes = Bytes{1} << 50;
  EXPECT_NE(ErrorOf("llama3-8b", s).find("--reserved-gb"), std::string::npos) << ErrorOf("llama3-8b", s);
}

// The written problem file reads back to the same problem.
TEST(ProblemBuilder, ProblemFileRoundTrips) {
  TrainingSetup s = Llama8bSetup();
  s.vpp = 2;
  s.sequence_parallel = true;
  s.flash_attention = true;
  for (const char* model : {"llama3-8b", "mixtral-8x7b"}) {
    const Problem p = Build(model, s).value();
    const std::string text = ProblemJsonText(p, "round trip");
    const Problem q = ReadProblem(ParseDocument(text, "dump.json").value(), "dump.json").value();
    EXPECT_EQ(q.name, p.name);
    EXPECT_EQ(q.pipeline.ranks, p.pipeline.ranks);
    EXPECT_EQ(q.pipeline.chunks, p.pipeline.chunks);
    EXPECT_EQ(q.pipeline.micro_batches, p.pipeline.micro_batches);
    EXPECT_EQ(q.pipeline.schedule, p.pipeline.schedule);
    EXPECT_EQ(q.memory_bytes, p.memory_bytes);
    EXPECT_EQ(q.reserved_bytes, p.reserved_bytes);
    EXPECT_EQ(q.p2p_ns, p.p2p_ns);
    ASSERT_EQ(q.num_layers(), p.num_layers());
    for (int l = 0; l < p.num_layers(); ++l) {
      const Layer &a = p.layers[l], &b = q.layers[l];
      EXPECT_EQ(a.name, b.name);
      EXPECT_EQ(a.static_bytes, b.static_bytes);
      EXPECT_EQ(a.update_ns, b.update_ns);
      EXPECT_EQ(a.p2p_ns, b.p2p_ns);
      ASSERT_EQ(a.options.size(), b.options.size());
      for (std::size_t k = 0; k < a.options.size(); ++k) {
        EXPECT_EQ(a.options[k].name, b.options[k].name);
        EXPECT_EQ(a.options[k].forward_ns, b.options[k].forward_ns);
        EXPECT_EQ(a.options[k].backward_ns, b.options[k].backward_ns);
        EXPECT_EQ(a.options[k].recompute_ns, b.options[k].recompute_ns);
        EXPECT_EQ(a.options[k].saved_bytes, b.options[k].saved_bytes);
        EXPECT_EQ(a.options[k].peak_extra_bytes, b.options[k].peak_extra_bytes);
      }
    }
    // Runs of identical layers are one entry.
    EXPECT_EQ(ParseDocument(text, "dump.json").value()["layers"].size(), 3u);
  }
}

}  // namespace
}  // namespace bmpipe
