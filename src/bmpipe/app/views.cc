#include "bmpipe/app/views.h"

#include "bmpipe/app/common.h"
#include "bmpipe/app/model.h"
#include "bmpipe/io/plan_json.h"
#include "bmpipe/report/chrome_trace.h"
#include "bmpipe/schedule/schedule.h"
#include "bmpipe/sim/simulator.h"

namespace bmpipe::app {
namespace {

Result<Plan> ReadPlanText(const Problem& problem, const std::string& text) {
  Result<Json> doc = ParseDocument(text, "plan");
  if (!doc.ok()) return doc.error();
  Result<PlanDocument> plan = ReadPlan(doc.value(), problem, "plan");
  if (!plan.ok()) return plan.error();
  return plan.value().plan;
}

}  // namespace

Result<Problem> ModelProblem(const Json& keywords) {
  ModelRequest request;
  request.default_headroom = true;  // the problem `plan` would plan: the same default headroom
  std::string target;
  OptionTable table;
  AddModelOptions(table, request, "--problem");
  table.Add("", "target", &target, "The target whose recomputation settings' options are offered");
  if (Status read = ReadOptions(table, keywords, "Problem.from_model"); !read.ok()) return read.error();
  std::vector<TargetKind> targets;
  if (!target.empty()) {
    Result<TargetKind> kind = ParseTarget(target);
    if (!kind.ok()) return kind.error();
    targets.push_back(kind.value());
  }
  Lines lines;
  Files files;
  return BuildModelProblem(request, lines, files, targets);
}

Result<std::vector<std::vector<TimedOp>>> Timeline(const Problem& problem, const std::string& plan_text) {
  Result<Plan> plan = ReadPlanText(problem, plan_text);
  if (!plan.ok()) return plan.error();
  Result<SimResult> sim = SimulatePlan(problem, plan.value());
  if (!sim.ok()) return sim.error();
  const Schedule schedule(problem.pipeline);
  std::vector<std::vector<TimedOp>> out(schedule.rank_ops().size());
  for (std::size_t r = 0; r < out.size(); ++r) {
    const std::vector<Op>& ops = schedule.rank_ops()[r];
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const OpTiming& t = sim.value().op_timing[r][i];
      const char kind = ops[i].kind == OpKind::kForward ? 'F' : ops[i].kind == OpKind::kBackward ? 'B' : 'W';
      out[r].push_back({ops[i].stage, ops[i].micro_batch, kind, ToSeconds(t.start_ns), ToSeconds(t.end_ns)});
    }
  }
  return out;
}

Result<std::string> ChromeTrace(const Problem& problem, const std::string& plan_text, const std::string& title) {
  Result<Plan> plan = ReadPlanText(problem, plan_text);
  if (!plan.ok()) return plan.error();
  return PlanChromeTrace(problem, plan.value(), title);
}

}  // namespace bmpipe::app
