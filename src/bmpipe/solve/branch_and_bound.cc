#include "bmpipe/solve/branch_and_bound.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <queue>
#include <set>

#include <fmt/format.h>

#include "bmpipe/sim/simulator.h"
#include "bmpipe/solve/coin.h"
#include "bmpipe/solve/diagnose.h"
#include "bmpipe/solve/family_bound.h"
#include "bmpipe/solve/formulation.h"
#include "bmpipe/solve/load_bound.h"
#include "bmpipe/solve/local_search.h"

namespace bmpipe {
namespace {

constexpr double kIntegral = 1e-6;
constexpr int kMaxCutRounds = 200;
// Rounds of path cuts at a node below the root while its relaxation stays fractional: then it
// branches (an integral one is cut until no path is longer than T). The root cuts to the end, and
// every cut is shared by all nodes. Cutting each node to the end made a node cost 3.5 LP solves
// where branching on it costs one; with 2, bench_planner at 10 s proves 13 of 48 interleaved cases
// instead of 12, median gap 0.86 % instead of 1.43 % (1: 1.28 - 2.46 % on 16-stage cases where 2
// gave 0.81 - 1.42 %, nodes without cuts branch blindly; 3 and 5: between the two).
constexpr int kNodeCutRounds = 2;
// Seconds per candidate column to build the relaxation (formulation, CLP's copy, family bound),
// measured on 332k columns on the 2-core machine (0.7 s), rounded up; freeing it: formulation.h.
constexpr double kBuildPerCandidateS = 2.5e-6;
// When the family bound at the root is within 3 % of the incumbent, it is run again with 256
// states per layer position, for its plan: with the default 48, merged states made that plan up to
// 9 % slower on 64-stage 1F1B benchmark cases; with 256, none (its dynamic program then took up to
// 1 s there, and up to 27 s on interleaved cases, where the family is weak and not run again).
constexpr double kCloseFamily = 0.97;
constexpr std::size_t kRootFamilyStates = 256;

// An LP basis (LpSolver::Basis), shared by the two children of the node it solved.
using SharedBasis = std::shared_ptr<const std::vector<unsigned char>>;

struct Node {
  std::vector<int> b_lo, b_hi;  // per boundary s = 0..S-2
  std::vector<int> k_lo, k_hi;  // per stage: allowed candidate indices [k_lo, k_hi)
  double bound = 0;             // parent's bound (a valid lower bound for this node too)
  int depth = 0;
  long id = 0;
  // The parent's optimal basis (shared by its two children), where the relaxation starts.
  SharedBasis basis;

  // Bytes it holds, for the memory budget (its half of the shared basis).
  std::int64_t Bytes() const {
    return static_cast<std::int64_t>(sizeof(Node) + 4 * 16 +
                                     (b_lo.size() + b_hi.size() + k_lo.size() + k_hi.size()) * sizeof(int) +
                                     (basis ? basis->size() / 2 : 0));
  }
};

struct NodeOrder {
  bool operator()(const Node& a, const Node& b) const {
    if (a.bound != b.bound) return a.bound > b.bound;  // lowest bound first
    if (a.depth != b.depth) return a.depth < b.depth;  // then deepest
    return a.id > b.id;
  }
};

class Search {
 public:
  Search(const Problem& problem, const Candidates& candidates, const Schedule& schedule, const PlannerOptions& options,
         const Deadline& deadline, const std::string& deadline_name)
      : problem_(problem),
        candidates_(candidates),
        schedule_(schedule),
        options_(options),
        deadline_(deadline),
        deadline_name_(deadline_name),
        began_(std::chrono::steady_clock::now()),
        builder_(problem, candidates, schedule),
        time_unit_ns_(ChooseTimeUnit(candidates)),
        t_floor_(static_cast<double>(RankLoadBound(problem, schedule, 0, &candidates.memory_rows)) / time_unit_ns_) {}

