#include "bmpipe/solve/planner.h"

#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "bmpipe/sim/simulator.h"
#include "bmpipe/solve/branch_and_bound.h"
#include "bmpipe/solve/candidates.h"
#include "bmpipe/solve/coin.h"
#include "bmpipe/solve/formulation.h"
#include "bmpipe/solve/load_bound.h"
#include "bmpipe/solve/quick_plan.h"

namespace bmpipe {
namespace {

// The share of the time the quick plan may take (its first simulation always runs: O(stages x
// micro-batches)).
constexpr double kQuickPlanShare = 0.1;

// The most ops `--solver cbc` takes: its time-indexed program has a column and about three rows
// per op (2 x stages x micro-batches), and CBC holds several copies.
constexpr long kMaxCbcOps = 250'000;

// CBC stops kFreeSecondsPerColumn per candidate before the deadline, to free the integer program
// in time, at most a quarter of the time left.
Deadline CbcDeadline(const Deadline& deadline, long candidates) {
  const double left = deadline.SecondsLeft();
  return deadline.Earlier(Deadline::In(left - std::min(0.25 * left, kFreeSecondsPerColumn * static_cast<double>(candidates))));
}

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Fills the plan fields of `r` from a simulated plan and the solver's bound.
void SetPlan(PlannerResult& r, const Problem& problem, const Plan& plan, double bound_ns) {
  r.plan = plan;
  r.iteration_ns = SimulatePlan(problem, plan).value().iteration_ns;
  r.bound_ns = std::min(bound_ns, static_cast<double>(r.iteration_ns));
  r.gap = (static_cast<double>(r.iteration_ns) - r.bound_ns) / static_cast<double>(r.iteration_ns);
}

PlannerResult RunCbc(const Problem& problem, const Candidates& candidates, const Schedule& schedule,
                     const PlannerOptions& options, const Deadline& deadline, const std::string& deadline_name) {
  PlannerResult r;
  r.solver = "cbc";
  Formulation f = BuildFormulation(problem, candidates, schedule, /*binary=*/true);
  AddTimeIndexedRows(f, problem, schedule);
  f.model.column_lower[f.t] = f.t_floor;  // (g); CBC orders its search by its own bounds
  MipOptions mip;
  mip.time_limit_s = std::max(1e-3, deadline.SecondsLeft());
  mip.deadline = deadline;
  mip.relative_gap = kOptimalityTolerance;
  mip.write_lp = options.write_lp;
  Result<MipResult> solved = SolveMip(f.model, mip);
  if (!solved.ok()) {
    // No verdict from CBC: no plan, the reason said (a result, as a limit's stop is).
    r.status = ModelStatus::kNoSolution;
    r.stopped_by = solved.error().message;
    return r;
  }
  MipResult& m = solved.value();
  r.lp_text = std::move(m.lp_text);
  r.seconds = m.seconds;
  r.nodes = m.nodes;
  switch (m.status) {
    case ModelStatus::kOptimal:
    case ModelStatus::kFeasible: {
      SetPlan(r, problem, PlanFromSolution(f, problem, candidates, m.solution), m.bound * f.time_unit_ns);
      r.objective_ns = m.objective * f.time_unit_ns;
      r.status = m.status == ModelStatus::kOptimal || r.gap < kOptimalityTolerance ? ModelStatus::kOptimal
                                                                                   : ModelStatus::kFeasible;
      if (r.status == ModelStatus::kFeasible) r.stopped_by = deadline_name;
      break;
    }
    case ModelStatus::kInfeasible:
      r.status = ModelStatus::kInfeasible;
      break;
    case ModelStatus::kNoSolution:
      r.status = ModelStatus::kNoSolution;
      r.stopped_by = deadline_name;
      break;
  }
  return r;
}

// Every contiguous partition and every option of every layer, simulated.
Result<PlannerResult> RunBruteForce(const Problem& problem, const Deadline& deadline, const std::string& deadline_name) {
  const int n = problem.num_layers();
  const int stages = problem.pipeline.stages();
  double count = std::lgamma(n) - std::lgamma(stages) - std::lgamma(n - stages + 1);  // log C(n-1, S-1)
  for (const Layer& layer : problem.layers) count += std::log(static_cast<double>(layer.options.size()));
  if (count > std::log(5e6)) {
    return InvalidInput(fmt::format(
        "--solver brute-force would simulate about {:.3g} plans; it is meant for tiny problems (up to a few "
        "million plans); use the default solver",
        std::exp(count)));
  }
  const auto began = std::chrono::steady_clock::now();
  PlannerResult r;
  r.solver = "brute-force";
  bool found = false;
  bool stopped = false;
  DeadlinePoll poll(deadline, 16);
  Plan plan;
  plan.option.assign(n, 0);
  // Cuts: stage_begin[1..S-1] strictly increasing in 1..n-1.
  std::vector<LayerIdx> cut(stages + 1);
  cut[0] = 0;
  cut[stages] = n;
  auto try_options = [&](auto&& self, LayerIdx l) -> void {
    if (stopped || (stopped = poll.Expired())) return;
    if (l == n) {
      ++r.nodes;
      Result<SimResult> sim = SimulatePlan(problem, plan);
      if (sim.ok() && sim.value().fits && (!found || sim.value().iteration_ns < r.iteration_ns)) {
        found = true;
        r.plan = plan;
        r.iteration_ns = sim.value().iteration_ns;
      }
      return;
    }
    for (OptionIdx o = 0; o < static_cast<OptionIdx>(problem.layers[l].options.size()); ++o) {
      plan.option[l] = o;
      self(self, l + 1);
    }
  };
  auto place_cuts = [&](auto&& self, int s) -> void {
    if (s == stages) {
      plan.stage_begin = cut;
      try_options(try_options, 0);
      return;
    }
    for (LayerIdx c = cut[s - 1] + 1; c <= n - (stages - s); ++c) {
      cut[s] = c;
      self(self, s + 1);
    }
  };
  place_cuts(place_cuts, 1);
  r.seconds = SecondsSince(began);
  if (stopped) {
    // Not every plan was seen: no bound beyond 0.
    r.stopped_by = deadline_name;
    r.status = found ? ModelStatus::kFeasible : ModelStatus::kNoSolution;
    r.objective_ns = static_cast<double>(r.iteration_ns);
    r.gap = found ? 1 : 0;
  } else if (found) {
    r.status = ModelStatus::kOptimal;
    r.objective_ns = static_cast<double>(r.iteration_ns);
    r.bound_ns = static_cast<double>(r.iteration_ns);
  } else {
    r.status = ModelStatus::kInfeasible;
  }
  return r;
}

// With as many layers as stages the partition is forced: each stage holds one layer. The plan
// with every layer at an option no slower than its others in forward and in backward with
// recomputation is then no slower than any plan (the simulated time is monotone in every op's
// duration): its time bounds every plan, and when it fits it is optimal. Not with overlapped
// pairs, whose time also depends on how an op splits into compute and communication.
std::optional<Plan> ForcedFastestPlan(const Problem& problem) {
  const int n = problem.num_layers();
  if (n != problem.pipeline.stages() || problem.pipeline.overlap) return std::nullopt;
  Plan plan;
  for (LayerIdx l = 0; l <= n; ++l) plan.stage_begin.push_back(l);
  plan.option.assign(n, 0);
  for (LayerIdx l = 0; l < n; ++l) {
    const OptionIdx fastest = FastestOption(problem.layers[l]);
    if (fastest < 0) return std::nullopt;
    plan.option[l] = fastest;
  }
  return plan;
}

}  // namespace

Result<PlannerResult> PlanPipeline(const Problem& problem, const PlannerOptions& options) {
  Status valid = ValidateProblem(problem);
  if (!valid.ok()) return valid.error();
  const auto began = std::chrono::steady_clock::now();
  const Deadline own = Deadline::In(options.time_limit_s);
  const bool own_first = options.deadline.IsNever() || own.SecondsLeft() <= options.deadline.SecondsLeft();
  const Deadline deadline = options.deadline.Earlier(own);
  const std::string deadline_name =
      !own_first                        ? std::string("the caller's time budget")
      : options.time_limit_name.empty() ? fmt::format("time limit {:g} s", options.time_limit_s)
                                        : options.time_limit_name;
  if (options.kind == PlannerKind::kBruteForce) {
    if (!options.space.unrestricted()) {
      return InvalidInput("--solver brute-force plans every per-layer choice; use it with --target any");
    }
    return RunBruteForce(problem, deadline, deadline_name);
  }
  const auto scheduling = std::chrono::steady_clock::now();
  const Schedule schedule = Schedule(problem.pipeline);
  const double schedule_s = SecondsSince(scheduling);
  const long ops = 2L * problem.pipeline.stages() * problem.pipeline.micro_batches;
  if (options.kind == PlannerKind::kCbc && ops > kMaxCbcOps) {
    return TooLarge(fmt::format(
        "--solver cbc builds a time-indexed program with a column and about three rows per op, and this pipeline has "
        "{} ops (2 x stages x micro-batches; at most {}); use the default solver (--solver bnb), or fewer stages or "
        "micro-batches",
        ops, kMaxCbcOps));
  }
  auto report = [&](const char* phase) {
    if (options.progress) options.progress(Progress{phase});
  };
  // The quick plan first (one option on every layer, among those the space contains).
  report("quick plan");
  double simulation_s = 0;
  const std::optional<QuickPlan> quick = FindQuickPlan(problem, schedule, deadline.Share(kQuickPlanShare),
                                                       options.space.unrestricted() ? nullptr : &options.space,
                                                       &simulation_s);
  // A forced partition (ForcedFastestPlan): its fastest plan, when it fits, is the answer; its
  // time bounds every plan either way. It is often the quick plan (option 0 everywhere); else it
  // is simulated when the time left allows it (one simulation can take a second at 16M ops).
  double forced_bound_ns = 0;
  if (const std::optional<Plan> forced = ForcedFastestPlan(problem)) {
    TimeNs forced_ns = 0;  // its time, when known
    bool fits = false;
    if (quick && quick->plan == *forced) {
      forced_ns = quick->iteration_ns;  // the quick plan fits
      fits = true;
    } else if (deadline.SecondsLeft() > 2 * simulation_s) {
      const SimResult sim = Simulate(schedule, ComputeStageCosts(problem, *forced), ComputeRankCosts(problem, *forced),
                                     problem.memory_bytes)
                                .value();
      forced_ns = sim.iteration_ns;
      fits = sim.fits;
    }
    forced_bound_ns = static_cast<double>(forced_ns);
    if (fits && options.kind == PlannerKind::kBranchAndBound &&
        (options.space.unrestricted() || options.space.Contains(*forced))) {
      PlannerResult r;
      r.solver = "bmpipe-bnb";
      r.status = ModelStatus::kOptimal;
      r.plan = *forced;
      r.iteration_ns = forced_ns;
      r.objective_ns = r.bound_ns = forced_bound_ns;
      r.gap = 0;
      r.seconds = SecondsSince(began);
      return r;
    }
  }
  // The fastest seed that fits (in the space) stands beside the quick plan.
  std::optional<QuickPlan> seeded;
  std::vector<Plan> seeds;
  for (const Plan& seed : options.seeds) {
    if (!ValidatePlan(problem, seed).ok() || (!options.space.unrestricted() && !options.space.Contains(seed))) continue;
    Result<SimResult> sim = Simulate(schedule, ComputeStageCosts(problem, seed), ComputeRankCosts(problem, seed),
                                     problem.memory_bytes);
    if (!sim.ok() || !sim.value().fits) continue;
    seeds.push_back(seed);
    if (!seeded || sim.value().iteration_ns < seeded->iteration_ns) seeded = QuickPlan{seed, sim.value().iteration_ns};
  }
  const bool seed_first = seeded && (!quick || seeded->iteration_ns < quick->iteration_ns);
  const std::optional<QuickPlan> fallback = seed_first ? seeded : quick;
  PlannerOptions searched_options = options;
  searched_options.seeds = std::move(seeds);
  // The plan the candidates are capped by (CandidateLimits::time_cap_ns) is the search's first
  // incumbent: a relaxation the cap leaves infeasible then proves it optimal.
  if (quick && !seed_first) searched_options.seeds.push_back(quick->plan);
  // The search stops early enough for the caller to simulate the plan it returns (a schedule
  // built and simulated, to report it) within the limit: what may still run past it is the
  // re-score of a plan found just before the search stopped. Negligible but on the largest
  // schedules (about a second at 16M ops).
  const Deadline search_deadline = deadline.Earlier(Deadline::In(deadline.SecondsLeft() - (schedule_s + simulation_s)));
  if (options.progress) options.progress(Progress{"candidate blocks", quick ? ToSeconds(quick->iteration_ns) : -1});
  CandidateLimits limits;
  limits.deadline = search_deadline;
  limits.memory_budget_bytes = options.candidate_memory_budget_bytes;
  limits.max_candidates = options.max_candidates;
  limits.space = &options.space;
  if (fallback) limits.time_cap_ns = fallback->iteration_ns;
  const Candidates candidates = GenerateCandidates(problem, schedule, limits);
  long count = 0;
  bool every_stage = true;
  for (const auto& stage : candidates.per_stage) {
    count += static_cast<long>(stage.size());
    every_stage = every_stage && !stage.empty();
  }
  PlannerResult r;
  r.solver = options.kind == PlannerKind::kCbc ? "cbc" : "bmpipe-bnb";
  if (candidates.stop != StopReason::kNone) {
    r.status = ModelStatus::kNoSolution;
    r.stopped_by = candidates.stop == StopReason::kDeadline ? deadline_name + " (while generating candidate blocks)"
                                                               : "the candidate budget: " + candidates.stop_reason;
  } else if (!every_stage && fallback) {
    // With a known plan, the candidates of some stage are only blocks that do not fit or could
    // not beat it (CandidateLimits::time_cap_ns): the known plan is optimal.
    r.status = ModelStatus::kOptimal;
    r.plan = fallback->plan;
    r.iteration_ns = fallback->iteration_ns;
    r.objective_ns = r.bound_ns = static_cast<double>(fallback->iteration_ns);
    r.gap = 0;
  } else if (!every_stage) {
    // Some stage has no block that fits even alone: no plan fits.
    r.status = ModelStatus::kInfeasible;
  } else if (options.kind == PlannerKind::kCbc) {
    r = RunCbc(problem, candidates, schedule, searched_options, CbcDeadline(search_deadline, count), deadline_name);
  } else {
    r = RunBranchAndBound(problem, candidates, schedule, searched_options, search_deadline, deadline_name);
  }
  const bool searched = r.status == ModelStatus::kOptimal || r.status == ModelStatus::kFeasible;
  if (fallback && (r.status == ModelStatus::kNoSolution || (searched && fallback->iteration_ns < r.iteration_ns))) {
    // A limit stopped the run before any plan, or before one as fast as the quick plan or a seed.
    r.plan = fallback->plan;
    r.iteration_ns = fallback->iteration_ns;
    r.objective_ns = static_cast<double>(fallback->iteration_ns);
    r.bound_ns = std::min(std::max(r.bound_ns, static_cast<double>(RankLoadBound(problem, schedule, 0, &candidates.memory_rows))),
                          static_cast<double>(r.iteration_ns));
    r.gap = (static_cast<double>(r.iteration_ns) - r.bound_ns) / static_cast<double>(r.iteration_ns);
    r.status = r.gap < kOptimalityTolerance ? ModelStatus::kOptimal : ModelStatus::kFeasible;
    r.stopped_by += seed_first ? "; the plan is a given seed's (a target's or a baseline's plan), faster than what the "
                                 "search found"
                               : "; the plan is the quick one (one recomputation option on every layer, equal compute "
                                 "per stage)";
  } else if (r.status == ModelStatus::kNoSolution) {
    if (candidates.stop == StopReason::kBudget) {
      return TooLarge("the problem is too large to plan in the memory available: " + candidates.stop_reason +
                      "; and no quick plan (one recomputation option on every layer) fits");
    }
  }
  if (forced_bound_ns > r.bound_ns && (r.status == ModelStatus::kFeasible || r.status == ModelStatus::kOptimal)) {
    r.bound_ns = std::min(forced_bound_ns, static_cast<double>(r.iteration_ns));
    r.gap = (static_cast<double>(r.iteration_ns) - r.bound_ns) / static_cast<double>(r.iteration_ns);
    if (r.gap < kOptimalityTolerance) {
      r.status = ModelStatus::kOptimal;
      r.stopped_by.clear();
    }
  }
  r.candidates = count;
  r.seconds = SecondsSince(began);
  return r;
}

SolverInfo SolverInfoOf(const PlannerResult& r) {
  SolverInfo solver{r.solver, r.status == ModelStatus::kOptimal ? ModelStatus::kOptimal : ModelStatus::kFeasible,
                    r.seconds};
  solver.gap = r.gap;
  solver.bound_s = ToSeconds(r.bound_ns);
  solver.objective_s = ToSeconds(r.objective_ns);
  solver.stopped_by = r.stopped_by;
  return solver;
}

}  // namespace bmpipe
