#include "bmpipe/baselines/compare.h"

#include <fmt/format.h>

#include "bmpipe/solve/planner.h"
#include "bmpipe/frameworks/settings.h"

namespace bmpipe {

namespace {

Result<CompareRow> BmpipeRow(const Problem& problem, TargetKind target, const std::string& name,
                             const CompareOptions& options, int done, int total) {
  PlannerOptions planner;
  planner.time_limit_s = options.time_limit_s;
  planner.time_limit_name = fmt::format("time limit {:g} s", options.time_limit_s);
  planner.deadline = options.deadline;
  if (options.progress) {
    planner.progress = [&](const Progress& p) {
      Progress q = p;
      q.phase = name + ": " + p.phase;
      q.done = done;
      q.total = total;
      options.progress(q);
    };
  }
  Result<TargetPlan> planned = PlanForTarget(problem, target, planner);
  if (!planned.ok()) return planned.error();
  const PlannerResult& p = planned.value().planner;
  CompareRow bmpipe;
  bmpipe.name = name;
  bmpipe.seconds = p.seconds;
  bmpipe.bound_ns = p.bound_ns;
  switch (p.status) {
    case ModelStatus::kOptimal:
    case ModelStatus::kFeasible:
      bmpipe.has_plan = bmpipe.fits = true;
      bmpipe.plan = p.plan;
      bmpipe.status = p.status == ModelStatus::kOptimal ? "optimal" : fmt::format("gap {:.2f}%", 100 * p.gap);
      bmpipe.note = p.status == ModelStatus::kOptimal ? "proven optimal"
                                                     : fmt::format("best found, within {:.2f}% of the optimum ({})",
                                                                   100 * p.gap, p.stopped_by);
      break;
    case ModelStatus::kInfeasible:
      bmpipe.note = "proven: no plan fits in memory";
      break;
    case ModelStatus::kNoSolution:
      bmpipe.note = "no plan found before " + p.stopped_by;
      break;
  }
  const std::string& setting = planned.value().setting;
  if (!setting.empty()) bmpipe.note += "; " + setting;
  if (target == TargetKind::kAny && name != "bmpipe") bmpipe.note += "; needs per-layer recomputation in the framework";
  return bmpipe;
}

}  // namespace

Result<std::vector<CompareRow>> Compare(const Problem& problem, const CompareOptions& options) {
  std::vector<CompareRow> rows;
  const bool also_any = options.target != TargetKind::kAny;
  const int total = static_cast<int>(options.baselines.size()) + (also_any ? 2 : 1);
  Result<CompareRow> bmpipe = BmpipeRow(problem, options.target, "bmpipe", options, 0, total);
  if (!bmpipe.ok()) return bmpipe.error();
  rows.push_back(bmpipe.value());
  if (also_any) {
    Result<CompareRow> any = BmpipeRow(problem, TargetKind::kAny, "bmpipe-any", options, 1, total);
    if (!any.ok()) return any.error();
    rows.push_back(any.value());
  }
  BaselineOptions baseline_options;
  baseline_options.time_limit_s = options.time_limit_s;
  baseline_options.deadline = options.deadline;
  baseline_options.megatron_target =
      options.target == TargetKind::kMegatronLocal ? TargetKind::kMegatronLocal : TargetKind::kMegatron;
  for (BaselineKind kind : options.baselines) {
    if (options.progress) {
      Progress p{BaselineName(kind)};
      p.done = static_cast<int>(rows.size());
      p.total = total;
      options.progress(p);
    }
    const BaselineResult b = RunBaseline(kind, problem, baseline_options);
    CompareRow row;
    row.name = b.name;
    row.applicable = b.applicable;
    row.note = b.applicable ? b.config : b.not_applicable;
    row.has_plan = b.has_plan;
    row.fits = b.fits;
    row.plan = b.plan;
    row.seconds = b.seconds;
    rows.push_back(row);
  }
  for (CompareRow& row : rows) {
    if (!row.has_plan) continue;
    Result<SimResult> sim = SimulatePlan(problem, row.plan);
    if (!sim.ok()) return InternalError(row.name + " produced an invalid plan: " + sim.error().message);
    row.sim = sim.value();
    row.fits = row.sim.fits;
  }
  // The per-layer plan is never slower than a plan another planner here found: a baseline's plan
  // that fits and beats a search its time limit stopped is a per-layer plan too, and takes its
  // place (the proven bound stays).
  CompareRow& per_layer = rows[also_any ? 1 : 0];
  const std::size_t first_baseline = also_any ? 2 : 1;
  for (std::size_t i = first_baseline; i < rows.size(); ++i) {
    const CompareRow& b = rows[i];
    if (!b.has_plan || !b.fits) continue;
    if (per_layer.has_plan && per_layer.fits && b.sim.iteration_ns >= per_layer.sim.iteration_ns) continue;
    per_layer.plan = b.plan;
    per_layer.sim = b.sim;
    per_layer.has_plan = per_layer.fits = true;
    const double t = static_cast<double>(b.sim.iteration_ns);
    const double gap = std::max(0.0, (t - per_layer.bound_ns) / t);
    per_layer.status = gap < kOptimalityTolerance ? "optimal" : fmt::format("gap {:.2f}%", 100 * gap);
    per_layer.note += fmt::format("; the plan is {}'s, faster than what the search found before its limit", b.name);
  }
  return rows;
}

const CompareRow* MegatronRow(const std::vector<CompareRow>& rows) {
  for (const CompareRow& row : rows) {
    if (row.name == "megatron" && row.has_plan && row.fits) return &row;
  }
  return nullptr;
}

}  // namespace bmpipe
