// The user's own run as they launch it: --setup-from a launcher's file, every setting listed with
// where it came from, Megatron's recomputation as Megatron says it, and calibration on the user's
// own model and device files.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "bmpipe/core/document.h"
#include "bmpipe/validate/validate.h"
#include "test_support.h"

namespace bmpipe {
namespace {

using testing::CommandResult;
using testing::RunBmpipe;

std::string Line(const std::string& out, const std::string& start) {
  const std::size_t at = out.find(start);
  if (at == std::string::npos) return "";
  return out.substr(at, out.find('\n', at) - at);
}

// Every Megatron export bmpipe wrote, read back as the setup and the plan, simulates to the time
// the export's header states: what is written is what was planned.
TEST(SetupFrom, GoldenMegatronExportsReproduceTheirProblems) {
  const std::regex header(R"(# bmpipe plan for (\S+) on ([^:]+): .* dp (\d+) .*simulated iteration ([0-9.]+ m?s))");
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(testing::SourcePath("tests/golden/exports"))) {
    const std::filesystem::path args = entry.path() / "megatron.args";
    if (!std::filesystem::exists(args)) continue;
    const std::string text = testing::ReadFile(args.string());
    std::smatch m;
    const std::string first = text.substr(0, text.find('\n'));
    ASSERT_TRUE(std::regex_search(first, m, header)) << args;
    const std::string file = "tests/golden/exports/" + entry.path().filename().string() + "/megatron.args";
    // The file's --overlap-moe-expert-parallel-comm is the fixed fraction unless --overlap-pairs
    // says it is the combined 1F1B the problem planned.
    const bool pairs =
        testing::ReadFile((entry.path() / "problem.json").string()).find("\"overlap\": true") != std::string::npos;
    const CommandResult r = RunBmpipe("simulate --model " + m[1].str() + " --device " + m[2].str() + " --dp " +
                                      m[3].str() + " --setup-from " + file + " --plan " + file +
                                      (pairs ? " --overlap-pairs" : ""));
    ASSERT_EQ(r.exit_code, 0) << file << ": " << r.err;
    EXPECT_EQ(Line(r.out, "Iteration time"), "Iteration time   " + m[4].str()) << file;
    ++checked;
  }
  EXPECT_GE(checked, 17);
}

// The same for torchtitan's argument files. torchtitan overlaps FSDP's and DDP's data-parallel
// traffic and always runs fused attention: the golden problems assumed no overlap (given here),
// and those without flash attention are not a run torchtitan can launch.
TEST(SetupFrom, GoldenTorchTitanExportsReproduceTheirProblems) {
  const std::regex header(R"(# bmpipe plan for (\S+) on ([^:]+): .*flash attention.*simulated iteration ([0-9.]+ m?s))");
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(testing::SourcePath("tests/golden/exports"))) {
    const std::filesystem::path args = entry.path() / "torchtitan.args";
    if (!std::filesystem::exists(args)) continue;
    const std::string text = testing::ReadFile(args.string());
    std::smatch m;
    const std::string first = text.substr(0, text.find('\n'));
    if (!std::regex_search(first, m, header)) continue;
    const std::string file = "tests/golden/exports/" + entry.path().filename().string() + "/torchtitan.args";
    const CommandResult r = RunBmpipe("simulate --model " + m[1].str() + " --device " + m[2].str() +
                                      " --dp-overlap 0 --setup-from " + file);
    ASSERT_EQ(r.exit_code, 0) << file << ": " << r.err;
    EXPECT_NE(r.out.find("its layout and recomputation, as torchtitan runs them"), std::string::npos) << r.out;
    EXPECT_EQ(Line(r.out, "Iteration time"), "Iteration time   " + m[3].str()) << file;
    ++checked;
  }
  EXPECT_GE(checked, 6);
}

