#include "bmpipe/io/plan_json.h"
#include "bmpipe/core/document.h"

#include <fmt/format.h>

#include "bmpipe/core/json_cursor.h"

namespace bmpipe {
namespace {

// Keys the writer emits that the reader accepts and ignores (the simulator recomputes them).
#define BMPIPE_PLAN_METRIC_KEYS \
  "iteration_time_s", "iteration_time_ns", "pipeline", "memory_capacity_bytes", "fits_memory", "bubble", "ranks"
#define BMPIPE_STAGE_METRIC_KEYS \
  "stage", "forward_s", "backward_s", "recompute_s", "saved_bytes", "transient_bytes"

SolverInfo ReadSolver(const JsonCursor& c) {
  c.ExpectKeys({"name", "status", "seconds", "gap", "bound_s", "objective_s", "stopped_by"});
  SolverInfo info;
  info.name = c.Required("name", "what produced the plan").String();
  JsonCursor status = c.Required("status", "'optimal', 'feasible' or 'infeasible'");
  const std::string s = status.String();
  if (s == "optimal") {
    info.status = ModelStatus::kOptimal;
  } else if (s == "feasible") {
    info.status = ModelStatus::kFeasible;
  } else if (s == "infeasible") {
    info.status = ModelStatus::kInfeasible;
  } else {
    status.Fail("use 'optimal', 'feasible' or 'infeasible'");
  }
  if (auto t = c.Optional("seconds")) info.seconds = ToSeconds(t->Seconds());
  if (auto g = c.Optional("gap")) info.gap = g->Number();
  if (auto b = c.Optional("bound_s")) info.bound_s = b->Number();
  if (auto o = c.Optional("objective_s")) info.objective_s = o->Number();
  if (auto w = c.Optional("stopped_by")) info.stopped_by = w->String();
  return info;
}

OptionIdx FindOption(const JsonCursor& c, const Layer& layer) {
  const std::string name = c.String();
  std::vector<std::string> names;
  for (std::size_t o = 0; o < layer.options.size(); ++o) {
    if (layer.options[o].name == name) return static_cast<OptionIdx>(o);
    names.push_back(layer.options[o].name);
  }
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "'" : ", '") + n + "'";
  c.Fail(fmt::format("layer '{}' has no such option{}; its options are {}", layer.name, DidYouMean(name, names), list));
}

PlanDocument ReadPlanTree(const Json& doc, const Problem& problem) {
  JsonCursor root(doc, "");
  root.ExpectKeys({"stages", "solver", "not_modeled", "settings", BMPIPE_PLAN_METRIC_KEYS});
  PlanDocument out;
  Plan& plan = out.plan;
  const Pipeline& pipeline = problem.pipeline;
  const int n = problem.num_layers();
  plan.option.assign(n, -1);
  plan.stage_begin.push_back(0);

  JsonCursor stages = root.Required("stages", "the pipeline stages in order, each with its layers");
  std::vector<JsonCursor> entries = stages.Elements();
  if (static_cast<int>(entries.size()) != pipeline.stages()) {
    stages.FailAt(fmt::format("the plan has {} stages but the problem has {} (pipeline.ranks {} x chunks {}); "
                              "give one entry per stage in pipeline order",
                              entries.size(), pipeline.stages(), pipeline.ranks, pipeline.chunks));
  }
  LayerIdx next = 0;
  for (StageIdx s = 0; s < static_cast<StageIdx>(entries.size()); ++s) {
    const JsonCursor& stage = entries[s];
    stage.ExpectKeys({"rank", "mirror_rank", "chunk", "layers", BMPIPE_STAGE_METRIC_KEYS});
    if (auto r = stage.Optional("rank")) {
      if (r->Integer(0, pipeline.ranks - 1, "ranks count from 0") != pipeline.RankOf(s)) {
        r->Fail(fmt::format("stage {} runs on rank {} (stage mod pipeline.ranks)", s, pipeline.RankOf(s)));
      }
    }
    if (auto r = stage.Optional("mirror_rank")) {
      const RankIdx mirror = pipeline.Copies() > 1 ? pipeline.RankOf(s, 1) : -1;
      if (mirror < 0) r->Fail(fmt::format("schedule '{}' keeps one copy of each stage; remove mirror_rank",
                                          ScheduleName(pipeline.schedule)));
      if (r->Integer(0, pipeline.ranks - 1, "ranks count from 0") != mirror) {
        r->Fail(fmt::format("stage {}'s second copy runs on rank {} (pipeline.ranks - 1 - stage)", s, mirror));
      }
    }
    if (auto c = stage.Optional("chunk")) {
      if (c->Integer(0, pipeline.chunks - 1, "chunks count from 0") != pipeline.ChunkOf(s)) {
        c->Fail(fmt::format("stage {} is chunk {} of its rank (stage div pipeline.stages)", s, pipeline.ChunkOf(s)));
      }
    }
    for (const JsonCursor& layer : stage.Required("layers", "the stage's layers, each with index and option").Elements()) {
      layer.ExpectKeys({"index", "name", "option"});
      JsonCursor index = layer.Required("index", "the layer's position in the problem's expanded layer list");
      const LayerIdx l = static_cast<LayerIdx>(index.Integer(0, n - 1, fmt::format("the problem has {} layers", n)));
      if (l != next) {
        index.Fail(next == 0 ? "the first stage must start at layer 0"
                             : fmt::format("expected layer {}, the one after the previous layer; stages must cover the "
                                           "layers contiguously, in order, each exactly once",
                                           next));
      }
      const Layer& spec = problem.layers[l];
      if (auto name = layer.Optional("name")) {
        if (name->String() != spec.name) name->Fail(fmt::format("layer {} of the problem is named '{}'", l, spec.name));
      }
      plan.option[l] = FindOption(layer.Required("option", "the name of one of the layer's options"), spec);
      ++next;
    }
    plan.stage_begin.push_back(next);
  }
  if (next != n) {
    stages.FailAt(fmt::format("the stages cover layers 0..{} but the problem has {} layers (0..{}); assign every layer "
                              "to a stage",
                              next - 1, n, n - 1));
  }
  if (auto solver = root.Optional("solver")) out.solver = ReadSolver(*solver);
  Status valid = ValidatePlan(problem, plan);
  if (!valid.ok()) throw internal::CursorFailure{valid.error().message};
  return out;
}

}  // namespace