  PlannerResult Run() {
    const int stages = problem_.pipeline.stages();
    Report("first plans", t_floor_);
    // First incumbents: the even split and the memory-balanced split, improved by local search
    // (before the relaxation is built: a plan comes first).
    // Seeds (plans found elsewhere, PlannerOptions::seeds) are incumbents as they are, and their
    // boundaries starts for local search.
    std::vector<std::vector<int>> starts = {StageEnds(EvenPlan(problem_)),
                                            MemoryBalancedBoundaries(problem_, candidates_.memory_rows)};
    for (const Plan& seed : options_.seeds) {
      Offer(seed, -1);
      starts.push_back(StageEnds(seed));
    }
    for (const std::vector<int>& end : starts) {
      if (std::optional<CandidatePlan> start = builder_.Complete(end, nullptr, /*allow_over=*/true)) {
        OfferCandidatePlan(ImproveLocally(builder_, *start, LocalSearchDeadline()));
      }
      if (deadline_.Expired()) break;
    }
    if (deadline_.Expired() || options_.node_limit == 0) {
      result_.stopped_by = deadline_.Expired() ? deadline_name_ : "node limit 0";
      return Finish(t_floor_);
    }
    if (!BuildRelaxation()) return Finish(t_floor_);
    Report("root bound", t_floor_);
    Node root;
    for (StageIdx s = 0; s + 1 < stages; ++s) {
      root.b_lo.push_back(s + 1);
      root.b_hi.push_back(problem_.num_layers() - stages + s + 1);
    }
    root.k_lo.assign(stages, 0);
    for (StageIdx s = 0; s < stages; ++s) root.k_hi.push_back(static_cast<int>(candidates_.per_stage[s].size()));
    std::priority_queue<Node, std::vector<Node>, NodeOrder> open;
    Push(open, root);
    while (!open.empty()) {
      if (deadline_.Expired()) {
        result_.stopped_by = deadline_name_;
        break;
      }
      if (options_.node_limit >= 0 && result_.nodes >= options_.node_limit) {
        result_.stopped_by = "node limit " + std::to_string(options_.node_limit);
        break;
      }
      if (held_bytes_ > kBranchAndBoundMemoryBudgetBytes) {
        result_.stopped_by = fmt::format("the branch-and-bound memory budget ({} MiB of open nodes and cuts)",
                                         kBranchAndBoundMemoryBudgetBytes >> 20);
        break;
      }
      Node node = open.top();
      open.pop();
      held_bytes_ -= node.Bytes();
      if (Pruned(node.bound)) continue;
      ++result_.nodes;
      Evaluate(node, open);
      if (options_.progress) {
        const double open_bound = open.empty() ? best_value_ : open.top().bound;
        Report("branch and bound", std::max(std::min(open_bound, unresolved_), t_floor_));
      }
    }
    // The lowest bound among nodes still open (the incumbent when none are), and of nodes
    // closed without a proof.
    double bound = open.empty() ? kInfinity : open.top().bound;
    bound = std::max(std::min(bound, unresolved_), t_floor_);
    return Finish(bound);
  }

 private:
  double Elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - began_).count();
  }
  void Report(const char* phase, double bound) const {
    if (!options_.progress) return;
    Progress p{phase};
    const double unit_s = ToSeconds(time_unit_ns_);
    if (has_plan_) p.best_s = best_value_ * unit_s;
    p.bound_s = std::min(bound, has_plan_ ? best_value_ : kInfinity) * unit_s;
    p.nodes = result_.nodes;
    options_.progress(p);
  }
  // Builds the linear relaxation and the family bound unless the time left is too short to build
  // and free them (then says so and returns false). From then on the search stops early enough to
  // free them in time.
  bool BuildRelaxation() {
    double columns = 0;
    for (const auto& stage : candidates_.per_stage) columns += static_cast<double>(stage.size());
    const double build_s = kBuildPerCandidateS * columns, free_s = kFreeSecondsPerColumn * columns;
    if (deadline_.SecondsLeft() < 1.5 * (build_s + free_s)) {
      result_.stopped_by = fmt::format(
          "{} (before the linear relaxation: building and freeing its {} candidate columns would take about {:.1f} s)",
          deadline_name_, static_cast<long>(columns), build_s + free_s);
      return false;
    }
    deadline_ = deadline_.Earlier(Deadline::In(deadline_.SecondsLeft() - free_s));
    formulation_.emplace(BuildFormulation(problem_, candidates_, schedule_, /*binary=*/false));
    lp_ = std::make_unique<LpSolver>(formulation_->model);
    // Timing the schedule twice per stage can take long on the largest problems: at most a
    // quarter of the time.
    family_.emplace(problem_, candidates_, schedule_, deadline_.Share(0.25));
    return true;
  }