// torchtitan's TOML job: the degrees it states, the global batch from the local one.
TEST(SetupFrom, TorchTitanJobConfiguration) {
  const std::string file = "tests/data/launchers/torchtitan-llama3-70b-b200-8k.toml";
  CommandResult r = RunBmpipe("simulate --model llama3-70b --device b200-180gb --setup-from " + file);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("(torchtitan job configuration (TOML)): 16 settings read"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("settings   given: none\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tp 1, pp 1, dp 8, mbs 6, gbs 48, seq 8192"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("zero 3, grad_dtype bf16, optimizer_dtype bf16"), std::string::npos) << r.out;
  // torchtitan's default selective checkpointing is none of bmpipe's options: said, with the fix.
  r = RunBmpipe("simulate --model llama3-8b --device h100-80gb --devices 8 --setup-from "
                "tests/data/launchers/torchtitan-selective.toml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("give --recompute on the command line"), std::string::npos) << r.err;
  r = RunBmpipe("simulate --model llama3-8b --device h100-80gb --devices 8 --recompute selective --setup-from "
                "tests/data/launchers/torchtitan-selective.toml");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("gbs 8,"), std::string::npos) << r.out;  // local batch 1 x dp 8
}

// Without --plan, simulate runs the file's own layout and recomputation; a Megatron-Bridge
// configuration reads as its fields say.
TEST(SetupFrom, SimulateRunsTheFilesOwnPlan) {
  const std::string file = "tests/golden/exports/mixtral-8x7b-ep8-flex-megatron/megatron.args";
  CommandResult r = RunBmpipe("simulate --model mixtral-8x7b --device h100-80gb --dp 8 --setup-from " + file);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("its layout and recomputation, as Megatron-LM runs them"), std::string::npos) << r.out;
  EXPECT_EQ(Line(r.out, "Iteration time"), "Iteration time   3.979 s");  // the export's header
  r = RunBmpipe("simulate --model deepseek-v3 --device h100-80gb --devices 1024 --setup-from "
                "tests/data/launchers/megatron-bridge-deepseek-v3-h100-fp8-sc.yaml");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("(a Megatron-Bridge ConfigContainer): "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("given: dp 64"), std::string::npos) << r.out;  // from --devices over the file's layout
  // Its layout places the multi-token-prediction module ('m') with the loss, where the problem's head
  // runs it: the file's own plan.
  EXPECT_NE(r.out.find("megatron-bridge-deepseek-v3-h100-fp8-sc.yaml: its layout and recomputation, as Megatron-LM "
                       "runs them"),
            std::string::npos)
      << r.out;
}

TEST(SetupFrom, CommandLineWinsAndEverySettingSaysWhereItCameFrom) {
  const std::string file = "tests/golden/exports/llama3-70b-fp8-megatron/megatron.args";
  const CommandResult r =
      RunBmpipe("simulate --model llama3-70b --device h100-80gb --dp 8 --setup-from " + file + " --tp 4 --pp 8");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("given here instead: tp (the file: 8)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("given: tp 4, pp 8, dp 8"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("from " + file + ": mbs 1, gbs 256, seq 8192, sequence_parallel true, flash_attention true"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("precision fp8"), std::string::npos);
  EXPECT_NE(r.out.find("tp_comm_overlap 0.8"), std::string::npos);  // the switch at the table's fraction
  // The plan JSON says the same, setting by setting.
  const CommandResult json = RunBmpipe("simulate --model llama3-70b --device h100-80gb --dp 8 --setup-from " + file +
                                       " --tp 4 --pp 8 --json --defaults megatron-bridge-perf");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const Json settings = Json::parse(json.out)["settings"];
  EXPECT_EQ(settings["tp"], Json::parse(R"({"value": "4", "from": "given"})"));
  EXPECT_EQ(settings["seq"], Json::parse(R"({"value": "8192", "from": "file"})"));
  EXPECT_EQ(settings["fp8_recipe"], Json::parse(R"({"value": "tensorwise", "from": "file"})"));
  EXPECT_EQ(settings["zero"], Json::parse(R"({"value": "0", "from": "default"})"));
  // Without a file, the defaults are listed as such.
  const CommandResult plain = RunBmpipe("simulate --model llama3-8b --device h100-80gb --gbs 8 --seq 4096");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_NE(plain.out.find("given: gbs 8, seq 4096"), std::string::npos) << plain.out;
  EXPECT_NE(plain.out.find("bmpipe's defaults: tp 1, pp 1, dp 1"), std::string::npos) << plain.out;
  EXPECT_NE(plain.out.find("flash_attention false"), std::string::npos) << plain.out;
}

TEST(SetupFrom, WhatTheFileCannotSayIsAnError) {
  const std::string file = "tests/data/launchers/megatron-lm-llama3-8b-h100-fp8.args";
  CommandResult r = RunBmpipe("simulate --model llama3-8b --device h100-80gb --setup-from " + file);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("give --dp N or --devices N"), std::string::npos) << r.err;
  r = RunBmpipe("simulate --model llama3-8b --device h100-80gb --devices 8 --setup-from " + file);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("dp 8"), std::string::npos);
  r = RunBmpipe("simulate --model llama3-70b --device h100-80gb --dp 8 --setup-from " + file);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("states --num-layers 32, but --model llama3-70b has 80"), std::string::npos) << r.err;
  r = RunBmpipe("simulate --model llama3-8b --device h100-80gb --dp 8 --setup-from examples/tiny/problem.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("read from megatron, torchtitan launcher files"), std::string::npos) << r.err;
  r = RunBmpipe("simulate --model llama3-8b --device h100-80gb --dp 8");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--model needs --gbs"), std::string::npos) << r.err;
}

