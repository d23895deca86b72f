// Launcher configurations read back as plans: every export of a planned problem reads back to the
// plan itself when the format can express it, and to the closest setting the export names (its
// simulated time) when it cannot; detection; and the errors, each naming the flag, value and fix.
#include "bmpipe/frameworks/formats.h"
#include "bmpipe/frameworks/settings.h"

#include <functional>
#include <map>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "bmpipe/baselines/common.h"
#include "bmpipe/core/text.h"
#include "bmpipe/cost/problem_builder.h"
#include "bmpipe/hardware/device.h"
#include "bmpipe/frameworks/formats.h"
#include "bmpipe/frameworks/settings.h"
#include "bmpipe/io/problem_json.h"
#include "bmpipe/problem/problem_reader.h"
#include "bmpipe/sim/simulator.h"
#include "bmpipe/solve/planner.h"
#include "test_support.h"

namespace bmpipe {
namespace {

Problem Llama8b() {
  TrainingSetup s;
  s.tp = 2;
  s.pp = 4;
  s.dp = 2;
  s.micro_batch_size = 1;
  s.global_batch_size = 64;
  s.seq = 4096;
  s.sequence_parallel = true;
  s.distributed_optimizer = true;
  return BuildProblem(ModelPreset("llama3-8b").value(), DevicePreset("a100-80gb").value(), s).value();
}

struct Case {
  std::string name;
  Problem problem;
};

std::vector<Case> Cases() {
  return {{"tiny", LoadProblem(testing::SourcePath("examples/tiny/problem.json")).value()},
          {"demo", LoadProblem(testing::SourcePath("examples/mindformers-demo/problem.yaml")).value()},
          {"demo-vpp3", LoadProblem(testing::SourcePath("examples/mindformers-demo/problem-vpp3.yaml")).value()},
          {"llama3-8b", Llama8b()},
          // ZB-V, interleaved ZB and DualPipeV: only torchtitan (ZBVZeroBubble,
          // InterleavedZeroBubble, DualPipeV) of these formats runs them.
          {"llama3-8b zb-v",
           LoadProblem(testing::SourcePath("tests/golden/exports/llama3-8b-pp4-zb-v-torch/problem.json")).value()},
          {"llama3-8b interleaved-zb",
           LoadProblem(testing::SourcePath("tests/golden/exports/llama3-8b-pp4-vpp2-interleaved-zb-torch/problem.json"))
               .value()},
          {"llama3-8b dualpipev",
           LoadProblem(testing::SourcePath("tests/golden/exports/llama3-8b-pp4-dualpipev-torch/problem.json")).value()}};
}

Plan Planned(const Problem& problem) {
  PlannerOptions options;
  options.time_limit_s = 5;
  const PlannerResult r = PlanPipeline(problem, options).value();
  EXPECT_TRUE(r.status == ModelStatus::kOptimal || r.status == ModelStatus::kFeasible);
  return r.plan;
}

// The planner's stages with every decoder layer at `want` (none: NoneOption), the embedding and
// head at NoneOption; nullopt when a decoder layer has no such option.
std::optional<Plan> Uniform(const Problem& problem, const Plan& stages, Recompute want) {
  const ModelShape shape = ShapeOf(problem);
  Plan plan = stages;
  plan.option = NoneOptions(problem);
  if (want.none()) return plan;
  for (LayerIdx l = shape.body_begin; l < shape.body_end; ++l) {
    plan.option[l] = FindRecompute(problem.layers[l], want);
    if (plan.option[l] < 0) return std::nullopt;
  }
  return plan;
}

TimeNs Iteration(const Problem& problem, const Plan& plan) { return SimulatePlan(problem, plan).value().iteration_ns; }

std::map<OptionIdx, int> StageOptions(const Plan& plan, StageIdx s) {
  std::map<OptionIdx, int> count;
  for (LayerIdx l = plan.begin(s); l < plan.end(s); ++l) ++count[plan.option[l]];
  return count;
}

std::string MegatronRunFlags(const Problem& problem) {
  if (!problem.training) return "";
  const TrainingInfo& t = *problem.training;
  return fmt::format("--tensor-model-parallel-size {} --micro-batch-size {} --global-batch-size {} --seq-length {}{}{}{}\n",
                     t.tensor_parallel, t.micro_batch_size, t.global_batch_size, t.seq_length,
                     t.sequence_parallel ? " --sequence-parallel" : "",
                     t.distributed_optimizer ? " --use-distributed-optimizer" : "",
                     t.overlap_grad_reduce ? " --overlap-grad-reduce" : "");
}

// Every format: the export reads back, detected from its content, to `plan` when `exact`, else
// to the setting whose simulated time the export states.
void CheckRoundTrips(const Problem& problem, const Plan& plan, bool exact) {
  for (const FrameworkId format : {FrameworkId::kMegatron, FrameworkId::kMindFormers, FrameworkId::kDeepSpeed,
                                    FrameworkId::kTorchTitan}) {
    const std::string name = FormatNames()[static_cast<std::size_t>(format)];
    SCOPED_TRACE(name);
    const Result<std::string> text = ExportPlan(problem, plan, format);
    if (!text.ok()) {
      // What the formats cannot launch at all: DeepSpeed has no interleaved schedule, MindFormers no
      // stage without a decoder layer, none but torchtitan a split backward.
      EXPECT_TRUE((format == FrameworkId::kDeepSpeed && problem.pipeline.chunks > 1) ||
                  (problem.pipeline.SplitBackward() && format != FrameworkId::kTorchTitan) ||
                  (format == FrameworkId::kMindFormers &&
                   text.error().message.find("holds no decoder layer") != std::string::npos))
          << text.error().message;
      continue;
    }
    const PlanFormat detected = DetectPlanFormat(text.value()).value();
    EXPECT_EQ(PlanFormatName(detected), name);
    std::vector<std::string> notes;
    // A launch script passes the run's own parallel and batch flags with the exported ones.
    const std::string launch = format == FrameworkId::kMegatron ? text.value() + MegatronRunFlags(problem) : text.value();
    const Result<Plan> back = ReadLauncherPlan(launch, detected, problem, "export." + name, &notes);
    if (!back.ok()) {
      // The closest setting recomputes every decoder layer whole, and the problem has no such option:
      // the export says it cannot simulate it, and the reading says why.
      EXPECT_FALSE(exact) << back.error().message;
      EXPECT_NE(back.error().message.find("has no option"), std::string::npos) << back.error().message;
      EXPECT_NE(text.value().find("bmpipe cannot simulate"), std::string::npos);
      continue;
    }
    EXPECT_EQ(back.value().stage_begin, plan.stage_begin);
    if (format == FrameworkId::kMindFormers && !TargetRunsPlan(problem, plan, TargetKind::kMindFormers)) {
      // An option MindFormers has no list for (tiny's 'selective', core attention) is exported as
      // full recomputation; a stage with both select-only and comm-only layers runs otherwise from
      // MindFormers' counts. Either the export says so with what it runs, or what it runs is as fast.
      EXPECT_TRUE(text.value().find("has no MindFormers list") != std::string::npos ||
                  text.value().find("NOT the plan") != std::string::npos ||
                  Iteration(problem, back.value()) == Iteration(problem, plan))
          << text.value();
    } else if (format == FrameworkId::kMindFormers) {
      // MindFormers counts options from each stage's first layer: the same options per stage.
      for (StageIdx s = 0; s < plan.num_stages(); ++s) EXPECT_EQ(StageOptions(back.value(), s), StageOptions(plan, s));
      EXPECT_EQ(Iteration(problem, back.value()), Iteration(problem, plan));
    } else if (exact || back.value().option == plan.option) {
      // Expressible (the planner's plan may be): the plan itself.
      EXPECT_EQ(back.value().option, plan.option);
      EXPECT_EQ(Iteration(problem, back.value()), Iteration(problem, plan));
    } else {
      // The export states the simulated iteration of the setting it writes.
      const std::string stated = FormatDuration(Iteration(problem, back.value()));
      EXPECT_NE(text.value().find("simulated iteration is " + stated), std::string::npos)
          << "the read-back simulates to " << stated << "\n" << text.value();
    }
  }
}

TEST(LauncherPlan, ExportsReadBackToThePlanOrTheClosestSettingTheyName) {
  BMPIPE_SLOW_TEST();
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    const Plan planned = Planned(c.problem);
    {
      SCOPED_TRACE("no recomputation");
      CheckRoundTrips(c.problem, *Uniform(c.problem, planned, Recompute{}), true);
    }
    if (std::optional<Plan> full = Uniform(c.problem, planned, Recompute{kRecomputeLayer})) {
      SCOPED_TRACE("full recomputation");
      CheckRoundTrips(c.problem, *full, true);
    }
    {
      SCOPED_TRACE("the planner's plan");
      CheckRoundTrips(c.problem, planned, false);
    }
  }
}

TEST(LauncherPlan, ReadsMegatronArgumentsAsMegatronDoes) {
  const Problem tiny = LoadProblem(testing::SourcePath("examples/tiny/problem.json")).value();
  auto stages = [&](const std::string& args) {
    const Result<Plan> plan = ReadLauncherPlan(args, PlanFormat{FrameworkId::kMegatron}, tiny, "args");
    return plan.ok() ? StageSizes(StageEnds(plan.value())) : plan.error().message;
  };
  // Even split of 10 decoder layers with the embedding and loss counted: 12 / 4 = 3 per stage.
  EXPECT_EQ(stages("--pipeline-model-parallel-size 4 --num-layers 10 --account-for-embedding-in-pipeline-split "
                   "--account-for-loss-in-pipeline-split"),
            "[3, 3, 3, 3]");
  EXPECT_EQ(stages("# first and last\n--pipeline-model-parallel-size=4\n--num-layers 10\n"
                   "--decoder-first-pipeline-num-layers 1 \\\n  --decoder-last-pipeline-num-layers 1\n"),
            "[2, 4, 4, 2]");
  // The layout's grammar: repeats of a character and of a group, commas are cosmetic.
  EXPECT_EQ(stages("--pipeline-model-parallel-size 4 --num-layers 10 --pipeline-model-parallel-layout 'Et|(t*3|)*2,tttL'"),
            "[2, 3, 3, 4]");
  // A single command line, with the launcher's own words.
  const std::string line = "torchrun --nproc_per_node 8 pretrain_gpt.py --pipeline-model-parallel-size 4 --num-layers 10 "
                           "--pipeline-model-parallel-layout \"Et*2|t*3|t*3|t*2L\" --hidden-size 4096 --lr 3e-4";
  std::vector<std::string> notes;
  const Plan plan = ReadLauncherPlan(line, PlanFormat{FrameworkId::kMegatron}, tiny, "cmd", &notes).value();
  EXPECT_EQ(StageSizes(StageEnds(plan)), "[3, 3, 3, 3]");
  ASSERT_EQ(notes.size(), 2u);
  // Words after an unknown flag are taken as its values.
  EXPECT_EQ(notes[1], "not read (they do not change the pipeline plan): torchrun --nproc_per_node --hidden-size --lr");
  // Recomputation: block N = the first N decoder layers of each stage; selective modules.
  const Plan block = ReadLauncherPlan(line + " --recompute-granularity full --recompute-method block --recompute-num-layers 1",
                                      PlanFormat{FrameworkId::kMegatron}, tiny, "cmd")
                         .value();
  const OptionIdx none = 0, selective = 1, full = 2;
  EXPECT_EQ(block.option, (std::vector<OptionIdx>{0, full, none, full, none, none, full, none, none, full, none, 0}));
  const Plan sel = ReadLauncherPlan(line + " --recompute-activations", PlanFormat{FrameworkId::kMegatron}, tiny, "cmd").value();
  for (LayerIdx l = 1; l <= 10; ++l) EXPECT_EQ(sel.option[l], selective);
}

std::string MegatronError(const Problem& problem, const std::string& args) {
  const Result<Plan> plan = ReadLauncherPlan(args, PlanFormat{FrameworkId::kMegatron}, problem, "args");
  return plan.ok() ? "(no error)" : plan.error().message;
}

TEST(LauncherPlan, MegatronErrorsNameTheFlagTheValueAndTheFix) {
  const Problem tiny = LoadProblem(testing::SourcePath("examples/tiny/problem.json")).value();
  const std::string base = "--pipeline-model-parallel-size 4 --num-layers 10 ";
  const std::string split = base + "--decoder-first-pipeline-num-layers 1 --decoder-last-pipeline-num-layers 1 ";
  EXPECT_EQ(MegatronError(tiny, base + "--pipeline-model-parallel-layout 'Et*3|t*3|t*2|tx*2L'"),
            "args: --pipeline-model-parallel-layout \"Et*3|t*3|t*2|tx*2L\": stage 3 has 'x', which is not a layer; "
            "Megatron's layout characters are E (embedding), t (decoder layer), L (loss and head), m (MTP), with '|' "
            "between stages");
  EXPECT_EQ(MegatronError(tiny, base + "--pipeline-model-parallel-layout 'Et*4|t*3|t*3L'"),
            "args: --pipeline-model-parallel-layout \"Et*4|t*3|t*3L\": its 3 stages do not divide among "
            "--pipeline-model-parallel-size 4; Megatron needs ranks x virtual stages of them");
  EXPECT_EQ(MegatronError(tiny, base + "--pipeline-model-parallel-layout 'E|t*3|t*3|t*2|t*2|L|t|t'"),
            "args: the configuration has 2 virtual stages per rank (the layout's stages / the pipeline size), but the "
            "problem has pipeline.chunks 1; give a configuration with 1");
  // Multi-token prediction runs in the head layer: 'm' only just before L, one per module.
  EXPECT_EQ(MegatronError(tiny, base + "--pipeline-model-parallel-layout 'Et*3|t*3|t*3|tmL'"), "(no error)");
  EXPECT_EQ(MegatronError(tiny, base + "--pipeline-model-parallel-layout 'Et*3|t*3|tmt*2|tL'"),
            "args: --pipeline-model-parallel-layout \"Et*3|t*3|tmt*2|tL\": bmpipe's problems run the "
            "multi-token-prediction modules in the head layer, so each 'm' comes on the last stage, just before L (as "
            "in ...|t*4mL)");
  EXPECT_EQ(MegatronError(tiny, base + "--mtp-num-layers 2 --pipeline-model-parallel-layout 'Et*3|t*3|t*3|tmL'"),
            "args: --pipeline-model-parallel-layout \"Et*3|t*3|t*3|tmL\" places 1 'm', but --mtp-num-layers is 2; "
            "Megatron needs one 'm' per module");
  EXPECT_EQ(MegatronError(tiny, base + "--pipeline-model-parallel-layout 'Et*5||t*5|L'"),
            "args: the configuration: stage 1 (rank 1, chunk 0) holds no layer of the problem; bmpipe's stages hold "
            "at least one (move a layer onto it)");
  EXPECT_EQ(MegatronError(tiny, split + "--recompute-granularity selective --recompute-modules core_attn mlp"),
            "args: --recompute-granularity selective --recompute-modules core_attn mlp recomputes 'selective+mlp' on "
            "layer 1 (decoder), which has no option meaning that (its options: none, selective, full); add an option "
            "'selective+mlp' to the problem's layers, or change the setting");
  EXPECT_EQ(MegatronError(tiny, split + "--recompute-granularity selective --recompute-modules moe_act"),
            "args: --recompute-modules moe_act: recomputing 'moe_act' is not modeled by bmpipe's options (core_attn, "
            "mlp, moe, layernorm and mla_up_proj are); remove it");
  EXPECT_EQ(MegatronError(tiny, split + "--recompute-granularity full --recompute-method uniform --recompute-num-layers 2"),
            "args: --recompute-granularity full --recompute-method uniform --recompute-num-layers 2: uniform "
            "checkpoints groups of 2 decoder layers as one unit, which bmpipe's per-layer options do not model; give "
            "--recompute-num-layers 1 (every layer) or --recompute-method block");
  EXPECT_EQ(MegatronError(tiny, "--pipeline-model-parallel-size 8 --num-layers 10"),
            "args: --pipeline-model-parallel-size 8: the problem's run has pipeline.ranks = 4; this configuration is "
            "not that run (give --pipeline-model-parallel-size 4, or the problem of this configuration)");
  EXPECT_EQ(MegatronError(tiny, base + "--pipeline-model-parallel-layout \"Et*3|t*3|t*3|t"),
            "args: line 1: the quote \" opened here is not closed; close it");
  const Problem llama = Llama8b();
  EXPECT_EQ(MegatronError(llama, "--pipeline-model-parallel-size 4 --num-layers 32 --tensor-model-parallel-size 4 "
                                 "--sequence-parallel --use-distributed-optimizer"),
            "args: --tensor-model-parallel-size 4: the problem's run has training.tensor_parallel = 2; this "
            "configuration is not that run (give --tensor-model-parallel-size 2, or the problem of this configuration)");
  EXPECT_EQ(MegatronError(llama, "--pipeline-model-parallel-size 4 --num-layers 32 --tensor-model-parallel-size 2 "
                                 "--use-distributed-optimizer"),
            "args: --sequence-parallel is not given: the problem's run has training.sequence_parallel = true; this "
            "configuration is not that run (give --sequence-parallel, or give the problem of this configuration)");
}

// Fine-grained activation offloading reads back as the offload part on every decoder layer when
// its modules are the problem's; what a per-layer plan cannot say (a fraction, a delta across
// ranks, another least size, other modules, full recomputation beside it) is refused by name.
TEST(LauncherPlan, MegatronOffloadIsTheOffloadPartOnEveryDecoderLayer) {
  const std::string dir = "tests/golden/exports/llama3-8b-pp4-offload-megatron/";
  const Problem problem = LoadProblem(testing::SourcePath(dir + "problem.json")).value();
  const std::string base = "--pipeline-model-parallel-size 4 --num-layers 32 --tensor-model-parallel-size 1 "
                           "--micro-batch-size 1 --global-batch-size 64 --seq-length 16384 "
                           "--pipeline-model-parallel-layout 'Et*6|t*8|t*10|t*8L' ";
  const std::string offload = base + "--fine-grained-activation-offloading --offload-modules core_attn attn_proj qkv_linear ";
  const Result<Plan> plan = ReadLauncherPlan(offload, PlanFormat{FrameworkId::kMegatron}, problem, "args");
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  for (LayerIdx l = 1; l + 1 < problem.num_layers(); ++l) {
    EXPECT_EQ(problem.layers[l].options[plan.value().option[l]].name, "offload") << l;
  }
  EXPECT_EQ(problem.layers[0].options[plan.value().option[0]].name, "none");
  EXPECT_EQ(MegatronError(problem, offload + "--activation-offload-fraction 0.5"),
            "args: --activation-offload-fraction 0.5: Megatron then keeps the later offload groups of each "
            "micro-batch's chunk on the device by a share of their count, which bmpipe's per-layer options do not "
            "describe; give 1.0 or remove it");
  EXPECT_EQ(MegatronError(problem, offload + "--activation-offload-fraction 1.0 --delta-offload-bytes-across-pp-ranks 0"),
            "(no error)");
  EXPECT_EQ(MegatronError(problem, offload + "--delta-offload-bytes-across-pp-ranks 1000000"),
            "args: --delta-offload-bytes-across-pp-ranks 1000000: Megatron then keeps the first micro-batches' groups "
            "on the later ranks, which bmpipe's per-layer options do not describe; give 0 or remove it");
  EXPECT_EQ(MegatronError(problem, offload + "--min-offloaded-tensor-size 1"),
            "args: --min-offloaded-tensor-size 1: bmpipe costs Megatron's default, 1048576 elements; give it or "
            "remove the flag");
  EXPECT_EQ(MegatronError(problem, base + "--fine-grained-activation-offloading --offload-modules core_attn"),
            "args: --offload-modules core_attn: the problem's offload options move the tensors of attn_proj, "
            "core_attn, qkv_linear (training.offload_modules); plan with --offload activations --offload-modules "
            "core_attn");
  EXPECT_EQ(MegatronError(problem, base + "--offload-modules core_attn"),
            "args: --offload-modules without --fine-grained-activation-offloading: Megatron offloads nothing; add "
            "--fine-grained-activation-offloading or remove --offload-modules");
  EXPECT_EQ(MegatronError(problem, base + "--fine-grained-activation-offloading"),
            "args: --fine-grained-activation-offloading without --offload-modules: megatron-core asserts that "
            "offload_modules is not empty; name the modules (e.g. --offload-modules core_attn)");
}

TEST(LauncherPlan, DeepSpeedAndTorchTitanAreChecked) {
  const Problem vpp3 = LoadProblem(testing::SourcePath("examples/mindformers-demo/problem-vpp3.yaml")).value();
  const Result<std::string> ds = ExportPlan(vpp3, EvenPlan(vpp3), FrameworkId::kDeepSpeed);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.error().message, "target deepspeed (DeepSpeed >= 0.14 (a PipelineModule subclass with the plan's parts "
                                "and checkpointed layers)) has no interleaved schedule; plan with one chunk per rank "
                                "(--vpp 1, or pipeline.chunks: 1)");
  const Problem tiny = LoadProblem(testing::SourcePath("examples/tiny/problem.json")).value();
  const std::string text = ExportPlan(tiny, EvenPlan(tiny), FrameworkId::kDeepSpeed).value();
  auto edited_error = [&](const std::string& source, PlanFormat format, const std::string& from, const std::string& to) {
    std::string edited = source;
    const std::size_t at = edited.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    edited.replace(at, from.size(), to);
    const Result<Plan> plan = ReadLauncherPlan(edited, format, tiny, "plan.py");
    return plan.ok() ? std::string("(no error)") : plan.error().message;
  };
  auto error = [&](const std::string& from, const std::string& to) {
    return edited_error(text, PlanFormat{FrameworkId::kDeepSpeed}, from, to);
  };
  EXPECT_EQ(error("parts = [0, 3, 6, 9, 12]", "parts = [0, 3, 3, 9, 12]"),
            "plan.py: parts[2] = 3: parts must start at 0, rise strictly (every stage holds a layer) and end at 12, the "
            "problem's layers");
  EXPECT_EQ(error("activation_checkpoint_interval = 0", "activation_checkpoint_interval = 2"),
            "plan.py: activation_checkpoint_interval 2: DeepSpeed then checkpoints blocks of 2 layers as one unit, "
            "which bmpipe's per-layer options do not model; give 0 or 1");
  EXPECT_EQ(error("\"gradient_accumulation_steps\": 8", "\"gradient_accumulation_steps\": 4"),
            "plan.py: ds_config.gradient_accumulation_steps = 4: the pipeline engine runs this many micro-batches; the "
            "problem has 8");
  EXPECT_EQ(error("parts = [0, 3, 6, 9, 12]", "parts = list(range(0, 13, 3))"),
            "plan.py: parts is assigned an expression; bmpipe reads literal values only (nothing is executed): write "
            "the first layer of each stage, and the layer count at the end as a literal");
  const std::string titan = ExportPlan(tiny, EvenPlan(tiny), FrameworkId::kTorchTitan).value();
  EXPECT_EQ(edited_error(titan, PlanFormat{FrameworkId::kTorchTitan}, "layers.3,layers.4", "layers.4,layers.3"),
            "plan.py: --parallelism.module_fqns_per_model_part: stage 1 ('layers.2,layers.4,layers.3'): layers.4 comes "
            "where layers.3 belongs; list layers.0 to layers.9 in order, each once");
  EXPECT_EQ(edited_error(titan, PlanFormat{FrameworkId::kTorchTitan}, "activation_checkpoint:none", "activation_checkpoint:selective"),
            "plan.py: activation_checkpoint:selective: torchtitan's selective checkpointing is none of bmpipe's "
            "recomputation options; give activation_checkpoint:none or activation_checkpoint:full");
  EXPECT_EQ(edited_error(titan, PlanFormat{FrameworkId::kTorchTitan}, "--training.local_batch_size 8", "--training.local_batch_size 6"),
            "plan.py: --training.local_batch_size 6 / --parallelism.pipeline_parallel_microbatch_size 1 is torchtitan's "
            "microbatch count, but the problem has 8 micro-batches; give --training.local_batch_size 8");
  const Result<Plan> csv = ReadLauncherPlan("0F0,0F1\n1F0,1B0\n", PlanFormat{FrameworkId::kTorch}, tiny, "s.csv");
  ASSERT_FALSE(csv.ok());
  EXPECT_NE(csv.error().message.find("fixes the order of the ops, not the stages"), std::string::npos);
}