  // Node bounds order the search (lowest first); the rank-load floor (g) only prunes and
  // reports: as a node's bound it would tie most nodes and turn best-first into depth-first.
  bool Pruned(double bound) const {
    return has_plan_ && std::max(bound, t_floor_) >= best_value_ * (1 - kOptimalityTolerance);
  }

  // Sets the LP's column bounds to the node's box; false when some stage has no candidate left.
  bool ApplyBounds(const Node& node) {
    const LinearModel& m = formulation_->model;
    std::vector<double> lo = m.column_lower, hi = m.column_upper;
    const int stages = problem_.pipeline.stages();
    const int n = problem_.num_layers();
    auto b_lo = [&](int s) { return s < 0 ? 0 : (s == stages - 1 ? n : node.b_lo[s]); };
    auto b_hi = [&](int s) { return s < 0 ? 0 : (s == stages - 1 ? n : node.b_hi[s]); };
    for (StageIdx s = 0; s + 1 < stages; ++s) {
      lo[formulation_->b[s]] = node.b_lo[s];
      hi[formulation_->b[s]] = node.b_hi[s];
    }
    for (StageIdx s = 0; s < stages; ++s) {
      bool any = false;
      for (int k = 0; k < static_cast<int>(candidates_.per_stage[s].size()); ++k) {
        const Candidate& c = candidates_.per_stage[s][k];
        // A start in the candidate's window and the node's boundary box, with an end in the box.
        const int start_lo = std::max({c.start_min, b_lo(s - 1), b_lo(s) - c.length});
        const int start_hi = std::min({c.start_max, b_hi(s - 1), b_hi(s) - c.length});
        const bool allowed = k >= node.k_lo[s] && k < node.k_hi[s] && start_lo <= start_hi;
        if (!allowed) hi[formulation_->x[s][k]] = 0;
        any = any || allowed;
      }
      if (!any) return false;
    }
    lp_->SetColumnBounds(lo, hi);
    return true;
  }

  // Solves the node's relaxation, adding violated path cuts (below the root at most
  // kNodeCutRounds rounds while it is fractional). False when infeasible. At the root,
  // each round's value is a bound on the whole problem: reported.
  // A solve the time limit stops after the first round keeps the round before it: its T and x
  // (T only grows as cuts are added, and each round's T is a bound).
  bool SolveRelaxation(double& bound, std::vector<double>& x, bool root) {
    for (int round = 0; round < kMaxCutRounds; ++round) {
      ++result_.lp_solves;
      // A relaxation whose value reaches the incumbent's prunes its node: the dual simplex may
      // stop there.
      lp_->SetCutoff(has_plan_ ? best_value_ * (1 - kOptimalityTolerance) : kInfinity);
      const Result<ModelStatus> status = lp_->Solve(deadline_);
      if (!status.ok()) {
        lp_error_ = true;
        return false;
      }
      if (status.value() == ModelStatus::kInfeasible) return false;
      if (status.value() == ModelStatus::kNoSolution) {
        if (round > 0) return true;
        lp_stopped_ = true;
        return false;
      }
      x = lp_->solution();
      bound = x[formulation_->t];
      if (root) Report("root bound", std::max(bound, t_floor_));
      // Any T is a valid bound: stop cutting when out of time.
      if (deadline_.Expired()) return true;
      // Below the root, a fractional relaxation branches after kNodeCutRounds rounds.
      if (!root && round + 1 >= kNodeCutRounds && FindSplit(x)) return true;
      if (!AddViolatedCut(x, bound)) return true;
    }
    return true;
  }

