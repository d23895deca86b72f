// torchtitan: its recomputation settings, and its argument file read back (torchtitan.h); the
// export is in export.cc.
#include <algorithm>
#include <cctype>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "bmpipe/core/json_cursor.h"
#include "bmpipe/core/text.h"
#include "bmpipe/frameworks/launcher_args.h"
#include "bmpipe/frameworks/settings.h"
#include "bmpipe/frameworks/stages.h"
#include "bmpipe/frameworks/torchtitan/torchtitan.h"
#include "bmpipe/problem/layer_roles.h"

namespace bmpipe {
namespace {

const std::map<std::string, Arity>& TorchTitanFlags() {
  static const std::map<std::string, Arity> flags = {
      {"--parallelism.pipeline_parallel_degree", Arity::kOne},
      {"--parallelism.pipeline_parallel_schedule", Arity::kOne},
      {"--parallelism.pipeline_parallel_schedule_csv", Arity::kOne},
      {"--parallelism.module_fqns_per_model_part", Arity::kMany},
      {"--parallelism.pipeline_parallel_microbatch_size", Arity::kOne},
      {"--parallelism.tensor_parallel_degree", Arity::kOne},
      {"--parallelism.data_parallel_shard_degree", Arity::kOne},
      {"--training.local_batch_size", Arity::kOne},
      {"--training.global_batch_size", Arity::kOne},
      {"--training.seq_len", Arity::kOne},
      {"--parallelism.data_parallel_replicate_degree", Arity::kOne},
      {"--parallelism.enable_sequence_parallel", Arity::kNone},
      {"--parallelism.no-enable-sequence-parallel", Arity::kNone},
      {"--training.disable_cuda_graphs", Arity::kNone},
      {"--parallelism.context_parallel_degree", Arity::kOne},
      {"--parallelism.expert_parallel_degree", Arity::kOne},
      {"--parallelism.fsdp_reshard_after_forward", Arity::kOne},
      {"activation_checkpoint", Arity::kOne},
  };
  return flags;
}

Plan ReadTorchTitanPlan(const std::string& text, const Problem& problem, std::vector<std::string>& notes) {
  const Flags flags = ReadFlags(ShellWords(text), TorchTitanFlags());
  const Pipeline& p = problem.pipeline;
  const ModelShape shape = ShapeOf(problem);
  const std::int64_t big = std::int64_t{1} << 24;
  auto value = [&](const std::string& name, std::int64_t absent, std::int64_t min, std::int64_t max) {
    const Flag* f = flags.Get(name);
    return f ? IntegerValue(*f, min, max) : absent;
  };
  auto check = [&](const std::string& name, std::int64_t given, std::int64_t want, const std::string& key) {
    if (given != want) {
      FailConfiguration(fmt::format("{} {}: the problem's run has {} = {}; this configuration is not that run (give {} {}, or the "
                       "problem of this configuration)",
                       name, given, key, want, name, want));
    }
  };
  check("--parallelism.pipeline_parallel_degree", value("--parallelism.pipeline_parallel_degree", 1, 1, kMaxRanks),
        p.ranks, "pipeline.ranks");
  const Flag* schedule = flags.Get("--parallelism.pipeline_parallel_schedule");
  const std::string name = schedule ? schedule->values.front() : "1F1B";
  const std::optional<ScheduleKind> kind = ScheduleFromTorchClass(name);
  if (!kind) {
    FailConfiguration(fmt::format("--parallelism.pipeline_parallel_schedule {}: bmpipe simulates {}; give one of those", name,
                     TorchScheduleClasses()));
  }
  if (*kind != p.schedule) {
    FailConfiguration(fmt::format("--parallelism.pipeline_parallel_schedule {}: the problem's schedule is {}; give the matching "
                     "schedule or the problem of this configuration",
                     name, ScheduleName(p.schedule)));
  }
  const Flag* parts = flags.Get("--parallelism.module_fqns_per_model_part");
  if (!parts || parts->values.empty()) {
    FailConfiguration("--parallelism.module_fqns_per_model_part is not given: without it torchtitan splits the model itself; give "
         "the modules of each stage (bmpipe export --to torchtitan writes them)");
  }
  if (static_cast<int>(parts->values.size()) != p.stages()) {
    FailConfiguration(fmt::format("--parallelism.module_fqns_per_model_part has {} stages, but the problem has {} ({} ranks x {} "
                     "virtual stages); give one argument per stage",
                     parts->values.size(), p.stages(), p.ranks, p.chunks));
  }
  std::vector<StageSpec> specs(parts->values.size());
  int next = 0;
  for (std::size_t s = 0; s < specs.size(); ++s) {
    const std::string& part = parts->values[s];
    std::size_t start = 0;
    bool norm = false;
    while (start <= part.size()) {
      std::size_t end = part.find(',', start);
      if (end == std::string::npos) end = part.size();
      const std::string fqn = part.substr(start, end - start);
      start = end + 1;
      const std::string where =
          fmt::format("--parallelism.module_fqns_per_model_part: stage {} ('{}')", s, Abbreviated(part));
      if (fqn == "tok_embeddings") {
        if (s != 0) FailConfiguration(where + ": tok_embeddings must be on stage 0");
        if (specs[s].embedding) FailConfiguration(where + ": tok_embeddings is listed twice; list each module once");
        specs[s].embedding = true;
      } else if (fqn == "norm" || fqn == "lm_head") {
        if (s + 1 != specs.size()) FailConfiguration(fmt::format("{}: {} must be on the last stage", where, fqn));
        if ((fqn == "norm" && norm) || (fqn == "lm_head" && specs[s].head)) {
          FailConfiguration(fmt::format("{}: {} is listed twice; list each module once", where, fqn));
        }
        if (fqn == "norm") norm = true;
        else specs[s].head = true;
      } else if (fqn.compare(0, 7, "layers.") == 0 && fqn.size() > 7 && fqn.size() < 14 &&
                 (fqn[7] != '0' || fqn.size() == 8) &&  // layers.5, not layers.05: torchtitan's own names
                 std::all_of(fqn.begin() + 7, fqn.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
        const int i = std::stoi(fqn.substr(7));
        if (i != next) {
          FailConfiguration(fmt::format("{}: {} comes where layers.{} belongs; list layers.0 to layers.{} in order, each once", where,
                           fqn, next, shape.body() - 1));
        }
        ++next;
        ++specs[s].decoders;
      } else {
        FailConfiguration(fmt::format("{}: '{}' is not a module bmpipe maps to the problem's layers (tok_embeddings, layers.<i>, "
                         "norm, lm_head)",
                         where, fqn));
      }
    }
    if (s + 1 == specs.size() && (!norm || !specs[s].head)) {
      FailConfiguration(fmt::format("--parallelism.module_fqns_per_model_part: the last stage ('{}') needs norm and lm_head", part));
    }
  }
  if (!specs.front().embedding) FailConfiguration("--parallelism.module_fqns_per_model_part: stage 0 needs tok_embeddings");
  Plan plan = PlanOfStages(problem, specs, "--parallelism.module_fqns_per_model_part");

  const std::int64_t microbatch = value("--parallelism.pipeline_parallel_microbatch_size", 1, 1, big);
  const Flag* local = flags.Get("--training.local_batch_size");
  if (!local) FailConfiguration("--training.local_batch_size is not given; give the micro-batches x the microbatch size");
  const std::int64_t local_size = IntegerValue(*local, 1, big);
  if (local_size % microbatch != 0 || local_size / microbatch != p.micro_batches) {
    FailConfiguration(fmt::format("--training.local_batch_size {} / --parallelism.pipeline_parallel_microbatch_size {} is torchtitan's "
                     "microbatch count, but the problem has {} micro-batches; give --training.local_batch_size {}",
                     local_size, microbatch, p.micro_batches, microbatch * p.micro_batches));
  }
  if (problem.training) {
    const TrainingInfo& t = *problem.training;
    check("--parallelism.pipeline_parallel_microbatch_size", microbatch, t.micro_batch_size, "training.micro_batch_size");
    for (const auto& [flag, want, key] : std::vector<std::tuple<std::string, std::int64_t, std::string>>{
             {"--training.global_batch_size", t.global_batch_size, "training.global_batch_size"},
             {"--training.seq_len", t.seq_length, "training.seq_length"},
             {"--parallelism.tensor_parallel_degree", t.tensor_parallel, "training.tensor_parallel"}}) {
      if (flags.Get(flag)) check(flag, value(flag, 0, -1, big), want, key);
    }
    check("--parallelism.context_parallel_degree", value("--parallelism.context_parallel_degree", 1, 1, kMaxRanks),
          t.context_parallel, "training.context_parallel");
    check("--parallelism.expert_parallel_degree", value("--parallelism.expert_parallel_degree", 1, 1, kMaxRanks),
          t.expert_parallel, "training.expert_parallel");
    // Data parallel: replicated for ZeRO 0, else sharded with FSDP, whose parameters stay
    // gathered from the forward to the backward (ZeRO 1, 2) or are resharded (ZeRO 3).
    const std::int64_t replicate = value("--parallelism.data_parallel_replicate_degree", 1, 1, big);
    std::int64_t shard = value("--parallelism.data_parallel_shard_degree", -1, -1, big);
    if (shard == 0) FailConfiguration("--parallelism.data_parallel_shard_degree 0: give -1 (the ranks left) or a size");
    // -1, torchtitan's default, is the data-parallel ranks the replicate degree leaves.
    if (shard == -1 && t.data_parallel % replicate == 0) shard = t.data_parallel / replicate;
    const int stage = ZeroStage(t);
    if (t.data_parallel > 1) {
      if (stage == 0) {
        check("--parallelism.data_parallel_replicate_degree", replicate, t.data_parallel,
              "training.data_parallel (replicated: training.zero_stage = 0)");
        check("--parallelism.data_parallel_shard_degree", shard, 1, "training.zero_stage = 0 (no sharding)");
      } else {
        check("--parallelism.data_parallel_replicate_degree", replicate, 1, "training.zero_stage >= 1 (sharded)");
        check("--parallelism.data_parallel_shard_degree", shard, t.data_parallel,
              "training.data_parallel (sharded: training.zero_stage >= 1)");
        const Flag* policy = flags.Get("--parallelism.fsdp_reshard_after_forward");
        const std::string rule = policy ? policy->values.front() : "default";
        if (rule != "default" && rule != "always" && rule != "never") {
          FailConfiguration(fmt::format("--parallelism.fsdp_reshard_after_forward {}: give default, always or never", rule));
        }
        // torchtitan's default: no resharding with pipeline parallelism, else resharding.
        const bool reshard = rule == "always" || (rule == "default" && p.ranks == 1);
        if (reshard != (stage == 3)) {
          FailConfiguration(fmt::format("--parallelism.fsdp_reshard_after_forward {}{}: FSDP then {} the parameters after the "
                           "forward, which is ZeRO {}, but the problem's run has training.zero_stage = {}; give "
                           "--parallelism.fsdp_reshard_after_forward {}",
                           rule, policy ? "" : " (not given: torchtitan's default)", reshard ? "reshards" : "keeps",
                           reshard ? "3" : "1 or 2", stage, stage == 3 ? "always" : "never"));
        }
      }
    }
    // Sequence parallelism: torchtitan's tensor parallelism shards the norms' sequence unless told not to.
    const bool off = flags.Get("--parallelism.no-enable-sequence-parallel") != nullptr;
    if (off && flags.Get("--parallelism.enable_sequence_parallel")) {
      FailConfiguration("--parallelism.enable_sequence_parallel and --parallelism.no-enable-sequence-parallel are both "
                        "given; give one");
    }
    const bool sp = !off && t.tensor_parallel > 1;
    if (sp != (t.sequence_parallel && t.tensor_parallel > 1)) {
      FailConfiguration(fmt::format("sequence parallelism {} ({}), but the problem's run has training.sequence_parallel = "
                                    "{}; give --parallelism.{}",
                                    sp ? "on" : "off",
                                    off ? "--parallelism.no-enable-sequence-parallel"
                                        : "not turned off: torchtitan's default with tensor parallelism",
                                    t.sequence_parallel ? "true" : "false",
                                    t.sequence_parallel ? "enable_sequence_parallel" : "no-enable-sequence-parallel"));
    }
  } else {
    notes.push_back("the problem has no `training` section: the parallel and batch arguments are not checked");
  }
  const Flag* ac = flags.Get("activation_checkpoint");
  const std::string mode = ac ? ac->values.front() : "selective";  // torchtitan's default
  if (mode == "full") {
    for (LayerIdx l = shape.body_begin; l < shape.body_end; ++l) {
      SetLayerOption(problem, plan, l, Recompute{kRecomputeLayer}, "activation_checkpoint:full");
    }
  } else if (mode != "none") {
    FailConfiguration(fmt::format("activation_checkpoint:{}{}: torchtitan's {} checkpointing is none of bmpipe's recomputation options; "
                     "give activation_checkpoint:none or activation_checkpoint:full",
                     mode, ac ? "" : " (not given: torchtitan's default)", mode));
  }
  if (!flags.ignored.empty()) notes.push_back(IgnoredNote(flags.ignored, "they do not change the pipeline plan"));
  return plan;
}

}  // namespace

Status TorchTitanSettings(const Problem& problem, const Target& target, const SettingSink& offer, int) {
  // activation_checkpoint mode none or full: one global setting.
  const ModelShape shape = ShapeOf(problem);
  int settings = 0;
  bool more = true;
  for (const auto& [recompute, flags] : {std::pair<Recompute, const char*>{Recompute{}, "activation_checkpoint mode none"},
                                         {Recompute{kRecomputeLayer}, "activation_checkpoint mode full"}}) {
    const std::optional<TargetSetting> s = UniformSetting(problem, shape, recompute, flags);
    if (!s || !more) continue;
    ++settings;
    more = offer(*s);
  }
  if (settings == 0) return NoSettingFor(target);
  return {};
}

Result<Plan> ReadTorchTitan(const std::string& text, const Problem& problem, const std::string& source,
                            std::vector<std::string>& notes) {
  return ReadDocument<Plan>(source, [&] { return ReadTorchTitanPlan(text, problem, notes); });
}

Result<bool> DetectTorchTitan(const PlanText& text) {
  for (const std::string& line : text.code) {
    for (const char* start : {"--parallelism.", "--training.", "activation_checkpoint:"}) {
      if (line.rfind(start, 0) == 0) return true;
    }
  }
  return false;
}

}  // namespace bmpipe