TEST(LauncherPlan, DetectsTheFormat) {
  EXPECT_EQ(DetectPlanFormat("0F0,0F1,,0B0\n1F0,1B0\n").value(), PlanFormat{FrameworkId::kTorch});
  EXPECT_EQ(DetectPlanFormat("# a comment\n--num-layers 4\n").value(), PlanFormat{FrameworkId::kMegatron});
  EXPECT_EQ(DetectPlanFormat("python pretrain_gpt.py --num-layers 4\n").value(), PlanFormat{FrameworkId::kMegatron});
  EXPECT_EQ(DetectPlanFormat("--module llama3\n--parallelism.pipeline_parallel_degree 4\n").value(), PlanFormat{FrameworkId::kTorchTitan});
  EXPECT_EQ(DetectPlanFormat("from deepspeed.pipe import PipelineModule\nparts = [0, 1]\n").value(), PlanFormat{FrameworkId::kDeepSpeed});
  EXPECT_EQ(DetectPlanFormat("---\nstages:\n  - layers: []\n").value(), kPlanFile);
  EXPECT_EQ(DetectPlanFormat("{\"stages\": []}").value(), kPlanFile);
  EXPECT_EQ(DetectPlanFormat("parallel_config:\n  pipeline_stage: 4\n").value(), PlanFormat{FrameworkId::kMindFormers});
  EXPECT_FALSE(DetectPlanFormat("import os\nX = 1\n").ok());
  // Structure first: flags inside another format's strings do not make it Megatron's arguments.
  EXPECT_EQ(DetectPlanFormat("description: >-\n  launched as\n\n  --tensor-model-parallel-size 8\n"
                             "parallel_config:\n  pipeline_stage: 4\n")
                .value(),
            PlanFormat{FrameworkId::kMindFormers});
  EXPECT_EQ(DetectPlanFormat("{\"stages\": [],\n \"name\": \"a --num-layers 4 run\"}").value(), kPlanFile);
  EXPECT_EQ(DetectPlanFormat("stages: []\nname: |\n  --num-layers 4\n").value(), kPlanFile);
  EXPECT_EQ(ParsePlanFormat("megatorn").error().message,
            "--plan-format megatorn: unknown format; did you mean 'megatron'?; formats: json, megatron, mindformers, "
            "deepspeed, torchtitan, csv");
}

}  // namespace
}  // namespace bmpipe

