// The training setup read from a launcher's file (--setup-from): real launches read as a hand-written
// expectation says, Megatron's defaults for what a file leaves out, and contradictions refused.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "bmpipe/core/document.h"
#include "bmpipe/frameworks/formats.h"
#include "test_support.h"

namespace bmpipe {
namespace {

LauncherSetup Read(const std::string& text) {
  Result<LauncherSetup> r = ReadLauncherSetup(text, "test.args");
  EXPECT_TRUE(r.ok()) << r.error().message;
  return r.ok() ? r.value() : LauncherSetup{};
}

std::string ReadError(const std::string& text) {
  Result<LauncherSetup> r = ReadLauncherSetup(text, "test.args");
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.error().message;
}

std::string Source(const std::string& path) { return LoadText(testing::SourcePath(path)).value(); }

bool NotesMention(const LauncherSetup& s, const std::string& text) {
  for (const std::string& n : s.notes) {
    if (n.find(text) != std::string::npos) return true;
  }
  return false;
}

// Megatron-LM's own Llama 3 8B FP8 example (tests/data/launchers names the commit).
TEST(SetupReader, MegatronLlama3FP8ExampleReadsAsItsScriptSays) {
  const LauncherSetup s = Read(Source("tests/data/launchers/megatron-lm-llama3-8b-h100-fp8.args"));
  const Json want = Json::parse(R"({
    "tp": 1, "cp": 1, "mbs": 1, "gbs": 128, "seq": 8192, "pp": 1,
    "sequence_parallel": false, "flash_attention": true, "distributed_optimizer": true,
    "recompute": ["none"], "precision": "fp8", "fp8_recipe": "delayed", "fp8_params": true,
    "no_fp8_transpose_cache": false,
    "grad_dtype": "bf16", "optimizer_dtype": "fp32", "dp_overlap": 0.9, "tp_comm_overlap": 0.0})");
  EXPECT_EQ(s.keywords, want) << s.keywords.dump();
  EXPECT_TRUE(NotesMention(s, "--sequence-parallel with tensor-parallel size 1"));
  EXPECT_TRUE(NotesMention(s, "--fp8-recipe delayed"));  // Megatron's default recipe, said
  EXPECT_TRUE(NotesMention(s, "--pipeline-model-parallel-size 1"));  // so is the default pipeline size
  EXPECT_TRUE(NotesMention(s, "--empty-unused-memory-level"));  // not read, and listed
  const std::vector<std::pair<std::string, std::int64_t>> shape = {{"--num-layers", 32}, {"--hidden-size", 4096}};
  EXPECT_EQ(s.model_shape, shape);
}

// Megatron-LM's DeepSeek-V2-Lite example: MoE on the local layer spec, unfused attention.
TEST(SetupReader, MegatronDeepSeekLiteExampleReadsAsItsScriptSays) {
  const LauncherSetup s = Read(Source("tests/data/launchers/megatron-lm-deepseek2-lite-h100.args"));
  const Json want = Json::parse(R"({
    "tp": 8, "pp": 1, "cp": 1, "mbs": 1, "gbs": 64, "seq": 1024,
    "sequence_parallel": true, "flash_attention": false, "distributed_optimizer": true,
    "recompute": ["none"], "precision": "bf16", "fp8_params": false, "no_fp8_transpose_cache": false,
    "grad_dtype": "bf16", "optimizer_dtype": "fp32", "dp_overlap": 0.9, "tp_comm_overlap": 0.0,
    "moe_dispatcher": "alltoall", "moe_routing": "natural", "moe_capacity_factor": 0.0,
    "ep_comm_overlap": 0.0, "moe_cuda_graphs": false})");
  EXPECT_EQ(s.keywords, want) << s.keywords.dump();
  EXPECT_TRUE(NotesMention(s, "the local layer spec's unfused core attention"));
}

