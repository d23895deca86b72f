// Mist (Zhu et al., EuroSys 2025; Dazz993/Mist, mist/analyzer/inter_tuning_mip.py), with the
// parallelism fixed by the problem. Intra-stage: for stage i holding j decoder layers (j within
// round(L/S) +- 2; the first stage also holds the embedding, the last the head), the candidates
// are the numbers c of checkpointed (fully recomputed) layers whose memory fits with the
// micro-batches in flight at that position; per (i, j) the Pareto front over (stable time per
// micro-batch, once-per-iteration delta) is the least such c. Inter-stage MILP, solved by CBC:
//   binary l[i][j] (stage i has j layers), sum_j l[i][j] = 1, sum_ij j l[i][j] = L,
//   T_i = sum_j t[i][j] l[i][j], D_i = sum_j d[i][j] l[i][j],
//   Max_t >= T_i, Max_d >= D_i - sum_{k<i} T_k,
//   minimize (m - 1) Max_t + sum_i T_i + Max_d.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "bmpipe/baselines/common.h"
#include "bmpipe/solve/coin.h"

namespace bmpipe {

BaselineResult RunMist(const Problem& problem, const Deadline& deadline) {
  BaselineResult result;
  const Pipeline& pipeline = problem.pipeline;
  const ModelShape shape = ShapeOf(problem);
  if (pipeline.chunks > 1) {
    return NotApplicable("Mist tunes 1F1B pipelines without interleaving");
  }
  if (!shape.body_uniform) {
    return NotApplicable("Mist's tuner assumes identical decoder layers (one layer type between pre and post)");
  }
  const int stages = pipeline.stages();
  const int body = shape.body();
  const int average = static_cast<int>(std::lround(static_cast<double>(body) / stages));
  const int lo = std::max(0, average - 2), hi = std::min(body, average + 2);
  const StageMemory memory(problem);
  const Layer& decoder = problem.layers[shape.body_begin];
  const OptionIdx full = FullOption(decoder);

  // Stage i with j decoder layers, placed where they cost the same as anywhere (the body is
  // uniform): the first stage from layer 0, the last up to the end, a middle one at the body's
  // start; its body layers are checkpointed from the first.
  struct Choice {
    bool fits = false;
    int checkpointed = 0;
    double stable_ns = 0, delta_ns = 0;
  };
  const int n = problem.num_layers();
  std::vector<std::vector<Choice>> choice(stages, std::vector<Choice>(hi + 1));
  for (StageIdx i = 0; i < stages; ++i) {
    const bool first = i == 0, last = i == stages - 1;
    for (int j = lo; j <= hi; ++j) {
      if (first && last && j != body) continue;
      const LayerIdx begin = first ? 0 : (last ? shape.body_end - j : shape.body_begin);
      const LayerIdx end = last ? n : shape.body_begin + j;
      if (end <= begin) continue;
      const LayerIdx body_from = std::max(begin, shape.body_begin);
      for (int c = 0; c <= j; ++c) {
        if (deadline.Expired()) {
          result.stopped_by = kStoppedByTimeLimit;
          return result;
        }
        std::vector<OptionIdx> option = NoneOptions(problem);
        for (int k = 0; k < c; ++k) option[body_from + k] = full;
        if (!memory.Fits(i, begin, end, option)) continue;
        Choice& ch = choice[i][j];
        ch.fits = true;
        ch.checkpointed = c;
        ch.stable_ns = ComputeNs(problem, begin, end, option);
        for (LayerIdx x = begin; x < end; ++x) ch.delta_ns += static_cast<double>(problem.layers[x].update_ns);
        break;
      }
    }
  }

  // The MILP, in milliseconds.
  LinearModel model;
  const double unit = 1e-6;
  std::vector<std::vector<int>> l(stages);
  std::vector<int> t(stages), d(stages);
  const int max_t = model.AddColumn("Max_t", 0, kInfinity, pipeline.micro_batches - 1, false);
  const int max_d = model.AddColumn("Max_d", -kInfinity, kInfinity, 1, false);
  LinearRow total{"layers", static_cast<double>(body), static_cast<double>(body), {}};
  for (StageIdx i = 0; i < stages; ++i) {
    LinearRow one{fmt::format("one[{}]", i), 1, 1, {}};
    t[i] = model.AddColumn(fmt::format("T[{}]", i), 0, kInfinity, 1, false);
    d[i] = model.AddColumn(fmt::format("D[{}]", i), 0, kInfinity, 0, false);
    LinearRow time_row{fmt::format("time[{}]", i), 0, 0, {{t[i], 1}}};
    LinearRow delta_row{fmt::format("delta[{}]", i), 0, 0, {{d[i], 1}}};
    for (int j = lo; j <= hi; ++j) {
      const Choice& ch = choice[i][j];
      l[i].push_back(model.AddColumn(fmt::format("l[{},{}]", i, j), 0, ch.fits ? 1 : 0, 0, true));
      one.terms.push_back({l[i].back(), 1});
      total.terms.push_back({l[i].back(), static_cast<double>(j)});
      time_row.terms.push_back({l[i].back(), -ch.stable_ns * unit});
      delta_row.terms.push_back({l[i].back(), -ch.delta_ns * unit});
    }
    model.AddRow(std::move(one));
    model.AddRow(std::move(time_row));
    model.AddRow(std::move(delta_row));
    model.AddRow({fmt::format("max_t[{}]", i), 0, kInfinity, {{max_t, 1}, {t[i], -1}}});
    LinearRow delta_max{fmt::format("max_d[{}]", i), 0, kInfinity, {{max_d, 1}, {d[i], -1}}};
    for (StageIdx k = 0; k < i; ++k) delta_max.terms.push_back({t[k], 1});
    model.AddRow(std::move(delta_max));
  }
  model.AddRow(std::move(total));
  MipOptions mip;
  mip.time_limit_s = std::max(1e-3, deadline.SecondsLeft());
  mip.deadline = deadline;
  // CBC's failure without a solution (numerical trouble) reads as no solution found.
  const Result<MipResult> mip_result = SolveMip(model, mip);
  const MipResult solved = mip_result.ok() ? mip_result.value() : MipResult{};
  PlanPicker picker(problem);
  if (HasSolution(solved.status)) {
    std::vector<LayerIdx> end(stages);
    std::vector<int> checkpointed(stages);
    LayerIdx at = shape.body_begin;
    for (StageIdx i = 0; i < stages; ++i) {
      for (int j = lo; j <= hi; ++j) {
        if (solved.solution[l[i][j - lo]] > 0.5) {
          at += j;
          checkpointed[i] = choice[i][j].checkpointed;
        }
      }
      end[i] = i + 1 == stages ? problem.num_layers() : at;
    }
    Plan plan = PlanWithEnds(problem, end);
    std::string list;
    for (StageIdx i = 0; i < stages; ++i) {
      int done = 0;
      for (LayerIdx x = plan.begin(i); x < plan.end(i) && done < checkpointed[i]; ++x) {
        if (x < shape.body_begin || x >= shape.body_end) continue;
        plan.option[x] = full;
        ++done;
      }
      list += (list.empty() ? "" : ", ") + std::to_string(checkpointed[i]);
    }
    picker.Offer(plan, fmt::format("layers per stage {}, checkpointed [{}]{}", StageSizes(end), list,
                                   solved.status == ModelStatus::kOptimal ? "" : " (CBC stopped by the time limit)"));
  }
  picker.Fill(result);
  if (!result.has_plan) {
    result.config = solved.status == ModelStatus::kInfeasible ? "no layer counts within the average +- 2 fit"
                                                            : "CBC found no solution within the time limit";
  }
  return result;
}

}  // namespace bmpipe