namespace bmpipe {
namespace {

// A setup on a small model that the frameworks are asked to run: one field changed per case from
// Llama 3 8B with TP 2, PP 4, DP 2 and the distributed optimizer (Llama8b above).
struct SetupCase {
  std::string name;
  std::string model = "llama3-8b";
  std::string device = "a100-80gb";
  std::function<void(TrainingSetup&)> change;
  // The message of each target that refuses the setup, or "" where it runs it.
  std::map<TargetKind, std::string> refused;
};

Problem SetupProblem(const SetupCase& c) {
  TrainingSetup s;
  s.tp = 2;
  s.pp = 4;
  s.dp = 2;
  s.micro_batch_size = 1;
  s.global_batch_size = 64;
  s.seq = 4096;
  s.sequence_parallel = true;
  s.distributed_optimizer = true;
  c.change(s);
  Result<Problem> problem = BuildProblem(ModelPreset(c.model).value(), DevicePreset(c.device).value(), s);
  EXPECT_TRUE(problem.ok()) << problem.error().message;
  return problem.value();
}

std::vector<SetupCase> SetupCases() {
  const std::string ds = "target deepspeed (DeepSpeed >= 0.14 (a PipelineModule subclass with the plan's parts and "
                         "checkpointed layers)): ";
  const std::string titan = "target torchtitan (torchtitan >= 0.2 (module_fqns_per_model_part, schedule CSV)): ";
  // What refuses expert parallelism (every MoE case), beside `more`.
  auto ep_refused = [&](int ep, std::map<TargetKind, std::string> more = {}) {
    more[TargetKind::kDeepSpeed] =
        ds + fmt::format("training.expert_parallel = {}: the export's PipelineModule has no expert-parallel layers; "
                         "use --ep 1, or --target megatron",
                         ep);
    more[TargetKind::kTorchTitan] =
        titan + fmt::format("training.expert_parallel = {}: the torchtitan export names only the Llama 3 "
                            "configurations (dense models); use --ep 1, or --target megatron",
                            ep);
    return more;
  };
  const std::string megatron =
      "target megatron (Megatron-Core >= 0.13 with its Transformer Engine layer spec (--pipeline-model-parallel-layout)): ";
  const std::string local =
      "target megatron-local (Megatron-Core >= 0.13 with its local layer spec (--pipeline-model-parallel-layout)): ";
  const std::string keeps_master =
      "training.offload_keeps_master: Megatron-LM takes --optimizer-cpu-offload only with "
      "--use-precision-aware-optimizer, whose offload moves the fp32 master weights to the host too; use --offload "
      "optimizer";
  const std::string interleaving_only =
      "training.moe.comm_overlap with 4 pipeline ranks and no interleaving: Megatron overlaps the MoE all-to-alls "
      "across pipeline ranks only in the interleaved schedule (virtual_pipeline_model_parallel_size must be set); "
      "use --vpp > 1 or --ep-comm-overlap 0";
  const std::string graphs_local =
      local + "training.moe.cuda_graphs: Megatron captures them with Transformer Engine's make_graphed_callables "
              "(\"CUDA Graphs are not supported without TE.\"), which the local layer spec's runs go without; use "
              "--target megatron, or drop --moe-cuda-graphs";
  // What refuses FP8 GEMMs, with or without FP8 weights.
  const std::map<TargetKind, std::string> fp8_refused = {
      {TargetKind::kMegatronLocal,
       local + "training.precision = fp8: FP8 and FP4 GEMMs run in Transformer Engine's modules, which the local layer spec "
               "does not use; use --target megatron or --precision bf16"},
      {TargetKind::kDeepSpeed, ds + "training.precision = fp8: DeepSpeed's pipeline engine trains in bf16 (no FP8 or FP4 "
                                    "GEMMs); use --precision bf16, or --target megatron"},
      {TargetKind::kTorchTitan, titan + "training.precision = fp8: torchtitan 0.3.0 turns float8 on in a configuration "
                                        "function's model converters (Float8LinearConverter), which no argument sets "
                                        "and the Llama 3 8B and 70B configurations lack; use --precision bf16"}};
  std::map<TargetKind, std::string> mxfp8_refused = fp8_refused, nvfp4_refused = fp8_refused;
  for (auto& [kind, message] : mxfp8_refused) {
    message.replace(message.find("precision = fp8"), 15, "precision = mxfp8");
  }
  for (auto& [kind, message] : nvfp4_refused) {
    message.replace(message.find("precision = fp8"), 15, "precision = nvfp4");
  }
  return {
      {"moe-ep", "mixtral-8x7b", "h100-80gb",
       [](TrainingSetup& s) {
         s.dp = 8;
         s.ep = 8;
         s.global_batch_size = 256;
         s.moe_capacity_factor = 1.25;
       },
       ep_refused(8)},
      {"moe-flex-overlap", "mixtral-8x7b", "h100-80gb",
       [](TrainingSetup& s) {
         s.dp = 8;
         s.ep = 8;
         s.vpp = 2;
         s.global_batch_size = 256;
         s.moe_dispatcher = MoeDispatcher::kFlex;
         s.ep_comm_overlap = 0.8;
       },
       ep_refused(8)},
      {"moe-graphs", "mixtral-8x7b", "h100-80gb",
       [](TrainingSetup& s) {
         s.dp = 8;
         s.ep = 8;
         s.global_batch_size = 256;
         s.moe_dispatcher = MoeDispatcher::kFlex;
         s.moe_cuda_graphs = true;
       },
       ep_refused(8, {{TargetKind::kMegatronLocal, graphs_local}})},
      {"moe-graphs-capacity", "mixtral-8x7b", "h100-80gb",
       [](TrainingSetup& s) {
         s.dp = 8;
         s.ep = 8;
         s.global_batch_size = 256;
         s.moe_capacity_factor = 1.0;
         s.moe_cuda_graphs = true;
       },
       ep_refused(8, {{TargetKind::kMegatron,
         megatron + "training.moe.cuda_graphs with training.moe.capacity_factor and the alltoall dispatcher: "
                    "megatron-core asserts \"moe_preprocess cuda graph is not supported when there are DtoH copies and "
                    "synchronizations in the preprocess step\"; use --moe-dispatcher flex, dropless routing "
                    "(--moe-capacity-factor 0), or drop --moe-cuda-graphs"},
        {TargetKind::kMegatronLocal, graphs_local}})},
      {"moe-overlap-no-interleaving", "mixtral-8x7b", "h100-80gb",
       [](TrainingSetup& s) {
         s.dp = 8;
         s.ep = 8;
         s.global_batch_size = 256;
         s.ep_comm_overlap = 0.5;
       },
       ep_refused(8, {{TargetKind::kMegatron, megatron + interleaving_only},
                      {TargetKind::kMegatronLocal, local + interleaving_only}})},
      {"moe-dense-first", "deepseek-v3", "h100-80gb",
       [](TrainingSetup& s) {
         s.ep = 4;
         s.etp = 1;
       },
       ep_refused(4)},
      {"cp", "llama3-8b", "a100-80gb", [](TrainingSetup& s) { s.cp = 2, s.seq = 8192, s.flash_attention = true; },
       {{TargetKind::kMegatronLocal,
         local + "training.context_parallel = 2: the local layer spec's attention asserts \"Context parallelism is "
                 "only supported by TEDotProductAttention!\"; use --target megatron or --cp 1"},
        {TargetKind::kDeepSpeed, ds + "training.context_parallel = 2: DeepSpeed's pipeline engine splits no sequence "
                                      "(its Ulysses sequence parallelism is not part of PipelineModule); use --cp 1"}}},
      {"fp8", "llama3-8b", "h100-80gb", [](TrainingSetup& s) { s.precision = Precision::kFp8; }, fp8_refused},
      {"fp8-delayed", "llama3-8b", "h100-80gb",
       [](TrainingSetup& s) {
         s.precision = Precision::kFp8;
         s.fp8_recipe = "delayed";
       },
       fp8_refused},
      {"mxfp8", "llama3-8b", "b200-180gb", [](TrainingSetup& s) { s.precision = Precision::kMxFp8; }, mxfp8_refused},
      {"nvfp4", "llama3-8b", "gb200", [](TrainingSetup& s) { s.precision = Precision::kNvFp4; }, nvfp4_refused},
      {"nvfp4-weights", "llama3-8b", "b300-288gb",
       [](TrainingSetup& s) {
         s.precision = Precision::kNvFp4;
         s.fp8_params = true;
       },
       nvfp4_refused},
      {"fp8-weights", "llama3-8b", "h100-80gb",
       [](TrainingSetup& s) {
         s.precision = Precision::kFp8;
         s.fp8_params = true;
       },
       fp8_refused},
      {"fp8-no-transpose-cache", "llama3-8b", "h100-80gb",
       [](TrainingSetup& s) {
         s.precision = Precision::kFp8;
         s.fp8_params = true;
         s.no_fp8_transpose_cache = true;
       },
       fp8_refused},
      {"bf16-state", "llama3-8b", "a100-80gb",
       [](TrainingSetup& s) { s.grad_dtype = s.optimizer_dtype = StateDtype::kBf16; },
       {{TargetKind::kDeepSpeed,
         ds + "training.optimizer_dtype = bf16: DeepSpeed keeps bf16 moments only with bf16 master weights "
              "(bf16_optimizer_states needs bf16_master_weights_and_grads), which bmpipe's cost model does not describe "
              "(its master weights stay fp32); use --optimizer-dtype fp32"},
        {TargetKind::kTorchTitan,
         titan + "training.grad_dtype/optimizer_dtype = bf16: torchtitan's FSDP reduces gradients in fp32 "
                 "(mixed_precision_reduce takes only float32) and keeps fp32 optimizer state, and --training.dtype "
                 "bfloat16 would drop the fp32 master weights too; use --grad-dtype fp32 --optimizer-dtype fp32"}}},
      {"bf16-grads", "llama3-8b", "a100-80gb", [](TrainingSetup& s) { s.grad_dtype = StateDtype::kBf16; },
       {{TargetKind::kTorchTitan,
         titan + "training.grad_dtype/optimizer_dtype = bf16: torchtitan's FSDP reduces gradients in fp32 "
                 "(mixed_precision_reduce takes only float32) and keeps fp32 optimizer state, and --training.dtype "
                 "bfloat16 would drop the fp32 master weights too; use --grad-dtype fp32 --optimizer-dtype fp32"}}},
      {"zero3", "llama3-8b", "a100-80gb", [](TrainingSetup& s) { s.zero = 3; },
       {{TargetKind::kDeepSpeed, ds + "training.zero_stage = 3: DeepSpeed's PipelineEngine refuses ZeRO stage 2 and 3 "
                                      "(\"ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism\"); use --zero 1 "
                                      "or --zero 0"}}},
      {"zero2", "llama3-8b", "a100-80gb", [](TrainingSetup& s) { s.zero = 2; },
       {{TargetKind::kDeepSpeed, ds + "training.zero_stage = 2: DeepSpeed's PipelineEngine refuses ZeRO stage 2 and 3 "
                                      "(\"ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism\"); use --zero 1 "
                                      "or --zero 0"}}},
      {"zero0", "llama3-8b", "a100-80gb", [](TrainingSetup& s) { s.distributed_optimizer = false; },
       {{TargetKind::kDeepSpeed,
         ds + "training.grad_dtype = fp32 with zero_stage 0: without ZeRO, DeepSpeed's bf16 pipeline accumulates "
              "gradients in bf16 only (bf16 parameters with data_types.grad_accum_dtype fp32 is an unsupported mix); "
              "add --distributed-optimizer (--zero 1), or --grad-dtype bf16"}}},
      {"offload-optimizer", "llama3-8b", "a100-80gb", [](TrainingSetup& s) { s.offload_optimizer = true; },
       {{TargetKind::kTorchTitan, titan + "training.offload_optimizer: torchtitan's CPU offload moves parameters and "
                                          "gradients to the host too (FSDP's CPUOffloadPolicy), not the optimizer "
                                          "alone; drop optimizer from --offload"}}},
      {"offload-moments", "llama3-8b", "a100-80gb",
       [](TrainingSetup& s) { s.offload_optimizer = s.offload_keeps_master = true; },
       {{TargetKind::kMegatron, megatron + keeps_master}, {TargetKind::kMegatronLocal, local + keeps_master},
        {TargetKind::kDeepSpeed, ds + "training.offload_keeps_master: DeepSpeed's offload_optimizer moves the fp32 master "
                                      "weights to the host with the moments; use --offload optimizer"},
        {TargetKind::kTorchTitan, titan + "training.offload_optimizer: torchtitan's CPU offload moves parameters and "
                                          "gradients to the host too (FSDP's CPUOffloadPolicy), not the optimizer "
                                          "alone; drop optimizer from --offload"}}},
      {"tp-overlap", "llama3-8b", "h100-80gb", [](TrainingSetup& s) { s.tp_comm_overlap = 0.8; },
       {{TargetKind::kMegatronLocal,
         local + "training.tp_comm_overlap: the overlap runs in Transformer Engine's modules, which the local layer "
                 "spec does not use; use --target megatron or --tp-comm-overlap 0"},
        {TargetKind::kDeepSpeed, ds + "training.tp_comm_overlap: DeepSpeed does not overlap tensor-parallel collectives "
                                      "with GEMMs; use --tp-comm-overlap 0"},
        {TargetKind::kTorchTitan, titan + "training.tp_comm_overlap: torchtitan overlaps tensor-parallel collectives only "
                                          "in compiled models (async tensor parallel under torch.compile), which the "
                                          "export does not configure; use --tp-comm-overlap 0"}}},
  };
}

// The framework that writes a target's plans (megatron for those without one).
FrameworkId FormatOf(TargetKind kind) { return TargetOf(kind).runs_on.value_or(FrameworkId::kMegatron); }

// Each setup: every target that runs it exports it and reads the export back to the same plan and
// iteration; every other target refuses it, in TargetRunsSetup and in the export, naming the
// field, the value and the fix. `any` and `torch` run everything.
TEST(LauncherPlan, SetupsExportAndReadBackOrAreRefused) {
  for (const SetupCase& c : SetupCases()) {
    SCOPED_TRACE(c.name);
    const Problem problem = SetupProblem(c);
    const Plan plan = EvenPlan(problem);
    {
      // The setup survives the problem file (--dump-problem, then --problem).
      const Problem read = ReadProblem(ParseDocument(ProblemJsonText(problem, ""), "p.json").value(), "p.json").value();
      const TrainingInfo &a = *problem.training, &b = *read.training;
      EXPECT_EQ(ZeroStage(a), ZeroStage(b));
      for (const Target& t : Targets()) EXPECT_EQ(TargetRunsSetup(t.kind, a).ok(), TargetRunsSetup(t.kind, b).ok());
      EXPECT_EQ(std::tie(a.context_parallel, a.expert_parallel, a.expert_tensor_parallel, a.precision, a.fp8_params,
                         a.grad_dtype, a.optimizer_dtype, a.tp_comm_overlap, a.offload_optimizer),
                std::tie(b.context_parallel, b.expert_parallel, b.expert_tensor_parallel, b.precision, b.fp8_params,
                         b.grad_dtype, b.optimizer_dtype, b.tp_comm_overlap, b.offload_optimizer));
      EXPECT_EQ(std::tie(a.moe.experts, a.moe.top_k, a.moe.expert_ffn, a.moe.shared_expert_ffn, a.moe.dense_layers,
                         a.moe.capacity_factor, a.moe.dispatcher, a.moe.comm_overlap),
                std::tie(b.moe.experts, b.moe.top_k, b.moe.expert_ffn, b.moe.shared_expert_ffn, b.moe.dense_layers,
                         b.moe.capacity_factor, b.moe.dispatcher, b.moe.comm_overlap));
    }
    EXPECT_TRUE(TargetRunsSetup(TargetKind::kAny, *problem.training).ok());
    EXPECT_TRUE(TargetRunsSetup(TargetKind::kTorch, *problem.training).ok());
    for (const TargetKind kind : {TargetKind::kMegatron, TargetKind::kMegatronLocal, TargetKind::kDeepSpeed,
                                  TargetKind::kTorchTitan}) {
      SCOPED_TRACE(TargetOf(kind).name);
      const Status runs = TargetRunsSetup(kind, *problem.training, &problem.pipeline);
      const Result<std::string> text = ExportPlan(problem, plan, FormatOf(kind), kind);
      auto refused = c.refused.find(kind);
      if (refused != c.refused.end()) {
        ASSERT_FALSE(runs.ok());
        EXPECT_EQ(runs.error().message, refused->second);
        ASSERT_FALSE(text.ok());
        EXPECT_EQ(text.error().message, refused->second);
        continue;
      }
      ASSERT_TRUE(runs.ok()) << runs.error().message;
      ASSERT_TRUE(text.ok()) << text.error().message;
      const PlanFormat format = DetectPlanFormat(text.value()).value();
      const Result<Plan> back = ReadLauncherPlan(text.value(), format, problem, "export");
      ASSERT_TRUE(back.ok()) << back.error().message << "\n" << text.value();
      EXPECT_EQ(back.value().stage_begin, plan.stage_begin);
      EXPECT_EQ(back.value().option, plan.option);
      EXPECT_EQ(Iteration(problem, back.value()), Iteration(problem, plan));
    }
  }
}

// The flags each setup adds, as the exports write them.
TEST(LauncherPlan, SetupFlagsAreWritten) {
  auto text = [](const std::string& name, TargetKind kind) {
    for (const SetupCase& c : SetupCases()) {
      if (c.name == name) {
        const Problem problem = SetupProblem(c);
        return ExportPlan(problem, EvenPlan(problem), FormatOf(kind), kind).value();
      }
    }
    return std::string();
  };
  auto has = [](const std::string& exported, const std::string& lines) {
    EXPECT_NE(exported.find(lines), std::string::npos) << "missing:\n" << lines << "\nin:\n" << exported;
  };
  has(text("moe-ep", TargetKind::kMegatron),
      "--num-experts 8\n--moe-router-topk 2\n--moe-ffn-hidden-size 14336\n--moe-grouped-gemm\n"
      "--moe-token-dispatcher-type alltoall\n--moe-expert-capacity-factor 1.25\n--expert-model-parallel-size 8\n");
  has(text("moe-dense-first", TargetKind::kMegatron),
      "--num-experts 256\n--moe-router-topk 8\n--moe-ffn-hidden-size 2048\n--moe-shared-expert-intermediate-size 2048\n"
      "--moe-layer-freq \"[0]*3+[1]*58\"\n--moe-grouped-gemm\n--moe-token-dispatcher-type alltoall\n"
      "--expert-model-parallel-size 4\n--expert-tensor-parallel-size 1\n");
  has(text("moe-flex-overlap", TargetKind::kMegatron),
      "--moe-grouped-gemm\n--moe-token-dispatcher-type flex\n--moe-flex-dispatcher-backend deepep\n"
      "--overlap-moe-expert-parallel-comm\n");
  has(text("moe-graphs", TargetKind::kMegatron),
      "--moe-token-dispatcher-type flex\n--moe-flex-dispatcher-backend deepep\n--cuda-graph-impl transformer_engine\n"
      "--cuda-graph-scope moe_router moe_preprocess\n");
  has(text("cp", TargetKind::kMegatron), "--context-parallel-size 2\n");
  has(text("cp", TargetKind::kTorchTitan), "--parallelism.context_parallel_degree 2\n");
  // The recipe the runs were fitted on (current scaling) unless the problem states its own.
  has(text("fp8", TargetKind::kMegatron), "--bf16\n--fp8-format hybrid\n--fp8-recipe tensorwise\n");
  has(text("fp8-weights", TargetKind::kMegatron), "--fp8-recipe tensorwise\n--fp8-param-gather\n");
  has(text("fp8-delayed", TargetKind::kMegatron),
      "--fp8-format hybrid\n--fp8-recipe delayed\n--fp8-amax-history-len 1024\n--fp8-amax-compute-algo max\n");
  has(text("mxfp8", TargetKind::kMegatron), "--bf16\n--fp8-format e4m3\n--fp8-recipe mxfp8\n");
  has(text("nvfp4", TargetKind::kMegatron), "--bf16\n--fp4-format e2m1\n--fp4-recipe nvfp4\n");
  has(text("nvfp4-weights", TargetKind::kMegatron), "--fp4-recipe nvfp4\n--fp4-param-gather\n");
  has(text("fp8-no-transpose-cache", TargetKind::kMegatron),
      "--fp8-param-gather\n--disable-parameter-transpose-cache\n");
  has(text("bf16-state", TargetKind::kMegatron),
      "--use-precision-aware-optimizer\n--main-grads-dtype bf16\n--exp-avg-dtype bf16\n--exp-avg-sq-dtype bf16\n");
  has(text("bf16-grads", TargetKind::kDeepSpeed), "\"data_types\": {\"grad_accum_dtype\": \"bf16\"}");
  has(text("zero3", TargetKind::kMegatron),
      "--use-distributed-optimizer\n--use-megatron-fsdp\n--data-parallel-sharding-strategy optim_grads_params\n"
      "--ckpt-format fsdp_dtensor\n");
  has(text("zero2", TargetKind::kMegatron), "--data-parallel-sharding-strategy optim_grads\n");
  has(text("zero3", TargetKind::kTorchTitan),
      "--parallelism.data_parallel_shard_degree 2\n--parallelism.data_parallel_replicate_degree 1\n"
      "--parallelism.fsdp_reshard_after_forward always\n");
  has(text("zero2", TargetKind::kTorchTitan), "--parallelism.fsdp_reshard_after_forward never\n");
  has(text("zero0", TargetKind::kTorchTitan),
      "--parallelism.data_parallel_replicate_degree 2\n--parallelism.data_parallel_shard_degree 1\n");
  has(text("offload-optimizer", TargetKind::kMegatron), "--use-precision-aware-optimizer\n--optimizer-cpu-offload\n");
  has(text("offload-optimizer", TargetKind::kDeepSpeed),
      "\"zero_optimization\": {\"stage\": 1, \"offload_optimizer\": {\"device\": \"cpu\"}}");
  has(text("tp-overlap", TargetKind::kMegatron), "--tp-comm-overlap\n");
}

// A configuration of another setup than the problem's is an error naming both values.
TEST(LauncherPlan, SetupMismatchesAreErrors) {
  const std::vector<SetupCase> cases = SetupCases();
  auto find = [&](const std::string& name) {
    for (const SetupCase& c : cases) {
      if (c.name == name) return SetupProblem(c);
    }
    return Problem{};
  };
  const Problem moe = find("moe-ep"), zero3 = find("zero3"), cp = find("cp");
  const std::string megatron = ExportPlan(moe, EvenPlan(moe), FrameworkId::kMegatron).value();
  auto error = [](const std::string& text, const Problem& problem, const std::string& from, const std::string& to) {
    std::string edited = text;
    const std::size_t at = edited.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at == std::string::npos) return std::string();
    edited.replace(at, from.size(), to);
    const Result<Plan> plan = ReadLauncherPlan(edited, DetectPlanFormat(edited).value(), problem, "f");
    return plan.ok() ? std::string("(no error)") : plan.error().message;
  };
  EXPECT_EQ(error(megatron, moe, "--expert-model-parallel-size 8", "--expert-model-parallel-size 4"),
            "f: --expert-model-parallel-size 4: the problem's run has training.expert_parallel = 8; this configuration "
            "is not that run (give --expert-model-parallel-size 8, or the problem of this configuration)");
  EXPECT_EQ(error(megatron, moe, "--moe-expert-capacity-factor 1.25\n", ""),
            "f: --moe-expert-capacity-factor 0 (not given: dropless): the problem's run has "
            "training.moe.capacity_factor = 1.25 (0: dropless); this configuration is not that run");
  EXPECT_EQ(error(megatron, moe, "--moe-token-dispatcher-type alltoall", "--moe-token-dispatcher-type flex"),
            "f: --moe-token-dispatcher-type flex: the problem's run has training.moe.dispatcher = alltoall; this "
            "configuration is not that run");
  EXPECT_EQ(error(megatron, moe, "--moe-grouped-gemm", "--moe-grouped-gemm --overlap-moe-expert-parallel-comm"),
            "f: --overlap-moe-expert-parallel-comm given: the problem's run has training.moe.comm_overlap = false and "
            "pipeline.overlap = false; this configuration is not that run");
  EXPECT_EQ(error(megatron, moe, "--moe-grouped-gemm", "--moe-grouped-gemm --cuda-graph-impl transformer_engine "
                  "--cuda-graph-scope moe_preprocess moe_router"),
            "f: --cuda-graph-impl transformer_engine: the problem's run has training.moe.cuda_graphs = false; this "
            "configuration is not that run");
  EXPECT_EQ(error(megatron, moe, "--moe-grouped-gemm", "--moe-grouped-gemm --cuda-graph-impl transformer_engine "
                  "--cuda-graph-scope attn"),
            "f: --cuda-graph-impl transformer_engine --cuda-graph-scope attn: bmpipe costs CUDA graphs of the MoE router "
            "and the dispatch preprocessing only (--cuda-graph-impl transformer_engine --cuda-graph-scope moe_router "
            "moe_preprocess, training.moe.cuda_graphs); this configuration is not that run");
  EXPECT_EQ(error(megatron, moe, "--moe-grouped-gemm", "--moe-layer-freq \"[0]*2+[1]*30\""),
            "f: --moe-layer-freq: dense decoder layers [0, 1], but the problem's run has training.moe.dense_layers []; "
            "this configuration is not that run");
  EXPECT_EQ(error(megatron, moe, "--moe-grouped-gemm", "--moe-layer-freq \"[0]*2+[1]*3\""),
            "f: --moe-layer-freq \"[0]*2+[1]*3\": the pattern has 5 entries, but the model has 32 decoder layers "
            "(Megatron needs one per layer)");
  // Hostile patterns: nesting that would exhaust the stack, and a value echoed only in part.
  const std::string nested = std::string(20000, '(') + "[1]" + std::string(20000, ')');
  const std::string deep = error(megatron, moe, "--moe-grouped-gemm", "--moe-layer-freq \"" + nested + "\"");
  EXPECT_NE(deep.find("parentheses nest more than 64 deep"), std::string::npos) << deep.substr(0, 300);
  EXPECT_LT(deep.size(), 400u) << deep.substr(0, 300);
  EXPECT_NE(deep.find("(40003 characters)"), std::string::npos) << deep.substr(0, 300);
  std::string long_list = "[";
  for (int i = 0; i < 2000000; ++i) long_list += i == 0 ? "1" : ",1";
  long_list += "]";
  const std::string longer = error(megatron, moe, "--moe-grouped-gemm", "--moe-layer-freq \"" + long_list + "\"");
  EXPECT_NE(longer.find("the pattern is longer than any model"), std::string::npos) << longer.substr(0, 300);
  EXPECT_LT(longer.size(), 400u) << longer.substr(0, 300);
  EXPECT_EQ(error(megatron, moe, "--moe-grouped-gemm", "--main-grads-dtype bf16"),
            "f: --main-grads-dtype bf16 without --use-precision-aware-optimizer: Megatron refuses it; add "
            "--use-precision-aware-optimizer");
  // The FP8 recipe tells MXFP8 from FP8 with a scale per tensor.
  const Problem mx = find("mxfp8");
  const std::string mx_text = ExportPlan(mx, EvenPlan(mx), FrameworkId::kMegatron).value();
  EXPECT_EQ(error(mx_text, mx, "--fp8-recipe mxfp8", "--fp8-recipe mxfp8"), "(no error)");
  EXPECT_EQ(error(mx_text, mx, "--fp8-recipe mxfp8", "--fp8-recipe delayed"),
            "f: --fp8-recipe delayed: the problem's run has training.precision = mxfp8; this configuration is not "
            "that run (--fp8-recipe mxfp8, or give the problem of this configuration)");
  // NVFP4 is --fp4-format, never with FP8's flags; a custom FP4 recipe is another run.
  const Problem fp4 = find("nvfp4");
  const std::string fp4_text = ExportPlan(fp4, EvenPlan(fp4), FrameworkId::kMegatron).value();
  EXPECT_EQ(error(fp4_text, fp4, "--fp4-recipe nvfp4", "--fp4-recipe nvfp4"), "(no error)");
  EXPECT_EQ(error(fp4_text, fp4, "--fp4-recipe nvfp4", "--fp4-recipe custom"),
            "f: --fp4-recipe custom: bmpipe costs Transformer Engine's NVFP4 block scaling only (--fp4-recipe nvfp4); a "
            "custom quantizer factory's GEMMs are not that run");
  EXPECT_NE(error(fp4_text, fp4, "--fp4-format e2m1\n--fp4-recipe nvfp4\n", "--fp8-format e4m3\n--fp8-recipe mxfp8\n")
                .find("--fp8-format is given: the problem's run has training.precision = nvfp4 = false"),
            std::string::npos);
  const std::string fsdp = ExportPlan(zero3, EvenPlan(zero3), FrameworkId::kMegatron).value();
  EXPECT_EQ(error(fsdp, zero3, "optim_grads_params", "optim_grads"),
            "f: the flags give ZeRO stage 2 (--use-distributed-optimizer: 1; --use-megatron-fsdp with "
            "--data-parallel-sharding-strategy optim_grads: 2, optim_grads_params: 3), but the problem's run has "
            "training.zero_stage = 3; this configuration is not that run");
  const std::string titan = ExportPlan(zero3, EvenPlan(zero3), FrameworkId::kTorchTitan).value();
  EXPECT_EQ(error(titan, zero3, "--parallelism.fsdp_reshard_after_forward always\n", ""),
            "f: --parallelism.fsdp_reshard_after_forward default (not given: torchtitan's default): FSDP then keeps the "
            "parameters after the forward, which is ZeRO 1 or 2, but the problem's run has training.zero_stage = 3; "
            "give --parallelism.fsdp_reshard_after_forward always");
  const std::string titan_cp = ExportPlan(cp, EvenPlan(cp), FrameworkId::kTorchTitan).value();
  EXPECT_EQ(error(titan_cp, cp, "--parallelism.context_parallel_degree 2\n", ""),
            "f: --parallelism.context_parallel_degree 1: the problem's run has training.context_parallel = 2; this "
            "configuration is not that run (give --parallelism.context_parallel_degree 2, or the problem of this "
            "configuration)");
  const Problem llama = Llama8b();
  const std::string ds = ExportPlan(llama, EvenPlan(llama), FrameworkId::kDeepSpeed).value();
  EXPECT_EQ(error(ds, llama, "\"grad_accum_dtype\": \"fp32\"", "\"grad_accum_dtype\": \"bf16\""),
            "f: ds_config.data_types: gradients accumulate in bf16, but the problem's run has training.grad_dtype = "
            "fp32; this configuration is not that run");
}

}  // namespace
// Megatron's `mlp` module recomputes the dense MLP and `moe` the MoE block: a plan with mlp on
// every decoder layer of DeepSeek-V3 (3 dense layers, then MoE) exports both names, and each name
// alone reads back onto its kind of layer. mla_up_proj goes both ways.
TEST(LauncherPlan, MegatronMlpAndMoeModulesFollowTheLayersKind) {
  TrainingSetup s;
  s.tp = 2;
  s.pp = 4;
  s.dp = 2;
  s.ep = 4;
  s.etp = 1;
  s.global_batch_size = 64;
  s.seq = 4096;
  s.sequence_parallel = s.distributed_optimizer = s.flash_attention = true;
  s.recompute = {"none", "mlp", "mla_up_proj", "mla_up_proj+mlp"};
  const Problem problem = BuildProblem(ModelPreset("deepseek-v3").value(), DevicePreset("h100-80gb").value(), s).value();
  const ModelShape shape = ShapeOf(problem);
  const Plan even = EvenPlan(problem);
  for (const auto& [option, modules] : std::vector<std::pair<std::string, std::string>>{
           {"mlp", "mlp moe"}, {"mla_up_proj", "mla_up_proj"}, {"mla_up_proj+mlp", "mlp moe mla_up_proj"}}) {
    SCOPED_TRACE(option);
    const Plan plan = Uniform(problem, even, ParseRecompute(option).value()).value();
    const std::string text = ExportPlan(problem, plan, FrameworkId::kMegatron, TargetKind::kMegatron).value();
    EXPECT_NE(text.find("--recompute-granularity selective\n--recompute-modules " + modules + "\n"), std::string::npos)
        << text;
    const Plan back = ReadLauncherPlan(text, PlanFormat{FrameworkId::kMegatron}, problem, "export").value();
    EXPECT_EQ(back.option, plan.option);
  }
  std::string text = ExportPlan(problem, Uniform(problem, even, ParseRecompute("mlp").value()).value(),
                                FrameworkId::kMegatron, TargetKind::kMegatron)
                         .value();
  for (const std::string only : {"mlp", "moe"}) {
    SCOPED_TRACE(only);
    std::string one = text;
    one.replace(one.find("--recompute-modules mlp moe"), std::string("--recompute-modules mlp moe").size(),
                "--recompute-modules " + only);
    const Plan back = ReadLauncherPlan(one, PlanFormat{FrameworkId::kMegatron}, problem, "export").value();
    for (LayerIdx l = shape.body_begin; l < shape.body_end; ++l) {
      const bool dense = l - shape.body_begin < 3;
      const bool recomputes = MeansRecompute(problem.layers[l].options[back.option[l]], Recompute{kRecomputeMlp});
      EXPECT_EQ(recomputes, dense == (only == "mlp")) << l;
    }
  }
}

}  // namespace bmpipe