// The reproducer of issue 39: DeepSeek-V3's recipes recompute mla_up_proj, one global setting.
TEST(SetupFrom, SimulateTakesMegatronsRecomputeModulesAndBlockMethod) {
  CommandResult r = RunBmpipe(
      "simulate --model deepseek-v3 --device h100-80gb --tp 2 --pp 16 --dp 32 --ep 64 --etp 1 --gbs 4096 --seq 4096 "
      "--flash-attn --sequence-parallel --distributed-optimizer --recompute mla_up_proj");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("every decoder layer recomputes mla_up_proj"), std::string::npos) << r.out;
  r = RunBmpipe("simulate --model llama3-8b --device h100-80gb --pp 4 --gbs 8 --seq 4096 --recompute norm+mlp_act");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // Block: the first 2 decoder layers of each stage full, the others none.
  r = RunBmpipe("simulate --model llama3-8b --device h100-80gb --pp 4 --gbs 8 --seq 4096 --recompute full "
                "--recompute-num-layers 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("--recompute-method block --recompute-num-layers 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("full x2, none x6"), std::string::npos) << r.out;
  r = RunBmpipe("simulate --model llama3-8b --device h100-80gb --pp 4 --gbs 8 --seq 4096 --recompute-num-layers 2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("needs --recompute full"), std::string::npos) << r.err;
}