// Megatron-Bridge's DeepSeek-V3 H100 performance configuration (a ConfigContainer dump, excerpted in
// tests/data/launchers with its commit): comm_overlap over ddp, mixed_precision over the model, the
// precision-aware optimizer's bf16 state, and Megatron's mlp module on the dense layers only.
TEST(SetupReader, MegatronBridgeDeepSeekV3ConfigReadsAsItsFieldsSay) {
  const LauncherSetup s = Read(Source("tests/data/launchers/megatron-bridge-deepseek-v3-h100-fp8-sc.yaml"));
  const Json want = Json::parse(R"({
    "tp": 2, "pp": 8, "cp": 1, "ep": 64, "etp": 1, "mbs": 1, "gbs": 8192, "seq": 4096, "vpp": 4,
    "sequence_parallel": true, "flash_attention": true, "distributed_optimizer": true,
    "recompute": ["mla_up_proj", "mla_up_proj+mlp"], "precision": "fp8", "fp8_recipe": "blockwise",
    "fp8_params": false, "no_fp8_transpose_cache": false, "grad_dtype": "bf16", "optimizer_dtype": "bf16",
    "dp_overlap": 0.5, "tp_comm_overlap": 0.0, "moe_dispatcher": "flex", "moe_routing": "balanced",
    "moe_capacity_factor": 0.0, "ep_comm_overlap": 0.0, "moe_cuda_graphs": false})");
  EXPECT_EQ(s.keywords, want) << s.keywords.dump();
  EXPECT_EQ(s.format, "a Megatron-Bridge ConfigContainer");
  EXPECT_NE(s.plan_text.find("--pipeline-model-parallel-layout 'Et|(tt|)*30mL'"), std::string::npos)
      << s.plan_text;
  const std::vector<std::pair<std::string, std::int64_t>> shape = {
      {"--num-layers", 61}, {"--hidden-size", 7168}, {"--num-experts", 256}, {"--moe-router-topk", 8},
      {"--moe-ffn-hidden-size", 2048}};
  EXPECT_EQ(s.model_shape, shape);
  // A recipe's name reads as the fields its function sets; an unknown one is refused with the fix.
  const std::string head = "_target_: megatron.bridge.training.config.ConfigContainer\nmodel: {num_layers: 4}\n"
                           "train: {micro_batch_size: 1}\nmixed_precision: ";
  const LauncherSetup bf16 = Read(head + "bf16_mixed\n");
  EXPECT_EQ(bf16.keywords["precision"], "bf16");
  EXPECT_EQ(bf16.keywords["grad_dtype"], "fp32");  // bf16_mixed reduces in fp32
  const LauncherSetup cs = Read(head + "bf16-with-fp8-current-scaling-mixed\n");
  EXPECT_EQ(cs.keywords["precision"], "fp8");
  EXPECT_EQ(cs.keywords["fp8_recipe"], "tensorwise");
  EXPECT_EQ(cs.keywords["fp8_params"], true);
  EXPECT_EQ(Read(head + "bf16_with_mxfp8_mixed\n").keywords["precision"], "mxfp8");
  EXPECT_EQ(Read(head + "bf16_with_fp8_subchannel_scaling_mixed\n").keywords["fp8_recipe"], "blockwise");
  EXPECT_NE(ReadError(head + "bf16_fancy\n").find("not a Megatron-Bridge recipe bmpipe knows (bf16_mixed"),
            std::string::npos);
}

TEST(SetupReader, RecomputationAsMegatronSaysIt) {
  EXPECT_EQ(Read("--recompute-granularity selective\n").keywords["recompute"], Json::parse(R"(["selective"])"));
  EXPECT_EQ(Read("--recompute-granularity selective --recompute-modules mla_up_proj moe_act layernorm\n")
                .keywords["recompute"],
            Json::parse(R"(["mla_up_proj+mlp_act+norm"])"));
  EXPECT_EQ(Read("--recompute-activations\n").keywords["recompute"], Json::parse(R"(["selective"])"));
  EXPECT_EQ(Read("--recompute-granularity full --recompute-method uniform --recompute-num-layers 1\n")
                .keywords["recompute"],
            Json::parse(R"(["full"])"));
  const LauncherSetup block = Read("--recompute-granularity full --recompute-method block --recompute-num-layers 3\n");
  EXPECT_EQ(block.keywords["recompute"], Json::parse(R"(["none", "full"])"));
  EXPECT_EQ(block.keywords["recompute_num_layers"], 3);
  EXPECT_NE(ReadError("--recompute-granularity full --recompute-method uniform --recompute-num-layers 2\n")
                .find("groups of 2 decoder layers"),
            std::string::npos);
  EXPECT_NE(ReadError("--recompute-granularity selective --recompute-modules shared_experts\n").find("shared_experts"),
            std::string::npos);
  EXPECT_NE(ReadError("--recompute-num-layers 2\n").find("without --recompute-granularity"), std::string::npos);
}

