#include "bmpipe/solve/formulation.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "bmpipe/solve/load_bound.h"

namespace bmpipe {
namespace {

std::string Name(const char* base, int i) { return std::string(base) + "[" + std::to_string(i) + "]"; }
std::string Name(const char* base, int i, int j) {
  return std::string(base) + "[" + std::to_string(i) + "," + std::to_string(j) + "]";
}

// The terms sum_k value(k) x_sk of stage s, scaled.
template <typename Value>
void AddStageTerms(const Formulation& f, const Candidates& c, StageIdx s, double scale, Value value,
                   std::vector<LinearTerm>& terms) {
  if (scale == 0) return;
  for (std::size_t k = 0; k < c.per_stage[s].size(); ++k) {
    const double v = static_cast<double>(value(c.per_stage[s][k])) * scale;
    if (v != 0) terms.push_back({f.x[s][k], v});
  }
}

}  // namespace

double ChooseTimeUnit(const Candidates& candidates) {
  TimeNs largest = 1;
  for (const auto& stage : candidates.per_stage) {
    for (const Candidate& k : stage) largest = std::max(largest, k.cost.forward_ns + k.cost.backward_ns);
  }
  // Largest stage duration about 10..100 units.
  return std::pow(10.0, std::max(0.0, std::floor(std::log10(static_cast<double>(largest))) - 1));
}

Formulation BuildFormulation(const Problem& problem, const Candidates& candidates, const Schedule& schedule,
                             bool binary) {
  const Pipeline& p = problem.pipeline;
  const int stages = p.stages();
  const int n = problem.num_layers();
  Formulation f;
  const double time_unit_ns = ChooseTimeUnit(candidates);
  f.time_unit_ns = time_unit_ns;
  LinearModel& m = f.model;
  f.x.resize(stages);
  for (StageIdx s = 0; s < stages; ++s) {
    for (std::size_t k = 0; k < candidates.per_stage[s].size(); ++k) {
      f.x[s].push_back(m.AddColumn(Name("x", s, static_cast<int>(k)), 0, 1, 0, binary));
    }
  }
  for (StageIdx s = 0; s + 1 < stages; ++s) {
    f.b.push_back(m.AddColumn(Name("b", s), s + 1, n - stages + s + 1, 0, false));
  }
  for (StageIdx s = 0; s < stages; ++s) {
    f.forward.push_back(m.AddColumn(Name("F", s), 0, kInfinity, 0, false));
    f.backward.push_back(m.AddColumn(Name("B", s), 0, kInfinity, 0, false));
    if (p.SplitBackward()) f.weight_grad.push_back(m.AddColumn(Name("W", s), 0, kInfinity, 0, false));
    f.p2p.push_back(m.AddColumn(Name("P", s), 0, kInfinity, 0, false));
    if (p.overlap) {
      f.forward_comm.push_back(m.AddColumn(Name("Mf", s), 0, kInfinity, 0, false));
      f.backward_comm.push_back(m.AddColumn(Name("Mb", s), 0, kInfinity, 0, false));
    }
  }
  for (RankIdx r = 0; r < p.ranks; ++r) f.update.push_back(m.AddColumn(Name("U", r), 0, kInfinity, 0, false));
  f.t = m.AddColumn("T", 0, kInfinity, 1, false);
  f.t_floor = static_cast<double>(RankLoadBound(problem, schedule, 0, &candidates.memory_rows)) / time_unit_ns;

  // (f) the stage and rank durations, in time units.
  const double unit = 1.0 / time_unit_ns;
  std::vector<LinearRow> update_rows(p.ranks);
  for (RankIdx r = 0; r < p.ranks; ++r) update_rows[r] = {Name("dur_U", r), 0, 0, {{f.update[r], 1}}};
  // Column = sum_k value(k) x_sk, in time units.
  auto duration_row = [&](const char* name, StageIdx s, int column, TimeNs (*value)(const Candidate&)) {
    LinearRow row{Name(name, s), 0, 0, {{column, 1}}};
    AddStageTerms(f, candidates, s, -unit, value, row.terms);
    m.AddRow(std::move(row));
  };
  for (StageIdx s = 0; s < stages; ++s) {
    duration_row("dur_F", s, f.forward[s], [](const Candidate& k) { return k.cost.forward_ns; });
    duration_row("dur_B", s, f.backward[s], [](const Candidate& k) { return k.cost.backward_ns; });
    if (p.SplitBackward()) {
      duration_row("dur_W", s, f.weight_grad[s], [](const Candidate& k) { return k.cost.weight_grad_ns; });
    }
    if (p.overlap) {
      duration_row("dur_Mf", s, f.forward_comm[s], [](const Candidate& k) { return k.cost.forward_comm_ns; });
      duration_row("dur_Mb", s, f.backward_comm[s], [](const Candidate& k) { return k.cost.backward_comm_ns; });
    }
    duration_row("dur_P", s, f.p2p[s], [](const Candidate& k) { return k.cost.p2p_out_ns; });
    for (int copy = 0; copy < p.Copies(); ++copy) {
      AddStageTerms(f, candidates, s, -unit, [](const Candidate& k) { return k.update_ns; },
                    update_rows[p.RankOf(s, copy)].terms);
    }
  }
  for (LinearRow& row : update_rows) m.AddRow(std::move(row));

  for (StageIdx s = 0; s < stages; ++s) {
    LinearRow one{Name("one", s), 1, 1, {}};
    AddStageTerms(f, candidates, s, 1, [](const Candidate&) { return 1; }, one.terms);
    m.AddRow(std::move(one));

    // (b) b_s - b_{s-1} - sum n_k x_sk = 0, with the constants moved to the bounds.
    double constant = 0;
    LinearRow len{Name("len", s), 0, 0, {}};
    if (s + 1 < stages) {
      len.terms.push_back({f.b[s], 1});
    } else {
      constant += n;
    }
    if (s > 0) len.terms.push_back({f.b[s - 1], -1});
    AddStageTerms(f, candidates, s, -1, [](const Candidate& k) { return k.length; }, len.terms);
    len.lower = len.upper = -constant;
    m.AddRow(std::move(len));

    if (s > 0) {
      LinearRow lo{Name("start_lo", s), 0, kInfinity, {{f.b[s - 1], 1}}};
      AddStageTerms(f, candidates, s, -1, [](const Candidate& k) { return k.start_min; }, lo.terms);
      m.AddRow(std::move(lo));
      LinearRow hi{Name("start_hi", s), -kInfinity, 0, {{f.b[s - 1], 1}}};
      AddStageTerms(f, candidates, s, -1, [](const Candidate& k) { return k.start_max; }, hi.terms);
      m.AddRow(std::move(hi));
    }
  }

  if (!candidates.memory_exact) {
    const double budget = static_cast<double>(problem.memory_bytes - problem.reserved_bytes);
    // In thousandths of the budget: coefficients near 1 on every problem size, and the solvers'
    // feasibility tolerance (about 1e-7 of a unit) is 1e-10 of the budget, 8 bytes of 80 GB.
    // (Scaled to GB, a problem of a few hundred bytes was within tolerance of every row, and CBC
    // returned a plan over capacity.)
    const double scale = 1e3 / budget;
    for (RankIdx r = 0; r < p.ranks; ++r) {
      const auto& rows = candidates.memory_rows[r];
      for (std::size_t i = 0; i < rows.size(); ++i) {
        LinearRow mem{Name("mem", r, static_cast<int>(i)), -kInfinity, 1e3, {}};
        for (int c = 0; c < p.chunks; ++c) {
          const MemoryRow& row = rows[i];
          AddStageTerms(f, candidates, p.StageAt(r, c), scale,
                        [&](const Candidate& k) { return k.static_bytes + row.ChunkBytes(c, k.cost); }, mem.terms);
        }
        m.AddRow(std::move(mem));
      }
    }
  }
  return f;
}

void AddTimeIndexedRows(Formulation& f, const Problem& problem, const Schedule& schedule) {
  const Pipeline& p = problem.pipeline;
  LinearModel& m = f.model;
  // tau column of each op, indexed by its OpId.
  std::vector<int> tau(static_cast<std::size_t>(schedule.num_op_ids()), -1);
  for (RankIdx r = 0; r < p.ranks; ++r) {
    for (const Op& op : schedule.ops_of(r)) {
      tau[schedule.IdOf(op)] = m.AddColumn(std::string("t") + "FBW"[static_cast<int>(op.kind)] + "[" +
                                               std::to_string(op.stage) + "," + std::to_string(op.micro_batch) + "]",
                                           0, kInfinity, 0, false);
    }
  }
  const bool split = p.SplitBackward();
  // The duration of the op at position i of rank r as terms (times -1): one set, or one per term
  // of the max of an overlapped pair's phase.
  auto durations = [&](RankIdx r, std::size_t i) {
    const std::vector<Op>& ops = schedule.ops_of(r);
    const Op& op = ops[i];
    std::vector<std::vector<LinearTerm>> sets(1);
    auto [first, last] = ActionAround(ops, i);
    const int pair = op.kind == OpKind::kWeightGrad ? 0 : PairKind(ops, first, last, p.overlap);
    if (pair != 0 && i == first) {
      sets = {{{f.forward[op.stage], -1}, {f.forward_comm[op.stage], 1}}, {{f.backward_comm[ops[first + 1].stage], -1}}};
      return sets;
    }
    if (pair != 0 && i == first + 1) {
      sets = {{{f.backward[op.stage], -1}, {f.backward_comm[op.stage], 1}}, {{f.forward_comm[ops[first].stage], -1}}};
      if (split) sets[0].push_back({f.weight_grad[op.stage], 1});
      if (pair == 2) sets[1].push_back({f.weight_grad[op.stage], 1});
      return sets;
    }
    switch (op.kind) {
      case OpKind::kForward:
        sets[0].push_back({f.forward[op.stage], -1});
        break;
      case OpKind::kBackward:
        sets[0].push_back({f.backward[op.stage], -1});
        if (split) sets[0].push_back({f.weight_grad[op.stage], 1});
        break;
      case OpKind::kWeightGrad:
        sets[0].push_back({f.weight_grad[op.stage], -1});
        break;
    }
    return sets;
  };
  auto add_rows = [&](const char* base, int& serial, const std::vector<LinearTerm>& fixed, RankIdx r, std::size_t i) {
    for (const std::vector<LinearTerm>& terms : durations(r, i)) {
      LinearRow row{Name(base, serial++), 0, kInfinity, fixed};
      row.terms.insert(row.terms.end(), terms.begin(), terms.end());
      m.AddRow(std::move(row));
    }
  };
  int serial = 0;
  for (RankIdx r = 0; r < p.ranks; ++r) {
    const auto& ops = schedule.ops_of(r);
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const OpId id = schedule.IdAt(r, i);
      if (i > 0) add_rows("rank", serial, {{tau[id], 1}, {tau[schedule.IdAt(r, i - 1)], -1}}, r, i - 1);
      // After each dependency, plus p2p when it ran on another rank.
      for (const OpEdge& e : schedule.Dependencies(ops[i])) {
        std::vector<LinearTerm> fixed = {{tau[id], 1}, {tau[e.op], -1}};
        if (e.crosses_ranks) fixed.push_back({f.p2p[e.boundary], -1});
        add_rows("dep", serial, fixed, schedule.RankOfOp(e.op), schedule.PositionOf(e.op));
      }
    }
    if (!ops.empty()) {
      add_rows("end", serial, {{f.t, 1}, {tau[schedule.IdAt(r, ops.size() - 1)], -1}, {f.update[r], -1}}, r,
               ops.size() - 1);
    }
  }
}

