// DeepSpeed: its per-layer checkpointing settings, its pipeline engine's rules, and its module
// read back (deepspeed.h); the export is in export.cc.
#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "bmpipe/core/json_cursor.h"
#include "bmpipe/frameworks/deepspeed/deepspeed.h"
#include "bmpipe/frameworks/deepspeed/python_literals.h"
#include "bmpipe/frameworks/launcher_args.h"
#include "bmpipe/frameworks/settings.h"
#include "bmpipe/frameworks/stages.h"
#include "bmpipe/problem/layer_roles.h"

namespace bmpipe {
namespace {

Plan ReadDeepSpeedPlan(const std::string& text, const Problem& problem, std::vector<std::string>& notes) {
  std::vector<std::string> computed;
  const Json doc = ReadPythonLiterals(text, computed);
  JsonCursor root(doc, "");
  auto required = [&](const char* name, const char* what) {
    if (std::find(computed.begin(), computed.end(), name) != computed.end()) {
      FailConfiguration(fmt::format("{} is assigned an expression; bmpipe reads literal values only (nothing is executed): write "
                       "{} as a literal",
                       name, what));
    }
    return root.Required(name, what);
  };
  const Pipeline& p = problem.pipeline;
  if (p.chunks > 1 || p.schedule != ScheduleKind::kOneFOneB) {
    FailConfiguration(fmt::format("DeepSpeed's pipeline engine runs 1F1B without virtual stages, but the problem's schedule is {} "
                     "with pipeline.chunks {}; give the problem of this run",
                     ScheduleName(p.schedule), p.chunks));
  }
  JsonCursor stages = required("num_stages", "the pipeline stages");
  if (stages.Integer(1, kMaxRanks, "") != p.ranks) stages.Fail(fmt::format("the problem has {} pipeline ranks", p.ranks));
  JsonCursor parts = required("parts", "the first layer of each stage, and the layer count at the end");
  const std::vector<JsonCursor> bounds = parts.Elements();
  if (static_cast<int>(bounds.size()) != p.ranks + 1) {
    parts.Fail(fmt::format("needs {} entries: the first layer of each of the {} stages, then {} (the layers)", p.ranks + 1,
                           p.ranks, problem.num_layers()));
  }
  const std::string layers_fix = fmt::format("the problem has {} layers", problem.num_layers());
  Plan plan;
  plan.option = NoneOptions(problem);
  for (std::size_t s = 0; s < bounds.size(); ++s) {
    const LayerIdx at = static_cast<LayerIdx>(bounds[s].Integer(0, problem.num_layers(), layers_fix));
    if ((s == 0 && at != 0) || (s + 1 == bounds.size() && at != problem.num_layers()) ||
        (s > 0 && at <= plan.stage_begin.back())) {
      bounds[s].Fail(fmt::format("parts must start at 0, rise strictly (every stage holds a layer) and end at {}, the "
                                 "problem's layers",
                                 problem.num_layers()));
    }
    plan.stage_begin.push_back(at);
  }
  std::int64_t interval = 0;  // PipelineModule's default
  if (auto i = root.Optional("activation_checkpoint_interval")) interval = i->Integer(0, kMaxLayers, "");
  JsonCursor config = required("ds_config", "the DeepSpeed configuration dict");
  if (auto pipe = config.Optional("pipeline")) {
    // The engine applies the configuration's interval when it is > 0 (engine.py).
    if (auto i = pipe->Optional("activation_checkpoint_interval")) interval = std::max(interval, i->Integer(0, kMaxLayers, ""));
  }
  if (interval > 1) {
    FailConfiguration(fmt::format("activation_checkpoint_interval {}: DeepSpeed then checkpoints blocks of {} layers as one unit, "
                     "which bmpipe's per-layer options do not model; give 0 or 1",
                     interval, interval));
  }
  // At interval 1 the module's _is_checkpointable checkpoints the listed layers whole.
  if (interval == 1) {
    JsonCursor listed = required("checkpoint_layers", "the layers DeepSpeed checkpoints");
    LayerIdx previous = -1;
    for (const JsonCursor& item : listed.Elements(true)) {
      const LayerIdx l = static_cast<LayerIdx>(item.Integer(0, problem.num_layers() - 1, layers_fix));
      if (l <= previous) item.Fail("list the checkpointed layers in increasing order, each once");
      previous = l;
      SetLayerOption(problem, plan, l, Recompute{kRecomputeLayer}, "checkpoint_layers");
    }
  }
  JsonCursor steps = config.Required("gradient_accumulation_steps", "the micro-batches of one iteration");
  if (steps.Integer(1, kMaxMicroBatches, "") != p.micro_batches) {
    steps.Fail(fmt::format("the pipeline engine runs this many micro-batches; the problem has {}", p.micro_batches));
  }
  if (problem.training) {
    const TrainingInfo& t = *problem.training;
    const std::int64_t big = std::int64_t{1} << 24;
    if (auto m = config.Optional("train_micro_batch_size_per_gpu"); m && m->Integer(1, big, "") != t.micro_batch_size) {
      m->Fail(fmt::format("the problem's run has training.micro_batch_size = {}; this configuration is not that run",
                          t.micro_batch_size));
    }
    if (auto b = config.Optional("train_batch_size"); b && b->Integer(1, big, "") != t.global_batch_size) {
      b->Fail(fmt::format("the problem's run has training.global_batch_size = {}; this configuration is not that run",
                          t.global_batch_size));
    }
    std::int64_t stage = 0;
    bool offload = false;
    std::optional<JsonCursor> zero = config.Optional("zero_optimization");
    if (zero) {
      if (auto s = zero->Optional("stage")) stage = s->Integer(0, 3, "");
      if (auto o = zero->Optional("offload_optimizer")) {
        if (auto device = o->Optional("device")) {
          const std::string d = device->String();
          if (d != "cpu" && d != "none") device->Fail("bmpipe models the optimizer offloaded to cpu, or none");
          offload = d == "cpu";
        }
      }
    }
    const int want_stage = ZeroStage(t);
    if (stage != want_stage) {
      (zero ? *zero : config)
          .FailAt(fmt::format("ZeRO stage {}, but the problem's run has training.zero_stage = {}; this configuration is "
                              "not that run",
                              stage, want_stage));
    }
    if (offload != t.offload_optimizer) {
      (zero ? *zero : config)
          .FailAt(fmt::format("the optimizer is {}offloaded, but the problem's run has training.offload_optimizer = {}; "
                              "this configuration is not that run",
                              offload ? "" : "not ", t.offload_optimizer ? "true" : "false"));
    }
    // Gradients accumulate in data_types.grad_accum_dtype, by default the model's (bf16).
    std::string grads = "bf16";
    std::optional<JsonCursor> types = config.Optional("data_types");
    if (types) {
      if (auto g = types->Optional("grad_accum_dtype")) {
        // DeepSpeed's DtypeEnum spellings.
        const std::string d = g->String();
        if (d == "fp32" || d == "float32" || d == "float" || d == "torch.float32") grads = "fp32";
        else if (d == "bf16" || d == "bfloat16" || d == "torch.bfloat16") grads = "bf16";
        else g->Fail("bmpipe models fp32 and bf16 gradients (DeepSpeed: fp32, float32, bf16, bfloat16)");
      }
    }
    if (grads != t.grad_dtype) {
      (types ? *types : config)
          .FailAt(fmt::format("gradients accumulate in {}{}, but the problem's run has training.grad_dtype = {}; this "
                              "configuration is not that run",
                              grads, types ? "" : " (no data_types.grad_accum_dtype: the model's dtype)", t.grad_dtype));
    }
  } else {
    notes.push_back("the problem has no `training` section: the batch sizes and ZeRO stage are not checked");
  }
  return plan;
}

}  // namespace

Status DeepSpeedSettings(const Problem& problem, const Target&, const SettingSink& offer, int) {
  // Whole-layer checkpointing, chosen per layer.
  TargetSetting setting;
  setting.space.families.push_back(BodyFamily(problem, ShapeOf(problem), [](Recompute r) { return r.none() || r.full(); }));
  offer(setting);
  return {};
}

Status DeepSpeedRules(const Target& target, const TrainingInfo& t, const Pipeline*) {
  auto refuse = [&](const std::string& why) {
    return InvalidInput(fmt::format("target {} ({}): {}", target.name, target.framework, why));
  };
  if (t.grad_dtype == "fp32" && ZeroStage(t) == 0) {
    return refuse("training.grad_dtype = fp32 with zero_stage 0: without ZeRO, DeepSpeed's bf16 pipeline accumulates "
                  "gradients in bf16 only (bf16 parameters with data_types.grad_accum_dtype fp32 is an unsupported "
                  "mix); add --distributed-optimizer (--zero 1), or --grad-dtype bf16");
  }
  if (t.offload_optimizer && ZeroStage(t) < 1) {
    return refuse("training.offload_optimizer: DeepSpeed offloads the optimizer only under ZeRO "
                  "(zero_optimization.offload_optimizer); add --distributed-optimizer (--zero 1)");
  }
  return {};
}

Result<Plan> ReadDeepSpeed(const std::string& text, const Problem& problem, const std::string& source,
                           std::vector<std::string>& notes) {
  return ReadDocument<Plan>(source, [&] { return ReadDeepSpeedPlan(text, problem, notes); });
}

Result<bool> DetectDeepSpeed(const PlanText& text) {
  bool python = false;
  for (const std::string& line : text.code) {
    for (const char* start : {"import ", "from ", "class ", "def "}) python = python || line.rfind(start, 0) == 0;
  }
  if (!python) return false;
  if (text.text.find("deepspeed") != std::string::npos || text.text.find("PipelineModule") != std::string::npos) {
    return true;
  }
  return InvalidInput("the file is a Python module that names neither DeepSpeed nor torchtitan; bmpipe reads the "
                      "module `export --to deepspeed` writes (give --plan-format deepspeed if it is one)");
}

}  // namespace bmpipe