TEST(SetupReader, PrecisionAndDtypesFollowTheFlags) {
  EXPECT_EQ(Read("--bf16 --fp8-format hybrid --fp8-recipe mxfp8\n").keywords["precision"], "mxfp8");
  EXPECT_EQ(Read("--bf16 --fp8-format e4m3 --fp8-recipe tensorwise\n").keywords["precision"], "fp8");
  EXPECT_EQ(Read("--bf16 --fp4-format e2m1 --fp4-recipe nvfp4\n").keywords["precision"], "nvfp4");
  // bf16 training reduces its gradients in fp32 unless told otherwise (Megatron's --bf16 default).
  EXPECT_EQ(Read("--bf16\n").keywords["grad_dtype"], "fp32");
  EXPECT_EQ(Read("--bf16 --use-precision-aware-optimizer --main-grads-dtype bf16\n").keywords["grad_dtype"], "bf16");
  EXPECT_EQ(Read("--bf16 --use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16\n")
                .keywords["optimizer_dtype"],
            "bf16");
  EXPECT_NE(ReadError("--fp8-format hybrid --fp4-format e2m1\n").find("Megatron refuses both"), std::string::npos);
  EXPECT_NE(ReadError("--grad-reduce-in-bf16 --accumulate-allreduce-grads-in-fp32\n").find("contradict"),
            std::string::npos);
  EXPECT_NE(ReadError("--main-grads-dtype bf16\n").find("--use-precision-aware-optimizer"), std::string::npos);
  EXPECT_NE(ReadError("--exp-avg-dtype bf16 --use-precision-aware-optimizer\n").find("one dtype"), std::string::npos);
}

TEST(SetupReader, OverlapSwitchesTakeTheTablesFractions) {
  EXPECT_EQ(Read("--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather\n").keywords["dp_overlap"],
            0.9);
  EXPECT_EQ(Read("--use-distributed-optimizer --overlap-grad-reduce\n").keywords["dp_overlap"], 0.45);
  EXPECT_EQ(Read("--use-distributed-optimizer --overlap-param-gather\n").keywords["dp_overlap"], 0.5);
  EXPECT_EQ(Read("--overlap-grad-reduce\n").keywords["dp_overlap"], 0.9);
  EXPECT_EQ(Read("--tp-comm-overlap --tensor-model-parallel-size 2 --sequence-parallel\n").keywords["tp_comm_overlap"],
            0.8);
  EXPECT_NE(ReadError("--overlap-param-gather\n").find("--use-distributed-optimizer"), std::string::npos);
}

TEST(SetupReader, MoeSettingsAndRefusals) {
  const LauncherSetup s = Read(
      "--num-experts 8 --moe-token-dispatcher-type flex --moe-router-force-load-balancing "
      "--overlap-moe-expert-parallel-comm --cuda-graph-impl transformer_engine --cuda-graph-scope moe_router "
      "moe_preprocess --expert-model-parallel-size 8 --moe-expert-capacity-factor 1.25\n");
  EXPECT_EQ(s.keywords["moe_dispatcher"], "flex");
  EXPECT_EQ(s.keywords["moe_routing"], "balanced");
  EXPECT_EQ(s.keywords["ep_comm_overlap"], 0.8);
  EXPECT_EQ(s.keywords["moe_cuda_graphs"], true);
  EXPECT_EQ(s.keywords["moe_capacity_factor"], 1.25);
  EXPECT_EQ(s.keywords["ep"], 8);
  EXPECT_NE(ReadError("--num-experts 8\n").find("allgather"), std::string::npos);
  EXPECT_NE(ReadError("--cuda-graph-impl local\n").find("--cuda-graph-scope"), std::string::npos);
  // A dense launch states no MoE settings: the defaults stay (and say so).
  EXPECT_FALSE(Read("--tensor-model-parallel-size 2\n").keywords.contains("moe_routing"));
}

TEST(SetupReader, VirtualStagesFromTheLayoutOrTheCounts) {
  EXPECT_EQ(Read("--pipeline-model-parallel-size 4 --pipeline-model-parallel-layout \"Et*4|t*4|t*4|t*4|t*4|t*4|t*4|t*4L\"\n")
                .keywords["vpp"],
            2);
  EXPECT_EQ(Read("--pipeline-model-parallel-size 4 --num-layers 32 --num-layers-per-virtual-pipeline-stage 2\n")
                .keywords["vpp"],
            4);
  EXPECT_NE(ReadError("--pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 2\n").find("--num-layers"),
            std::string::npos);
}

// torchtitan's Llama 3 70B preset for 64 A100s (tests/data/launchers names the commit): TP 8,
// FSDP over the rest (resharded, torchtitan's default without pipelining), full checkpointing.
TEST(SetupReader, TorchTitanLlama3Preset) {
  const LauncherSetup s = Read(Source("tests/data/launchers/torchtitan-llama3-70b-a100.toml"));
  EXPECT_EQ(s.format, "torchtitan job configuration (TOML)");
  const Json want = {{"tp", 8},          {"pp", 1},
                     {"cp", 1},          {"zero", 3},
                     {"dp_overlap", 0.9}, {"sequence_parallel", true},
                     {"schedule", "1f1b"}, {"mbs", 8},
                     {"seq", 8192},       {"grad_dtype", "fp32"},
                     {"precision", "bf16"}, {"flash_attention", true},
                     {"recompute", {"full"}}};
  for (const auto& [key, value] : want.items()) EXPECT_EQ(s.keywords[key], value) << key;
  EXPECT_FALSE(s.keywords.contains("dp"));   // shard degree -1: the launcher's world size
  EXPECT_FALSE(s.keywords.contains("gbs"));  // local batch x data parallel
  EXPECT_EQ(s.local_batch, 8);
  EXPECT_TRUE(s.refused.empty());
  EXPECT_TRUE(NotesMention(s, "not read (no cost bmpipe models, or unknown to bmpipe's torchtitan reader")) << s.notes.back();
  EXPECT_TRUE(NotesMention(s, "optimizer.lr"));
}