  // How to branch on a relaxation's solution: on its most fractional boundary b_s (splitting the
  // pipeline into nearly independent halves), else on the first stage whose candidates are mixed
  // (its index range split between the first and the last candidate in use); none when integral.
  struct Split {
    int boundary = -1;      // the boundary to split, or -1
    StageIdx stage = -1;    // else the stage whose candidate range is split at `mid`
    int mid = 0;
  };
  std::optional<Split> FindSplit(const std::vector<double>& x) const {
    const int stages = problem_.pipeline.stages();
    Split split;
    double worst = kIntegral;
    for (StageIdx s = 0; s + 1 < stages; ++s) {
      const double v = x[formulation_->b[s]];
      const double frac = std::abs(v - std::round(v));
      if (frac > worst) {
        worst = frac;
        split.boundary = s;
      }
    }
    if (split.boundary >= 0) return split;
    for (StageIdx s = 0; s < stages; ++s) {
      int first = -1, last = -1;
      for (int k = 0; k < static_cast<int>(candidates_.per_stage[s].size()); ++k) {
        if (x[formulation_->x[s][k]] > kIntegral) {
          if (first < 0) first = k;
          last = k;
        }
      }
      if (first != last) {
        split.stage = s;
        split.mid = (first + last + 1) / 2;
        return split;
      }
    }
    return std::nullopt;
  }

  // Times the relaxation's durations; adds the critical path as a cut if it is longer than T and
  // not a cut yet. False when none was added. (Adding the longest path to every rank's end each
  // round was measured slower: more rows, no fewer nodes.)
  bool AddViolatedCut(const std::vector<double>& x, double t) {
    const Durations<double> d = RelaxedDurations(*formulation_, x);
    const Timing<double> timing = TimeSchedule(schedule_, d, /*record_binding=*/true);
    if (timing.iteration <= t + 1e-9 * std::max(1.0, t)) return false;
    const PathCoefficients path = CriticalPath(schedule_, d, timing, timing.last_rank);
    std::vector<int> key = path.forward;
    key.insert(key.end(), path.backward.begin(), path.backward.end());
    key.insert(key.end(), path.weight_grad.begin(), path.weight_grad.end());
    key.insert(key.end(), path.hops.begin(), path.hops.end());
    key.push_back(path.update_rank);
    const std::int64_t key_bytes = static_cast<std::int64_t>(key.size() * sizeof(int) + 64);
    if (!cut_keys_.insert(key).second) return false;  // already a cut: numerical noise only
    const LinearRow cut = PathCut(*formulation_, path, static_cast<int>(result_.cuts));
    // Our key, and CLP's copy of the row (index and value per term).
    held_bytes_ += key_bytes + static_cast<std::int64_t>(cut.terms.size() * (sizeof(int) + sizeof(double)));
    lp_->AddRow(cut);
    ++result_.cuts;
    return true;
  }

