// AdaPipe (Sun et al., ASPLOS 2024): two nested dynamic programs. Inner: for every stage and
// layer range, the recomputation mix that makes the stage fastest while its memory, with the
// micro-batches 1F1B keeps in flight at that position, fits (a knapsack over the layers'
// options; here the stage's exact Pareto candidates, candidates.h). Outer: the partition
// minimizing the surrogate sum_s T_s + (m-1) max_s T_s, found exactly by bounding max T by each
// distinct stage time in turn (ascending from the least feasible bound, until the bound alone
// exceeds the best).
#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "bmpipe/baselines/common.h"

namespace bmpipe {
namespace {

// The most (stage, start, length) entries its dynamic program may hold (12 bytes each): beyond,
// it is not run.
constexpr double kMaxEntries = 1 << 25;

}  // namespace

BaselineResult RunAdaPipe(const Problem& problem, const Deadline& deadline) {
  BaselineResult result;
  const Pipeline& pipeline = problem.pipeline;
  if (pipeline.chunks > 1) {
    return NotApplicable("AdaPipe plans 1F1B without interleaving");
  }
  const int n = problem.num_layers();
  const int stages = pipeline.stages();
  const double entries = static_cast<double>(stages) * (n + 1) * (n + 2) / 2;
  if (entries > kMaxEntries) {
    result.stopped_by = fmt::format(
        "its memory budget: its dynamic program holds stages x layers^2 / 2 = {:.3g} entries (at most {:.3g}); fewer "
        "layers",
        entries, kMaxEntries);
    return result;
  }
  CandidateLimits limits;
  limits.deadline = deadline;
  const Candidates candidates = GenerateCandidates(problem, Schedule(pipeline), limits);
  if (candidates.stop != StopReason::kNone) {
    result.stopped_by =
        candidates.stop == StopReason::kDeadline ? std::string(kStoppedByTimeLimit) : candidates.stop_reason;
    return result;
  }
  constexpr double kNone = std::numeric_limits<double>::infinity();
  // time[s][b][e - b], pick[s][b][e - b]: the fastest fitting candidate of stage s on [b, e).
  std::vector<std::vector<std::vector<double>>> time(stages, std::vector<std::vector<double>>(n + 1));
  std::vector<std::vector<std::vector<int>>> pick(stages, std::vector<std::vector<int>>(n + 1));
  std::vector<double> values;
  for (StageIdx s = 0; s < stages; ++s) {
    for (LayerIdx b = 0; b <= n; ++b) {
      time[s][b].assign(n - b + 1, kNone);
      pick[s][b].assign(n - b + 1, -1);
    }
    for (int k = 0; k < static_cast<int>(candidates.per_stage[s].size()); ++k) {
      const Candidate& c = candidates.per_stage[s][k];
      const double t = static_cast<double>(c.cost.forward_ns + c.cost.backward_ns);
      for (LayerIdx b = c.start_min; b <= c.start_max && b + c.length <= n; ++b) {
        if (t < time[s][b][c.length]) {
          time[s][b][c.length] = t;
          pick[s][b][c.length] = k;
        }
      }
    }
    for (LayerIdx b = 0; b <= n; ++b) {
      for (double t : time[s][b]) {
        if (t != kNone) values.push_back(t);
      }
    }
  }
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  // The least sum of stage times with every stage at most `cap`; fills `from` for the plan.
  // Infinite also when the deadline has passed (`stopped`).
  std::vector<std::vector<LayerIdx>> from(stages, std::vector<LayerIdx>(n + 1, -1));
  bool stopped = false;
  auto least_sum = [&](double cap) {
    if (stopped || (stopped = deadline.Expired())) return kNone;
    std::vector<std::vector<double>> sum(stages, std::vector<double>(n + 1, kNone));
    for (LayerIdx e = 1; e <= n; ++e) {
      if (time[0][0][e] <= cap) sum[0][e] = time[0][0][e];
    }
    for (StageIdx s = 1; s < stages; ++s) {
      for (LayerIdx e = s + 1; e <= n; ++e) {
        for (LayerIdx b = s; b < e; ++b) {
          const double t = time[s][b][e - b];
          if (sum[s - 1][b] == kNone || t > cap) continue;
          if (sum[s - 1][b] + t < sum[s][e]) {
            sum[s][e] = sum[s - 1][b] + t;
            from[s][e] = b;
          }
        }
      }
    }
    return sum[stages - 1][n];
  };
  const double m1 = pipeline.micro_batches - 1;
  const double lowest_sum = least_sum(kNone);
  double best = kNone, best_cap = kNone;
  // Feasibility is monotone in the cap: start from the least feasible one (binary search).
  const auto first = std::partition_point(values.begin(), values.end(), [&](double cap) { return least_sum(cap) == kNone; });
  for (auto it = first; it != values.end(); ++it) {
    const double cap = *it;
    if (best != kNone && m1 * cap + lowest_sum >= best) break;
    const double sum = least_sum(cap);
    if (sum != kNone && sum + m1 * cap < best) {
      best = sum + m1 * cap;
      best_cap = cap;
    }
  }
  PlanPicker picker(problem);
  if (stopped) {
    result.stopped_by = kStoppedByTimeLimit;
    return result;
  }
  if (best != kNone) {
    least_sum(best_cap);
    std::vector<LayerIdx> end(stages);
    end[stages - 1] = n;
    for (StageIdx s = stages - 1; s > 0; --s) end[s - 1] = from[s][end[s]];
    Plan plan = PlanWithEnds(problem, end);
    for (StageIdx s = 0; s < stages; ++s) {
      const LayerIdx b = plan.begin(s);
      AssignOptions(candidates.per_stage[s][pick[s][b][plan.end(s) - b]], b, plan);
    }
    picker.Offer(plan, fmt::format("layers per stage {}, per-stage recomputation by knapsack; surrogate {:.3f} s",
                                   StageSizes(end), ToSeconds(best)));
  }
  picker.Fill(result);
  if (!result.has_plan) result.config = "no stage range fits even with the most recomputation";
  return result;
}

}  // namespace bmpipe