namespace bmpipe {
namespace {

// torchtitan's own defaults for what its arguments leave out: a shard degree of -1 is the ranks
// the replicate degree leaves, and sequence parallelism is on with tensor parallelism unless
// turned off.
// A golden export's problem and file.
std::pair<Problem, std::string> Golden(const std::string& name, const std::string& file) {
  const std::string dir = "tests/golden/exports/" + name + "/";
  return {LoadProblem(testing::SourcePath(dir + "problem.json")).value(), testing::ReadFile(testing::SourcePath(dir + file))};
}

TEST(LauncherPlan, TorchTitanDefaultsAreTorchTitans) {
  // Not a structured binding: clang 14 lets no lambda capture one.
  const std::pair<Problem, std::string> golden = Golden("llama3-70b-cp2-torchtitan", "torchtitan.args");
  const Problem& problem = golden.first;
  const std::string& text = golden.second;
  auto read = [&](const std::string& from, const std::string& to) {
    std::string edited = text;
    const std::size_t at = edited.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) edited.replace(at, from.size(), to);
    const Result<Plan> plan = ReadLauncherPlan(edited, PlanFormat{FrameworkId::kTorchTitan}, problem, "t.args");
    return plan.ok() ? std::string("(read)") : plan.error().message;
  };
  EXPECT_EQ(read("--parallelism.data_parallel_shard_degree 4", "--parallelism.data_parallel_shard_degree -1"), "(read)");
  EXPECT_EQ(read("--parallelism.enable_sequence_parallel\n", ""), "(read)");
  // Module names as torchtitan spells them, each once.
  EXPECT_NE(read("layers.5,", "layers.05,").find("'layers.05' is not a module bmpipe maps"), std::string::npos);
  EXPECT_NE(read("tok_embeddings,", "tok_embeddings,tok_embeddings,").find("tok_embeddings is listed twice"),
            std::string::npos);
  EXPECT_EQ(read("--parallelism.enable_sequence_parallel", "--parallelism.no-enable-sequence-parallel"),
            "t.args: sequence parallelism off (--parallelism.no-enable-sequence-parallel), but the problem's run has "
            "training.sequence_parallel = true; give --parallelism.enable_sequence_parallel");
}

// A DeepSpeed module of 200,000 assignments and a ds_config of 100,000 keys reads in linear time
// (a search per assignment took 21 s), with Python's meaning: the last assignment wins.
TEST(LauncherPlan, DeepSpeedModulesOfManyAssignments) {
  std::pair<Problem, std::string> golden = Golden("qwen2-7b-pp8-deepspeed", "deepspeed.py");
  const Problem& problem = golden.first;
  std::string& text = golden.second;
  for (int i = 0; i < 200000; ++i) text += "x" + std::to_string(i) + " = " + std::to_string(i) + "\n";
  text += "extra = {";
  for (int i = 0; i < 100000; ++i) text += "\"k" + std::to_string(i) + "\": " + std::to_string(i) + ", ";
  text += "}\nnum_stages = 3\nnum_stages = 8\n";  // the last assignment wins
  const Result<Plan> plan = ReadLauncherPlan(text, PlanFormat{FrameworkId::kDeepSpeed}, problem, "plan.py");
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan.value().num_stages(), 8);
}

}  // namespace
}  // namespace bmpipe
