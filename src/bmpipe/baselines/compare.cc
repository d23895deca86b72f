#include "bmpipe/baselines/compare.h"

#include <fmt/format.h>

#include "bmpipe/solve/planner.h"
#include "bmpipe/frameworks/settings.h"

namespace bmpipe {

namespace {

Result<CompareRow> BmpipeRow(const Problem& problem, TargetKind target, const std::string& name,
                             const CompareOptions& options, const std::vector<Plan>& seeds, int done, int total) {
  PlannerOptions planner;
  planner.seeds = seeds;
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
  const bool also_any = options.target != TargetKind::kAny;
  const int total = static_cast<int>(options.baselines.size()) + (also_any ? 2 : 1);
  // The baselines first: their plans are points of bmpipe's space, which its planner starts from,
  // so that its rows are never slower than a plan another planner here found.
  BaselineOptions baseline_options;
  baseline_options.time_limit_s = options.time_limit_s;
  baseline_options.deadline = options.deadline;
  baseline_options.megatron_target =
      options.target == TargetKind::kMegatronLocal ? TargetKind::kMegatronLocal : TargetKind::kMegatron;
  std::vector<CompareRow> baselines;
  std::vector<Plan> seeds;
  for (BaselineKind kind : options.baselines) {
    if (options.progress) {
      Progress p{BaselineName(kind)};
      p.done = static_cast<int>(baselines.size());
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
    if (row.has_plan) seeds.push_back(row.plan);
    baselines.push_back(row);
  }
  const int planned = static_cast<int>(baselines.size());
  std::vector<CompareRow> rows;
  Result<CompareRow> bmpipe = BmpipeRow(problem, options.target, "bmpipe", options, seeds, planned, total);
  if (!bmpipe.ok()) return bmpipe.error();
  rows.push_back(bmpipe.value());
  if (also_any) {
    if (rows.front().has_plan) seeds.push_back(rows.front().plan);
    Result<CompareRow> any = BmpipeRow(problem, TargetKind::kAny, "bmpipe-any", options, seeds, planned + 1, total);
    if (!any.ok()) return any.error();
    rows.push_back(any.value());
  }
  rows.insert(rows.end(), baselines.begin(), baselines.end());
  for (CompareRow& row : rows) {
    if (!row.has_plan) continue;
    Result<SimResult> sim = SimulatePlan(problem, row.plan);
    if (!sim.ok()) return InternalError(row.name + " produced an invalid plan: " + sim.error().message);
    row.sim = sim.value();
    row.fits = row.sim.fits;
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