  void Evaluate(const Node& node, std::priority_queue<Node, std::vector<Node>, NodeOrder>& open) {
    if (!ApplyBounds(node)) return;
    if (node.basis) lp_->SetBasis(*node.basis);
    // The family bound is exact over the integers: try it before the relaxation, at the root and
    // then only if at the root it was at least as strong as the relaxation (with few
    // micro-batches per rank it is the weaker one, and its states grow).
    // Its minimizing plan is tried as an incumbent: on long 1F1B pipelines it is often the optimum.
    double family = 0;
    if (node.depth == 0 || use_family_) {
      // At the root at most half the time left, so that the relaxation gets its share.
      const Deadline share = node.depth == 0 ? deadline_.Share(0.5) : deadline_;
      CandidatePlan plan;
      family = family_->Bound(node.b_lo, node.b_hi, node.k_lo, node.k_hi, share, &plan) / time_unit_ns_;
      if (node.depth == 0 && has_plan_ && family >= kCloseFamily * best_value_) {
        // Close to the incumbent: its plan is worth more states (fewer merged), and local search.
        CandidatePlan finer;
        const double bound = family_->Bound(node.b_lo, node.b_hi, node.k_lo, node.k_hi, deadline_.Share(0.5), &finer,
                                            kRootFamilyStates) /
                             time_unit_ns_;
        if (!finer.end.empty()) {
          family = std::max(family, bound);
          plan = ImproveLocally(builder_, finer, LocalSearchDeadline());
        }
      }
      if (!plan.end.empty()) OfferCandidatePlan(plan);
      if (family == kInfinity || Pruned(family)) return;
    }
    double bound = 0;
    std::vector<double> x;
    if (!SolveRelaxation(bound, x, node.depth == 0)) {
      if (lp_error_ || lp_stopped_) unresolved_ = std::min(unresolved_, node.bound);  // not proven empty
      return;
    }
    if (node.depth == 0) use_family_ = family >= bound;
    bound = std::max({bound, node.bound, family});
    TryRounding(x, /*improve=*/node.depth == 0);
    if (Pruned(bound)) return;

    // The children start from this node's basis (a few pivots away from theirs: on 32 layers,
    // 4 ranks x 2 chunks, m = 32, the proof took 11 s instead of 27 s), kept while the open nodes
    // hold less than half the memory budget; past that they start from the last solve's.
    if (const std::optional<Split> split = FindSplit(x)) {
      SharedBasis basis;
      if (held_bytes_ < kBranchAndBoundMemoryBudgetBytes / 2) {
        basis = std::make_shared<const std::vector<unsigned char>>(lp_->Basis());
      }
      Node left = Child(node, bound, basis), right = Child(node, bound, basis);
      if (split->boundary >= 0) {
        const double v = x[formulation_->b[split->boundary]];
        left.b_hi[split->boundary] = static_cast<int>(std::floor(v));
        right.b_lo[split->boundary] = static_cast<int>(std::ceil(v));
      } else {
        left.k_hi[split->stage] = split->mid;
        right.k_lo[split->stage] = split->mid;
      }
      Push(open, left);
      Push(open, right);
      return;
    }
    // Integral: the relaxation's plan is this node's optimum once no path is longer than T.
    const double value = Offer(PlanFromSolution(*formulation_, problem_, candidates_, x), bound);
    if (value > bound * (1 + kOptimalityTolerance)) unresolved_ = std::min(unresolved_, bound);
  }

  Node Child(const Node& parent, double bound, SharedBasis basis) {
    Node child = parent;
    child.bound = bound;
    child.basis = std::move(basis);
    child.depth = parent.depth + 1;
    child.id = ++next_id_;
    return child;
  }
  void Push(std::priority_queue<Node, std::vector<Node>, NodeOrder>& open, const Node& node) {
    for (std::size_t s = 0; s < node.b_lo.size(); ++s) {
      if (node.b_lo[s] > node.b_hi[s]) return;
    }
    for (std::size_t s = 0; s < node.k_lo.size(); ++s) {
      if (node.k_lo[s] >= node.k_hi[s]) return;
    }
    held_bytes_ += node.Bytes();
    open.push(node);
  }

  // Rounds the relaxation's boundaries and picks, per stage, the compatible candidate it weights
  // most (repairing ranks over capacity); offers the plan. At the root, also improves it locally.
  void TryRounding(const std::vector<double>& x, bool improve) {
    const int stages = problem_.pipeline.stages();
    const int n = problem_.num_layers();
    std::vector<int> end(stages);
    for (StageIdx s = 0; s + 1 < stages; ++s) end[s] = static_cast<int>(std::lround(x[formulation_->b[s]]));
    end[stages - 1] = n;
    for (StageIdx s = 0; s + 1 < stages; ++s) end[s] = std::clamp(end[s], (s == 0 ? 0 : end[s - 1]) + 1, n - stages + s + 1);
    std::vector<int> preferred(stages, -1);
    for (StageIdx s = 0; s < stages; ++s) {
      double best = kIntegral;
      for (std::size_t k = 0; k < candidates_.per_stage[s].size(); ++k) {
        if (x[formulation_->x[s][k]] > best) {
          best = x[formulation_->x[s][k]];
          preferred[s] = static_cast<int>(k);
        }
      }
    }
    std::optional<CandidatePlan> plan = builder_.Complete(end, &preferred, /*allow_over=*/improve);
    if (!plan) return;
    OfferCandidatePlan(improve ? ImproveLocally(builder_, *plan, LocalSearchDeadline()) : *plan);
  }