// A framework version's profile: the Qwen3-235B reproducer of issue 39 with the recipe profile and
// no hand-typed flags predicts what the recipe's flags give, and the Llama 3.1 8B CP2 run (NeMo's
// recipe on 8 H100) fits under it.
TEST(SetupFrom, ProfilesSetWhatTheRecipesRun) {
  const std::string qwen = "simulate --model qwen3-235b-a22b --device h100-80gb --tp 2 --pp 8 --dp 16 --ep 32 --etp 1 "
                           "--vpp 4 --gbs 2048 --seq 4096 --precision fp8 ";
  const CommandResult profiled = RunBmpipe(qwen + "--defaults megatron-bridge-perf");
  const CommandResult flags =
      RunBmpipe(qwen + "--sequence-parallel --flash-attn --grad-dtype bf16 --dp-overlap 0.9 --distributed-optimizer "
                       "--ep-comm-overlap 0.8 --fp8-params --moe-routing balanced");
  ASSERT_EQ(profiled.exit_code, 0) << profiled.err;
  ASSERT_EQ(flags.exit_code, 0) << flags.err;
  auto seconds = [](const std::string& out) {
    const std::string line = Line(out, "Iteration time");
    return line.empty() ? 0.0 : std::stod(line.substr(std::string("Iteration time").size()));
  };
  EXPECT_NEAR(seconds(profiled.out), seconds(flags.out), 0.05 * seconds(flags.out));
  EXPECT_NE(profiled.out.find("from profile megatron-bridge-perf: sequence_parallel true, flash_attention true, "
                              "distributed_optimizer true, dp_overlap 0.9"),
            std::string::npos)
      << profiled.out;
  const std::string llama = "simulate --model llama3-8b --device h100-80gb --cp 2 --dp 4 --gbs 128 --seq 8192 ";
  EXPECT_NE(RunBmpipe(llama + "--defaults megatron-bridge-perf").out.find("every rank fits"), std::string::npos);
  // As the source states it (flash attention, the distributed optimizer), bmpipe's fp32 gradients
  // do not fit: the recipe reduces them in bf16.
  EXPECT_NE(RunBmpipe(llama + "--flash-attn --distributed-optimizer").out.find("EXCEEDS capacity"), std::string::npos);
  // The run itself (NeMo's 24.07 table, FP8): under the profile of the launcher that ran it, it fits.
  EXPECT_NE(RunBmpipe(llama + "--precision fp8 --defaults nemo-launcher-24.07").out.find("every rank fits"),
            std::string::npos);
  EXPECT_NE(RunBmpipe(llama + "--precision fp8 --flash-attn --distributed-optimizer").out.find("EXCEEDS capacity"),
            std::string::npos);
  // What is given wins over the profile, and what the file states too.
  const CommandResult given = RunBmpipe(llama + "--defaults megatron-bridge-perf --grad-dtype fp32");
  EXPECT_NE(given.out.find("given: dp 4, gbs 128, seq 8192, cp 2, grad_dtype fp32"), std::string::npos) << given.out;
  const CommandResult filed = RunBmpipe(
      "simulate --model llama3-8b --device h100-80gb --dp 8 --defaults megatron-bridge-perf --setup-from "
      "tests/data/launchers/megatron-lm-llama3-8b-h100-fp8.args");
  EXPECT_NE(filed.out.find("fp8_recipe delayed"), std::string::npos) << filed.out;  // the file's, not the profile's
  EXPECT_EQ(RunBmpipe(llama + "--defaults nemo-99").exit_code, 2);
}

// NVIDIA's published Megatron-Bridge runs predicted from their layout, precision and recomputation
// and the recipe profile alone (none of the table's per-run assumptions): every one that ran fits
// but the one whose recipe offloads whole layers' activations (cpu_offloading_num_layers 40), which
// no profile default says.
TEST(SetupFrom, PublishedMegatronBridgeRunsFitUnderTheRecipeProfileAlone) {
  const Result<RunTable> table = LoadRunTable("");
  ASSERT_TRUE(table.ok());
  int fitted = 0;
  std::vector<std::string> not_fitting;
  for (const PublishedRun& run : table.value().runs) {
    if (run.id.rfind("mb", 0) != 0 || !run.framework.empty() || run.model_name.rfind("inline", 0) == 0) continue;
    const TrainingSetup& s = run.setup;
    std::string args = fmt::format(
        "simulate --model {} --device {} --tp {} --pp {} --dp {} --vpp {} --mbs {} --gbs {} --seq {} --cp {} --ep {} "
        "--precision {} --recompute {} --defaults megatron-bridge-perf",
        run.model_name, run.device.name, s.tp, s.pp, s.dp, s.vpp, s.micro_batch_size, s.global_batch_size, s.seq, s.cp,
        s.ep, PrecisionName(s.precision), s.recompute.front());
    if (s.etp > 0) args += fmt::format(" --etp {}", s.etp);
    if (s.zero >= 2) args += fmt::format(" --zero {}", s.zero);
    if (s.moe_dispatcher == MoeDispatcher::kFlex) args += " --moe-dispatcher flex";
    const CommandResult r = RunBmpipe(args);
    ASSERT_EQ(r.exit_code, 0) << run.id << ": " << r.err;
    if (r.out.find("Memory           every rank fits") != std::string::npos) {
      ++fitted;
    } else {
      not_fitting.push_back(run.id);
    }
  }
  EXPECT_GE(fitted, 30);
  EXPECT_EQ(not_fitting, std::vector<std::string>{"mb2511-gb200-llama3-70b-mfsdp64"});
}