// A newer configuration: local_batch_size, bf16 gradient reduction and state, the shard degree.
TEST(SetupReader, TorchTitanB200Configuration) {
  const LauncherSetup s = Read(Source("tests/data/launchers/torchtitan-llama3-70b-b200-8k.toml"));
  EXPECT_EQ(s.keywords["dp"], 8);
  EXPECT_EQ(s.keywords["zero"], 3);
  EXPECT_EQ(s.keywords["mbs"], 6);
  EXPECT_EQ(s.keywords["grad_dtype"], "bf16");
  EXPECT_EQ(s.keywords["optimizer_dtype"], "bf16");
  EXPECT_EQ(s.keywords["sequence_parallel"], false);  // tp 1
  EXPECT_TRUE(NotesMention(s, "torch.compile: not modeled"));
}

TEST(SetupReader, TorchTitanArgumentsAndWhatBmpipeCannotCost) {
  // The argument file bmpipe writes: its stages give the virtual stages, never-resharded FSDP
  // with pipelining accumulates unsharded gradients (ZeRO 1).
  const LauncherSetup s = Read(Source("tests/golden/exports/llama3-405b-pp16-vpp2-torchtitan/torchtitan.args"));
  EXPECT_EQ(s.format, "torchtitan arguments");
  EXPECT_EQ(s.keywords["vpp"], 2);
  EXPECT_EQ(s.keywords["zero"], 1);
  EXPECT_EQ(s.keywords["dp"], 128);
  EXPECT_EQ(s.keywords["gbs"], 2048);
  EXPECT_EQ(s.plan_format, FrameworkId::kTorchTitan);
  // Selective checkpointing (torchtitan's default) and HSDP: refused unless the command line says.
  const LauncherSetup t = Read("[training]\nlocal_batch_size = 2\n[parallelism]\ndata_parallel_replicate_degree = 2\n"
                               "data_parallel_shard_degree = 4\n");
  EXPECT_NE(t.refused.at("recompute").find("selective_ac_option 2 (not given: torchtitan's default)"),
            std::string::npos);
  EXPECT_NE(t.refused.at("zero").find("HSDP"), std::string::npos);
  EXPECT_EQ(Read("[parallelism]\npipeline_parallel_degree = 4\npipeline_parallel_schedule = \"Interleaved1F1B\"\n")
                .keywords["vpp"],
            2);  // torchtitan's default for multi-stage schedules
  EXPECT_NE(ReadError("[parallelism]\npipeline_parallel_schedule = \"Fancy\"\n").find("not a schedule bmpipe models"),
            std::string::npos);
  EXPECT_NE(ReadError("[parallelism]\ntensor_parallel_degree = \"eight\"\n").find("tensor_parallel_degree"),
            std::string::npos);
  EXPECT_NE(ReadError("[training]\nseq_len = 8192\nseq_len = 4096\n").find("line 3: 'seq_len' is given twice"),
            std::string::npos);
}

// 80,000 unknown flags read in linear time, and the note lists the first ones and how many more.
TEST(SetupReader, ManyUnknownFlagsAreCountedNotEchoed) {
  std::string text = "--tensor-model-parallel-size 2\n";
  for (int i = 0; i < 80000; ++i) text += "--unknown-flag-" + std::to_string(i) + " v\n";
  const LauncherSetup s = Read(text);
  EXPECT_EQ(s.keywords["tp"], 2);
  ASSERT_TRUE(NotesMention(s, "... and 79960 more"));
  for (const std::string& n : s.notes) EXPECT_LT(n.size(), 2000u);
  std::string titan = "--parallelism.tensor_parallel_degree 2\nactivation_checkpoint:none\n";
  for (int i = 0; i < 80000; ++i) titan += "--unknown.flag_" + std::to_string(i) + " v\n";
  const LauncherSetup t = Read(titan);
  EXPECT_EQ(t.keywords["tp"], 2);
  EXPECT_TRUE(NotesMention(t, "... and 79960 more"));
}

TEST(SetupReader, OnlyLauncherFilesWhoseSetupIsRead) {
  const std::string message = ReadError("stages: []\n");
  EXPECT_NE(message.find("read from megatron, torchtitan launcher files"), std::string::npos) << message;
}

}  // namespace
}  // namespace bmpipe