  // A quarter of the time left.
  Deadline LocalSearchDeadline() const { return deadline_.Share(0.25); }

  void OfferCandidatePlan(const CandidatePlan& plan) {
    if (builder_.Fits(plan)) Offer(builder_.ToPlan(plan), -1);
  }

  // Simulates `plan` and keeps it if it fits and beats the incumbent; returns its value in time
  // units (infinity if it does not fit).
  double Offer(const Plan& plan, double relaxation_value) {
    if (!ValidatePlan(problem_, plan).ok()) return kInfinity;
    Result<SimResult> sim = Simulate(schedule_, ComputeStageCosts(problem_, plan), ComputeRankCosts(problem_, plan),
                                     problem_.memory_bytes);
    if (!sim.ok() || !sim.value().fits) return kInfinity;
    const double value = static_cast<double>(sim.value().iteration_ns) / time_unit_ns_;
    if (!has_plan_ || value < best_value_) {
      has_plan_ = true;
      best_value_ = value;
      best_plan_ = plan;
      best_iteration_ns_ = sim.value().iteration_ns;
      best_objective_ = relaxation_value >= 0 ? relaxation_value : value;
    }
    return value;
  }

  PlannerResult Finish(double bound) {
    PlannerResult& r = result_;
    r.solver = "bmpipe-bnb";
    r.seconds = Elapsed();
    long count = 0;
    for (const auto& stage : candidates_.per_stage) count += static_cast<long>(stage.size());
    r.candidates = count;
    if (lp_stopped_ && r.stopped_by.empty()) r.stopped_by = deadline_name_;
    if (lp_error_ && r.stopped_by.empty()) r.stopped_by = "an LP relaxation CLP could not solve";
    if (has_plan_) {
      r.plan = best_plan_;
      r.iteration_ns = best_iteration_ns_;
      r.objective_ns = best_objective_ * time_unit_ns_;
      r.bound_ns = bound >= best_value_ ? static_cast<double>(best_iteration_ns_) : bound * time_unit_ns_;
      r.gap = (static_cast<double>(r.iteration_ns) - r.bound_ns) / static_cast<double>(r.iteration_ns);
      if (r.gap < kOptimalityTolerance) {
        r.gap = std::max(0.0, r.gap);
        r.status = ModelStatus::kOptimal;
      } else {
        r.status = ModelStatus::kFeasible;
      }
    } else {
      r.status = bound == kInfinity ? ModelStatus::kInfeasible : ModelStatus::kNoSolution;
      if (r.status == ModelStatus::kNoSolution) r.bound_ns = bound * time_unit_ns_;
    }
    return r;
  }

  const Problem& problem_;
  const Candidates& candidates_;
  const Schedule& schedule_;
  const PlannerOptions& options_;
  Deadline deadline_;  // once the relaxation is built, less the time to free it
  const std::string deadline_name_;
  std::chrono::steady_clock::time_point began_;
  std::optional<Formulation> formulation_;  // built after the first plans (BuildRelaxation)
  std::unique_ptr<LpSolver> lp_;
  PlanBuilder builder_;
  std::optional<FamilyBound> family_;
  const double time_unit_ns_;
  const double t_floor_;  // the rank-load bound (g), in time units
  std::int64_t held_bytes_ = 0;  // open nodes and cuts, against the memory budget
  bool lp_stopped_ = false;
  std::set<std::vector<int>> cut_keys_;
  PlannerResult result_;
  long next_id_ = 0;
  bool has_plan_ = false;
  bool lp_error_ = false;
  bool use_family_ = false;
  double unresolved_ = kInfinity;  // lowest bound of a node closed without a proof
  double best_value_ = 0;
  double best_objective_ = 0;
  TimeNs best_iteration_ns_ = 0;
  Plan best_plan_;
};

}  // namespace

PlannerResult RunBranchAndBound(const Problem& problem, const Candidates& candidates, const Schedule& schedule,
                                const PlannerOptions& options, const Deadline& deadline,
                                const std::string& deadline_name) {
  Search search(problem, candidates, schedule, options, deadline, deadline_name);
  return search.Run();
}

}  // namespace bmpipe