// search takes the profile for what it does not search: FP8 weights where a configuration runs FP8,
// bf16 gradients, the data-parallel overlap; sequence parallelism and ZeRO stay searched.
TEST(SetupFrom, SearchTakesAProfile) {
  const CommandResult r = RunBmpipe("search --model llama3-8b --device h100-80gb --devices 8 --gbs 128 --seq 8192 "
                                    "--precision bf16,fp8 --defaults megatron-bridge-perf -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("defaults   profile megatron-bridge-perf: dp_overlap 0.9, flash_attention true, grad_dtype "
                       "\"bf16\", fp8_recipe \"tensorwise\" (where fp8), fp8_params true (where quantized); searched "
                       "instead: distributed_optimizer, sequence_parallel"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("--fp8-param-gather"), std::string::npos);  // the best runs FP8 with FP8 weights
}

// search takes what the file states and does not search; the file's layout is searched instead.
TEST(SetupFrom, SearchKeepsTheFilesSettingsAndSearchesItsLayout) {
  const std::string file = "tests/data/launchers/megatron-lm-llama3-8b-h100-fp8.args";
  CommandResult r = RunBmpipe("search --model llama3-8b --device h100-80gb --devices 8 --progress none --setup-from " +
                              file + " --dp-overlap 0.5 --top 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("(Megatron-LM arguments): gbs 128, seq 8192, flash_attention true"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("precision \"fp8\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("searched instead: tp 1, cp 1, mbs 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("given here instead: dp_overlap 0.9"), std::string::npos) << r.out;
  EXPECT_NE(Line(r.out, "  1   "), "") << r.out;
  EXPECT_NE(Line(r.out, "  1   ").find(" fp8 "), std::string::npos) << r.out;  // the file's precision
  // Without the file, the batch and the sequence are required.
  r = RunBmpipe("search --model llama3-8b --device h100-80gb --devices 8 --seq 4096");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("search needs --gbs (sequences per iteration)"), std::string::npos) << r.err;
}

// torchtitan's profile: what its trainer applies when only the degrees are given, and the same
// setup as its TOML job of those degrees states.
TEST(SetupFrom, TorchTitanProfileIsWhatItsJobStates) {
  const std::string layout = "simulate --model llama3-70b --device a100-80gb --recompute full ";
  CommandResult profiled = RunBmpipe(layout + "--tp 8 --dp 8 --gbs 64 --mbs 8 --seq 8192 --defaults torchtitan-0.3");
  ASSERT_EQ(profiled.exit_code, 0) << profiled.err;
  EXPECT_NE(profiled.out.find("from profile torchtitan-0.3: sequence_parallel true, flash_attention true, dp_overlap "
                              "0.9, zero 3, grad_dtype fp32"),
            std::string::npos)
      << profiled.out;
  CommandResult filed =
      RunBmpipe(layout + "--devices 64 --setup-from tests/data/launchers/torchtitan-llama3-70b-a100.toml");
  ASSERT_EQ(filed.exit_code, 0) << filed.err;
  EXPECT_EQ(Line(profiled.out, "Iteration time"), Line(filed.out, "Iteration time"));
  EXPECT_EQ(Line(profiled.out, "Memory"), Line(filed.out, "Memory"));
  // With pipeline parallelism the parameters stay gathered: ZeRO 1.
  profiled = RunBmpipe(layout + "--tp 8 --pp 2 --dp 4 --gbs 64 --seq 8192 --defaults torchtitan-0.3");
  ASSERT_EQ(profiled.exit_code, 0) << profiled.err;
  EXPECT_NE(profiled.out.find("zero 1"), std::string::npos) << profiled.out;
  // Without --defaults, a framework target's report names the profile of what it runs.
  const CommandResult plan = RunBmpipe("plan --model llama3-8b --device h100-80gb --tp 1 --pp 4 --dp 1 --gbs 16 "
                                       "--seq 4096 --target torchtitan --progress none");
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_NE(plan.out.find("defaults   bmpipe's, listed below; --defaults torchtitan-0.3 takes what torchtitan runs "
                          "with when only the layout is given"),
            std::string::npos)
      << plan.out;
}