Result<PlanDocument> ReadPlan(const Json& doc, const Problem& problem, const std::string& source) {
  return ReadDocument<PlanDocument>(source, [&] { return ReadPlanTree(doc, problem); });
}

Result<PlanDocument> LoadPlan(const std::string& path, const Problem& problem) {
  Result<Json> doc = LoadDocument(path);
  if (!doc.ok()) return doc.error();
  return ReadPlan(doc.value(), problem, path);
}

Json PlanToJson(const Problem& problem, const Plan& plan, const SimResult& sim, const SolverInfo& solver) {
  const Pipeline& p = problem.pipeline;
  Json out = Json::object();
  out["iteration_time_s"] = ToSeconds(sim.iteration_ns);
  out["iteration_time_ns"] = sim.iteration_ns;
  // `stages` and `virtual_stages`, the old names of `ranks` and `chunks`, for tools that read them.
  out["pipeline"] = {{"schedule", ScheduleName(p.schedule)}, {"ranks", p.ranks},          {"chunks", p.chunks},
                     {"micro_batches", p.micro_batches},     {"stages", p.ranks}, {"virtual_stages", p.chunks}};
  if (p.micro_batch_group != 0) out["pipeline"]["micro_batch_group"] = p.micro_batch_group;
  if (p.overlap) out["pipeline"]["overlap"] = true;
  out["memory_capacity_bytes"] = sim.capacity_bytes;
  out["fits_memory"] = sim.fits;
  out["bubble"] = {{"ratio", sim.bubble.ratio},
                   {"real", sim.bubble.real},
                   {"ideal", sim.bubble.ideal},
                   {"imbalance", sim.bubble.imbalance},
                   {"recompute", sim.bubble.recompute}};
  Json stages = Json::array();
  for (StageIdx s = 0; s < plan.num_stages(); ++s) {
    const StageCost c = ComputeStageCost(problem, plan, s);
    Json layers = Json::array();
    for (LayerIdx l = plan.begin(s); l < plan.end(s); ++l) {
      layers.push_back({{"index", l},
                        {"name", problem.layers[l].name},
                        {"option", problem.layers[l].options[plan.option[l]].name}});
    }
    Json stage = {{"stage", s}, {"rank", p.RankOf(s)}};
    if (p.Copies() > 1) stage["mirror_rank"] = p.RankOf(s, 1);
    stage.update({{"chunk", p.ChunkOf(s)},
                  {"forward_s", ToSeconds(c.forward_ns)},
                  {"backward_s", ToSeconds(c.backward_ns)},
                  {"recompute_s", ToSeconds(c.recompute_ns)},
                  {"saved_bytes", c.saved_bytes},
                  {"transient_bytes", c.transient_bytes},
                  {"layers", std::move(layers)}});
    stages.push_back(std::move(stage));
  }
  out["stages"] = std::move(stages);
  Json ranks = Json::array();
  for (RankIdx r = 0; r < p.ranks; ++r) {
    const RankResult& rr = sim.ranks[r];
    ranks.push_back({{"rank", r},
                     {"peak_memory_bytes", rr.peak_memory_bytes},
                     {"memory_utilization", static_cast<double>(rr.peak_memory_bytes) / static_cast<double>(sim.capacity_bytes)},
                     {"static_bytes", rr.static_bytes},
                     {"max_in_flight", rr.max_in_flight},
                     {"busy_s", ToSeconds(rr.busy_ns)},
                     {"idle_s", ToSeconds(sim.iteration_ns - rr.busy_ns - rr.update_ns)},
                     {"recompute_s", ToSeconds(rr.recompute_ns)},
                     {"update_s", ToSeconds(rr.update_ns)},
                     {"finish_s", ToSeconds(rr.finish_ns)}});
    if (p.overlap) ranks.back()["hidden_comm_s"] = ToSeconds(rr.hidden_comm_ns);
  }
  out["ranks"] = std::move(ranks);
  Json& s = out["solver"] = {{"name", solver.name}, {"status", ModelStatusName(solver.status)}, {"seconds", solver.seconds}};
  if (solver.gap >= 0) s["gap"] = solver.gap;
  if (solver.bound_s >= 0) s["bound_s"] = solver.bound_s;
  if (solver.objective_s >= 0) s["objective_s"] = solver.objective_s;
  if (!solver.stopped_by.empty()) s["stopped_by"] = solver.stopped_by;
  // What the problem's costs leave out, with the numbers they qualify.
  if (problem.training && !problem.training->not_modeled.empty()) out["not_modeled"] = problem.training->not_modeled;
  // Every setting of the cost model's run with where it came from (given, file, profile, default).
  if (problem.training && !problem.training->settings.empty()) {
    Json settings = Json::object();
    for (const TrainingInfo::Setting& one : problem.training->settings) {
      settings[one.key] = {{"value", one.value}, {"from", one.from}};
    }
    out["settings"] = std::move(settings);
  }
  return out;
}

std::string PlanJsonText(const Problem& problem, const Plan& plan, const SimResult& sim, const SolverInfo& solver) {
  return DumpJson(PlanToJson(problem, plan, sim, solver), 2) + "\n";
}

}  // namespace bmpipe