LinearRow PathCut(const Formulation& f, const PathCoefficients& path, int serial) {
  LinearRow row{Name("path", serial), 0, kInfinity, {{f.t, 1}}};
  for (std::size_t s = 0; s < path.forward.size(); ++s) {
    if (path.forward[s] != 0) row.terms.push_back({f.forward[s], -static_cast<double>(path.forward[s])});
    if (path.backward[s] != 0) row.terms.push_back({f.backward[s], -static_cast<double>(path.backward[s])});
    if (path.weight_grad[s] != 0) row.terms.push_back({f.weight_grad[s], -static_cast<double>(path.weight_grad[s])});
    if (s < path.hops.size() && path.hops[s] != 0) row.terms.push_back({f.p2p[s], -static_cast<double>(path.hops[s])});
  }
  for (std::size_t s = 0; s < path.forward_comm.size(); ++s) {
    if (path.forward_comm[s] != 0) row.terms.push_back({f.forward_comm[s], -static_cast<double>(path.forward_comm[s])});
    if (path.backward_comm[s] != 0) row.terms.push_back({f.backward_comm[s], -static_cast<double>(path.backward_comm[s])});
  }
  if (path.update_rank >= 0) row.terms.push_back({f.update[path.update_rank], -1});
  return row;
}

Durations<double> RelaxedDurations(const Formulation& f, const std::vector<double>& solution) {
  Durations<double> d;
  for (std::size_t s = 0; s < f.forward.size(); ++s) {
    d.forward.push_back(std::max(0.0, solution[f.forward[s]]));
    d.backward.push_back(std::max(0.0, solution[f.backward[s]]));
    if (!f.weight_grad.empty()) d.weight_grad.push_back(std::clamp(solution[f.weight_grad[s]], 0.0, d.backward.back()));
    d.p2p_out.push_back(std::max(0.0, solution[f.p2p[s]]));
    if (!f.forward_comm.empty()) {
      d.forward_comm.push_back(std::clamp(solution[f.forward_comm[s]], 0.0, d.forward.back()));
      d.backward_comm.push_back(std::clamp(solution[f.backward_comm[s]], 0.0, d.backward.back()));
    }
  }
  for (int u : f.update) d.rank_update.push_back(std::max(0.0, solution[u]));
  return d;
}

Plan PlanFromSolution(const Formulation& f, const Problem& problem, const Candidates& candidates,
                      const std::vector<double>& solution) {
  Plan plan;
  plan.option.assign(problem.num_layers(), 0);
  LayerIdx start = 0;
  for (StageIdx s = 0; s < problem.pipeline.stages(); ++s) {
    std::size_t chosen = 0;
    for (std::size_t k = 1; k < candidates.per_stage[s].size(); ++k) {
      if (solution[f.x[s][k]] > solution[f.x[s][chosen]]) chosen = k;
    }
    const Candidate& c = candidates.per_stage[s][chosen];
    plan.stage_begin.push_back(start);
    AssignOptions(c, start, plan);
    start += c.length;
  }
  plan.stage_begin.push_back(start);
  return plan;
}

}  // namespace bmpipe