// A model with multi-token prediction: the export places 'm' with the loss and says --mtp-num-layers,
// and reads back as the plan it came from.
TEST(SetupFrom, MultiTokenPredictionExportsAndReadsBack) {
  const std::string dir = testing::MakeTempDir();
  CommandResult r = RunBmpipe("plan --model deepseek-v3 --device h100-80gb --tp 2 --pp 8 --ep 64 --dp 64 --gbs 8192 "
                              "--seq 4096 --flash-attn --sequence-parallel --distributed-optimizer --target megatron "
                              "--export megatron --export-out ds.args --node-limit 0 --progress none",
                              dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string args = testing::ReadFile(dir + "/ds.args");
  EXPECT_NE(args.find("--mtp-num-layers 1\n"), std::string::npos) << args;
  EXPECT_NE(args.find("mL\"\n"), std::string::npos) << args;
  const std::string time = Line(r.out, "Iteration time");
  r = RunBmpipe("simulate --model deepseek-v3 --device h100-80gb --dp 64 --setup-from ds.args --plan ds.args", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Line(r.out, "Iteration time"), time);
  std::filesystem::remove_all(dir);
}

// A plan that fits by less than the cost model's held-out memory error says so.
TEST(SetupFrom, ReportWarnsOfARankWithinTheMemoryError) {
  const std::string run = "simulate --model llama3-70b --device h100-80gb --tp 8 --pp 4 --dp 8 --gbs 128 --seq 8192 "
                          "--flash-attn --sequence-parallel --distributed-optimizer ";
  CommandResult r = RunBmpipe(run + "--reserved-gb 45");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("every rank fits, but rank 0 at 98.9 % of its capacity is within the cost model's held-out "
                       "memory error (±3.7 %): it may not fit when run; plan and search keep 1.5 GB free on every "
                       "rank for it by default"),
            std::string::npos)
      << r.out;
  r = RunBmpipe(run + "--reserved-gb 40");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Memory           every rank fits\n"), std::string::npos) << r.out;
  // A headroom is the user's margin, not the device's limit: the same peak against the device.
  r = RunBmpipe(run + "--reserved-gb 5 --memory-headroom-gb 40");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("5.00 GB reserved, 40.00 GB headroom kept free (plans fit in 45.52 GB)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("Memory           every rank fits\n"), std::string::npos) << r.out;
}

// plan keeps the cost model's held-out memory error free by default; 0 plans to the full capacity.
TEST(SetupFrom, PlanKeepsTheDefaultHeadroom) {
  const std::string run = "plan --model llama3-8b --device h100-80gb --tp 1 --pp 4 --dp 1 --gbs 16 --seq 8192 "
                          "--flash-attn --recompute none --time-limit 30 --progress none --json ";
  auto fullest = [](const CommandResult& r) {
    const Json doc = Json::parse(r.out);
    std::int64_t peak = 0;
    for (const Json& rank : doc["ranks"]) peak = std::max(peak, rank["peak_memory_bytes"].get<std::int64_t>());
    return peak;
  };
  const CommandResult kept = RunBmpipe(run);
  ASSERT_EQ(kept.exit_code, 0) << kept.err;
  const CommandResult full = RunBmpipe(run + "--memory-headroom-gb 0");
  ASSERT_EQ(full.exit_code, 0) << full.err;
  // 85.52 GB less the 5.35 GB reserve, x 3.7 / 103.7: 2.9 GB free.
  EXPECT_LE(fullest(kept), 85'520'000'000 - 2'900'000'000);
  EXPECT_GT(fullest(full), 85'520'000'000 - 2'900'000'000);  // the fastest plan of all is fuller
  const CommandResult report = RunBmpipe("plan --model llama3-8b --device h100-80gb --tp 1 --pp 4 --dp 1 --gbs 16 "
                                         "--seq 8192 --flash-attn --recompute none --progress none");
  EXPECT_NE(report.out.find("headroom   2.9 GB kept free on every rank by default: the cost model's held-out memory "
                            "error for runs of this kind (±3.7 %)"),
            std::string::npos)
      << report.out;
  EXPECT_NE(report.out.find("device     85.52 GB per rank, 5.35 GB reserved, 2.90 GB headroom kept free (plans fit in "
                            "82.62 GB)"),
            std::string::npos)
      << report.out;
  EXPECT_NE(report.out.find("Memory           every rank fits\n"), std::string::npos) << report.out;
}

// When no plan keeps the default headroom free, plan gives the one that fits at all and says so.
TEST(SetupFrom, PlanWithoutRoomForTheHeadroomUsesTheFullCapacity) {
  const std::string run = "plan --model llama3-8b --device h100-80gb --tp 4 --pp 1 --dp 1 --gbs 4 --seq 2048 "
                          "--flash-attn --sequence-parallel --recompute none --progress none --reserved-gb ";
  CommandResult r = RunBmpipe(run + "46.2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("headroom   none: no plan keeps the default headroom"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("every rank fits, but rank 0 at 99.4 % of its capacity is within the cost model's held-out "
                       "memory error"),
            std::string::npos)
      << r.out;
  r = RunBmpipe(run + "47");  // no plan fits at all: the diagnosis, exit 4
  EXPECT_EQ(r.exit_code, 4) << r.out;
  EXPECT_NE(r.err.find("no plan fits in 85.52 GB per device"), std::string::npos) << r.err;
}

