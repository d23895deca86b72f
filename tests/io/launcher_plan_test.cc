// Launcher configurations read back as plans: every export of a planned problem reads back to the
// plan itself when the format can express it, and to the closest setting the export names (its
// simulated time) when it cannot; detection; and the errors, each naming the flag, value and fix.
#include "bmpipe/io/launcher_plan.h"

#include <map>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "bmpipe/baselines/common.h"
#include "bmpipe/core/text.h"
#include "bmpipe/cost/problem_builder.h"
#include "bmpipe/hardware/device.h"
#include "bmpipe/io/export.h"
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
          {"llama3-8b", Llama8b()}};
}

Plan Planned(const Problem& problem) {
  PlannerOptions options;
  options.time_limit_s = 5;
  const PlannerResult r = PlanPipeline(problem, options).value();
  EXPECT_TRUE(r.status == PlanStatus::kOptimal || r.status == PlanStatus::kFeasible);
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
  for (const ExportFormat format : {ExportFormat::kMegatron, ExportFormat::kMindFormers, ExportFormat::kDeepSpeed,
                                    ExportFormat::kTorchTitan}) {
    const std::string name = ExportFormatNames()[static_cast<std::size_t>(format)];
    SCOPED_TRACE(name);
    const Result<std::string> text = ExportPlan(problem, plan, format);
    if (!text.ok()) {
      // What the formats cannot launch at all: DeepSpeed has no interleaved schedule, MindFormers no
      // stage without a decoder layer.
      EXPECT_TRUE((format == ExportFormat::kDeepSpeed && problem.pipeline.chunks > 1) ||
                  (format == ExportFormat::kMindFormers &&
                   text.error().message.find("holds no decoder layer") != std::string::npos))
          << text.error().message;
      continue;
    }
    const PlanFormat detected = DetectPlanFormat(text.value()).value();
    EXPECT_EQ(PlanFormatName(detected), name);
    std::vector<std::string> notes;
    // A launch script passes the run's own parallel and batch flags with the exported ones.
    const std::string launch = format == ExportFormat::kMegatron ? text.value() + MegatronRunFlags(problem) : text.value();
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
    if (format == ExportFormat::kMindFormers && !TargetRunsPlan(problem, plan, TargetKind::kMindFormers)) {
      // An option MindFormers has no list for (tiny's 'selective', core attention) is exported as
      // full recomputation; a stage with both select-only and comm-only layers runs otherwise from
      // MindFormers' counts. Either the export says so with what it runs, or what it runs is as fast.
      EXPECT_TRUE(text.value().find("has no MindFormers list") != std::string::npos ||
                  text.value().find("NOT the plan") != std::string::npos ||
                  Iteration(problem, back.value()) == Iteration(problem, plan))
          << text.value();
    } else if (format == ExportFormat::kMindFormers) {
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
    const Result<Plan> plan = ReadLauncherPlan(args, PlanFormat::kMegatron, tiny, "args");
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
  const Plan plan = ReadLauncherPlan(line, PlanFormat::kMegatron, tiny, "cmd", &notes).value();
  EXPECT_EQ(StageSizes(StageEnds(plan)), "[3, 3, 3, 3]");
  ASSERT_EQ(notes.size(), 2u);
  // Words after an unknown flag are taken as its values.
  EXPECT_EQ(notes[1], "not read (they do not change the pipeline plan): torchrun --nproc_per_node --hidden-size --lr");
  // Recomputation: block N = the first N decoder layers of each stage; selective modules.
  const Plan block = ReadLauncherPlan(line + " --recompute-granularity full --recompute-method block --recompute-num-layers 1",
                                      PlanFormat::kMegatron, tiny, "cmd")
                         .value();
  const OptionIdx none = 0, selective = 1, full = 2;
  EXPECT_EQ(block.option, (std::vector<OptionIdx>{0, full, none, full, none, none, full, none, none, full, none, 0}));
  const Plan sel = ReadLauncherPlan(line + " --recompute-activations", PlanFormat::kMegatron, tiny, "cmd").value();
  for (LayerIdx l = 1; l <= 10; ++l) EXPECT_EQ(sel.option[l], selective);
}

std::string MegatronError(const Problem& problem, const std::string& args) {
  const Result<Plan> plan = ReadLauncherPlan(args, PlanFormat::kMegatron, problem, "args");
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
            "problem has virtual_stages 1; give a configuration with 1");
  EXPECT_EQ(MegatronError(tiny, base + "--pipeline-model-parallel-layout 'Et*3|t*3|t*3|tmL'"),
            "args: --pipeline-model-parallel-layout \"Et*3|t*3|t*3|tmL\": stage 3 has 'm', a multi-token prediction "
            "layer, which bmpipe's problems do not model; plan without MTP");
  EXPECT_EQ(MegatronError(tiny, base + "--pipeline-model-parallel-layout 'Et*5||t*5|L'"),
            "args: the configuration: stage 1 (rank 1, chunk 0) holds no layer of the problem; bmpipe's stages hold "
            "at least one (move a layer onto it)");
  EXPECT_EQ(MegatronError(tiny, split + "--recompute-granularity selective --recompute-modules core_attn mlp"),
            "args: --recompute-granularity selective --recompute-modules core_attn mlp recomputes 'selective+mlp' on "
            "layer 1 (decoder), which has no option meaning that (its options: none, selective, full); add an option "
            "'selective+mlp' to the problem's layers, or change the setting");
  EXPECT_EQ(MegatronError(tiny, split + "--recompute-granularity selective --recompute-modules moe_act"),
            "args: --recompute-modules moe_act: recomputing 'moe_act' is not modeled by bmpipe's options (core_attn, "
            "mlp and layernorm are); remove it");
  EXPECT_EQ(MegatronError(tiny, split + "--recompute-granularity full --recompute-method uniform --recompute-num-layers 2"),
            "args: --recompute-granularity full --recompute-method uniform --recompute-num-layers 2: uniform "
            "checkpoints groups of 2 decoder layers as one unit, which bmpipe's per-layer options do not model; give "
            "--recompute-num-layers 1 (every layer) or --recompute-method block");
  EXPECT_EQ(MegatronError(tiny, "--pipeline-model-parallel-size 8 --num-layers 10"),
            "args: --pipeline-model-parallel-size 8: the problem's run has pipeline.stages = 4; this configuration is "
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

TEST(LauncherPlan, DeepSpeedAndTorchTitanAreChecked) {
  const Problem vpp3 = LoadProblem(testing::SourcePath("examples/mindformers-demo/problem-vpp3.yaml")).value();
  const Result<std::string> ds = ExportPlan(vpp3, EvenPlan(vpp3), ExportFormat::kDeepSpeed);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.error().message, "virtual_stages = 3: DeepSpeed's pipeline engine has no interleaved schedule; plan "
                                "with virtual_stages 1 to export to DeepSpeed");
  const Problem tiny = LoadProblem(testing::SourcePath("examples/tiny/problem.json")).value();
  const std::string text = ExportPlan(tiny, EvenPlan(tiny), ExportFormat::kDeepSpeed).value();
  auto edited_error = [&](const std::string& source, PlanFormat format, const std::string& from, const std::string& to) {
    std::string edited = source;
    const std::size_t at = edited.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    edited.replace(at, from.size(), to);
    const Result<Plan> plan = ReadLauncherPlan(edited, format, tiny, "plan.py");
    return plan.ok() ? std::string("(no error)") : plan.error().message;
  };
  auto error = [&](const std::string& from, const std::string& to) {
    return edited_error(text, PlanFormat::kDeepSpeed, from, to);
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
  const std::string titan = ExportPlan(tiny, EvenPlan(tiny), ExportFormat::kTorchTitan).value();
  EXPECT_EQ(edited_error(titan, PlanFormat::kTorchTitan, "layers.3,layers.4", "layers.4,layers.3"),
            "plan.py: --parallelism.module_fqns_per_model_part: stage 1 ('layers.2,layers.4,layers.3'): layers.4 comes "
            "where layers.3 belongs; list layers.0 to layers.9 in order, each once");
  EXPECT_EQ(edited_error(titan, PlanFormat::kTorchTitan, "activation_checkpoint:none", "activation_checkpoint:selective"),
            "plan.py: activation_checkpoint:selective: torchtitan's selective checkpointing is none of bmpipe's "
            "recomputation options; give activation_checkpoint:none or activation_checkpoint:full");
  EXPECT_EQ(edited_error(titan, PlanFormat::kTorchTitan, "--training.local_batch_size 8", "--training.local_batch_size 6"),
            "plan.py: --training.local_batch_size 6 / --parallelism.pipeline_parallel_microbatch_size 1 is torchtitan's "
            "microbatch count, but the problem has 8 micro-batches; give --training.local_batch_size 8");
  const Result<Plan> csv = ReadLauncherPlan("0F0,0F1\n1F0,1B0\n", PlanFormat::kCsv, tiny, "s.csv");
  ASSERT_FALSE(csv.ok());
  EXPECT_NE(csv.error().message.find("fixes the order of the ops, not the stages"), std::string::npos);
}

TEST(LauncherPlan, DetectsTheFormat) {
  EXPECT_EQ(DetectPlanFormat("0F0,0F1,,0B0\n1F0,1B0\n").value(), PlanFormat::kCsv);
  EXPECT_EQ(DetectPlanFormat("# a comment\n--num-layers 4\n").value(), PlanFormat::kMegatron);
  EXPECT_EQ(DetectPlanFormat("python pretrain_gpt.py --num-layers 4\n").value(), PlanFormat::kMegatron);
  EXPECT_EQ(DetectPlanFormat("--module llama3\n--parallelism.pipeline_parallel_degree 4\n").value(), PlanFormat::kTorchTitan);
  EXPECT_EQ(DetectPlanFormat("from deepspeed.pipe import PipelineModule\nparts = [0, 1]\n").value(), PlanFormat::kDeepSpeed);
  EXPECT_EQ(DetectPlanFormat("---\nstages:\n  - layers: []\n").value(), PlanFormat::kJson);
  EXPECT_EQ(DetectPlanFormat("{\"stages\": []}").value(), PlanFormat::kJson);
  EXPECT_EQ(DetectPlanFormat("parallel_config:\n  pipeline_stage: 4\n").value(), PlanFormat::kMindFormers);
  EXPECT_FALSE(DetectPlanFormat("import os\nX = 1\n").ok());
  EXPECT_EQ(ParsePlanFormat("megatorn").error().message,
            "--plan-format megatorn: unknown format; did you mean 'megatron'?; formats: json, mindformers, megatron, "
            "deepspeed, torchtitan, csv");
}

}  // namespace
}  // namespace bmpipe