// The search's launch line is the export's flags, one source for both.
TEST(SetupFrom, SearchLaunchLineIsTheExport) {
  const CommandResult r =
      RunBmpipe("search --model llama3-8b --device h100-80gb --devices 8 --gbs 64 --seq 4096 --flash-attn");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string launch = Line(r.out, "  launch     ");
  const std::size_t exported = r.out.find("# bmpipe plan for");
  ASSERT_FALSE(launch.empty());
  ASSERT_NE(exported, std::string::npos);
  std::string flags;
  std::size_t at = exported;
  while (at < r.out.size()) {
    const std::size_t end = r.out.find('\n', at);
    const std::string line = r.out.substr(at, end - at);
    if (!line.empty() && line[0] != '#') flags += (flags.empty() ? "" : " ") + line;
    if (end == std::string::npos) break;
    at = end + 1;
  }
  EXPECT_EQ(launch.substr(std::string("  launch     ").size(), flags.size()), flags);
  EXPECT_NE(flags.find("--pipeline-model-parallel-layout"), std::string::npos);
  EXPECT_NE(flags.find("--attention-backend flash"), std::string::npos);
}

// An export names no file it does not write: torchtitan's arguments and their schedule CSV.
TEST(SetupFrom, TorchTitanExportWritesTheScheduleItNames) {
  const std::string dir = testing::MakeTempDir();
  CommandResult r = RunBmpipe("plan --model llama3-8b --device h100-80gb --pp 4 --vpp 2 --gbs 8 --seq 4096 "
                              "--schedule zb-v --target torchtitan --time-limit 1 --export torchtitan --export-out '" +
                              dir + "/torchtitan.args'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(std::filesystem::exists(dir + "/schedule.csv")) << r.out;
  EXPECT_NE(testing::ReadFile(dir + "/torchtitan.args").find("pipeline_parallel_schedule_csv schedule.csv"),
            std::string::npos);
  // The op order of the plan: one row per rank, starting with the first stage's first forward.
  const std::string csv = testing::ReadFile(dir + "/schedule.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 4) << csv;
  EXPECT_EQ(csv.rfind("0F0", 0), 0u) << csv;
  std::filesystem::remove_all(dir);
}

// calibrate on the user's own model (a config path, relative to the table) and device file, and
// the device file it writes read back by simulate.
TEST(SetupFrom, CalibrateReadsAConfigPathAndADeviceFile) {
  const std::string dir = testing::MakeTempDir();
  std::filesystem::create_directories(dir + "/models");
  std::filesystem::copy_file(testing::SourcePath("tests/data/hf/llama3-8b.json"), dir + "/models/mine.json");
  std::ofstream(dir + "/my-device.yaml") << "name: my-h100\nbased_on: h100-80gb\nefficiency:\n  gemm: 0.6\n";
  std::ofstream(dir + "/runs.yaml") << "runs:\n"
                                       "  - id: mine\n"
                                       "    source: my cluster\n"
                                       "    states: llama3 8b, tp 1 pp 2 dp 4\n"
                                       "    model: models/mine.json\n"
                                       "    device: my-device.yaml\n"
                                       "    tp: 1\n    pp: 2\n    dp: 4\n    mbs: 1\n    gbs: 64\n    seq: 8192\n"
                                       "    recompute: full\n    flash_attention: true\n"
                                       "    measured: {iteration_time_s: 9.5}\n";
  CommandResult r = RunBmpipe("calibrate --runs runs.yaml --fit gemm --device-out fitted.yaml", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("my-h100"), std::string::npos) << r.out;
  r = RunBmpipe("simulate --model models/mine.json --device fitted.yaml --pp 2 --dp 4 --gbs 64 --seq 8192 "
                "--flash-attn --recompute full",
                dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("my-h100 (calibrated)"), std::string::npos) << r.out;
  // The fit reproduces the measurement with the written file.
  const std::string time = Line(r.out, "Iteration time");
  ASSERT_FALSE(time.empty());
  const double seconds = std::stod(time.substr(std::string("Iteration time").size()));
  EXPECT_NEAR(seconds, 9.5, 9.5 * 0.02);
  std::filesystem::remove_all(dir);
}

// A run table's row takes its setup from the launcher's file (relative to the table); the row's
// own keys win, and validate predicts what simulate --setup-from predicts.
TEST(SetupFrom, RunTableRowsTakeTheLaunchersFile) {
  const std::string dir = testing::MakeTempDir();
  std::filesystem::copy_file(testing::SourcePath("tests/data/launchers/megatron-lm-llama3-8b-h100-fp8.args"),
                             dir + "/launch.args");
  std::ofstream(dir + "/runs.yaml") << "runs:\n"
                                       "  - id: mine\n"
                                       "    source: my cluster\n"
                                       "    states: Megatron-LM's Llama 3 8B FP8 example on 8 H100\n"
                                       "    model: llama3-8b\n"
                                       "    device: h100-80gb\n"
                                       "    setup_from: launch.args\n"
                                       "    dp: 8\n"
                                       "    measured: {iteration_time_s: 9.5}\n";
  CommandResult r = RunBmpipe("validate --table runs.yaml", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const CommandResult sim = RunBmpipe("simulate --model llama3-8b --device h100-80gb --dp 8 --setup-from launch.args", dir);
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  const std::string time = Line(sim.out, "Iteration time");
  ASSERT_FALSE(time.empty());
  const double seconds = std::stod(time.substr(std::string("Iteration time").size()));
  EXPECT_NE(Line(r.out, "mine ").find(fmt::format("{:.2f} s", seconds)), std::string::npos) << seconds << "\n" << r.out;
  // A file the table cannot say is refused with the row's path.
  std::ofstream(dir + "/runs.yaml") << "runs:\n  - id: mine\n    source: s\n    states: s\n    model: llama3-8b\n"
                                       "    device: h100-80gb\n    setup_from: missing.args\n    dp: 8\n"
                                       "    measured: {iteration_time_s: 9.5}\n";
  r = RunBmpipe("validate --table runs.yaml", dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("setup_from"), std::string::npos) << r.err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace bmpipe
