// The MindFormers pipeline-balance tool's ILP (toolkit/pipeline_balance/sapp/sapp_solver.py, at
// its default optimization level -O 1; docs/baselines.md). Integer x[r][v][s]: decoder layers
// with recompute type r (here: the decoder's options) in chunk v of stage s. Head h (the
// embedding) sits in chunk 0 of stage 0, tail t (the head) in chunk V-1 of stage P-1; HT(s, vf,
// vb) adds their forward and backward where they sit.
//   C1  sum x = L;   C2  sum_r x[r][v][s] >= 1
//   C4  V = 1 or M != P:  Tmax >= F[vf][s] + B[vb][s] + HT(s, vf, vb) for all s, vf, vb
//       V > 1 and M = P:  Tmax >= B[v][s] (+ h's backward at v = s = 0) for v < V-1;
//                         Tlast >= B[V-1][s] (+ t's forward and backward at s = P-1)
//                                  + (k_s / M) F[V-1][s], k_s = |P-1-2s| (0 for s < P/2 when M < 2P);
//                         Tlast >= Tmax;  Tmax_eff = Tmax + Tlast
//       minimize T >= Tmax_eff
//   C5  static + head/tail + sum_v a[v][s] A[v][s] + reserved (+ OV[s] >= Omega_s when V > 1 and
//       M != P) <= capacity, with in-flight counts A[0][s] = P - s (V = 1) or
//       A[v][s] = min(M, P + [v=0] max(0, P-2s-1) + [v=V-1] min(0, P-2s-1)).
// The tool knows no transient memory and no p2p time; its plan is judged by the simulator.
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "bmpipe/baselines/common.h"
#include "bmpipe/solve/coin.h"

namespace bmpipe {

BaselineResult RunMindFormersTool(const Problem& problem, const Deadline& deadline) {
  BaselineResult result;
  const Pipeline& pipeline = problem.pipeline;
  if (pipeline.Copies() > 1) {
    return NotApplicable("the tool's ILP gives every stage one rank (DualPipe keeps two copies of each)");
  }
  const ModelShape shape = ShapeOf(problem);
  if (!shape.body_uniform) {
    return NotApplicable("the tool's ILP costs one decoder layer type (its multi-type support is not functional)");
  }
  const int P = pipeline.ranks, V = pipeline.chunks, M = pipeline.micro_batches;
  const int n = problem.num_layers();
  const Layer& body = problem.layers[shape.body_begin];
  const int types = static_cast<int>(body.options.size());
  const double unit = 1e-6;  // ms
  auto ms = [&](TimeNs t) { return static_cast<double>(t) * unit; };
  const bool has_head = shape.body_begin > 0, has_tail = shape.body_end < n;
  const LayerOption* head = has_head ? &problem.layers[0].options[NoneOption(problem.layers[0])] : nullptr;
  const LayerOption* tail = has_tail ? &problem.layers[n - 1].options[NoneOption(problem.layers[n - 1])] : nullptr;
  const double hf = head ? ms(head->forward_ns) : 0, hb = head ? ms(head->backward_ns + head->recompute_ns) : 0;
  const double tf = tail ? ms(tail->forward_ns) : 0, tb = tail ? ms(tail->backward_ns + tail->recompute_ns) : 0;

  LinearModel model;
  // x[r][v][s]
  std::vector<std::vector<std::vector<int>>> x(types, std::vector<std::vector<int>>(V, std::vector<int>(P)));
  for (int r = 0; r < types; ++r) {
    for (int v = 0; v < V; ++v) {
      for (int s = 0; s < P; ++s) {
        x[r][v][s] = model.AddColumn(fmt::format("x[{},{},{}]", body.options[r].name, v, s), 0, shape.body(), 0, true);
      }
    }
  }
  const int T = model.AddColumn("T", 0, kInfinity, 1, false);
  const int tmax = model.AddColumn("Tmax", 0, kInfinity, 0, false);
  // C1
  LinearRow c1{"layers", static_cast<double>(shape.body()), static_cast<double>(shape.body()), {}};
  for (int r = 0; r < types; ++r) {
    for (int v = 0; v < V; ++v) {
      for (int s = 0; s < P; ++s) c1.terms.push_back({x[r][v][s], 1});
    }
  }
  model.AddRow(std::move(c1));
  // C2
  for (int v = 0; v < V; ++v) {
    for (int s = 0; s < P; ++s) {
      LinearRow c2{fmt::format("nonempty[{},{}]", v, s), 1, kInfinity, {}};
      for (int r = 0; r < types; ++r) c2.terms.push_back({x[r][v][s], 1});
      model.AddRow(std::move(c2));
    }
  }
  // Adds coef * F[v][s] (forward) or coef * B[v][s] (backward with recomputation) to a row.
  auto add_time = [&](LinearRow& row, int v, int s, bool backward, double coef) {
    for (int r = 0; r < types; ++r) {
      const LayerOption& o = body.options[r];
      row.terms.push_back({x[r][v][s], coef * (backward ? ms(o.backward_ns + o.recompute_ns) : ms(o.forward_ns))});
    }
  };
  // C4
  if (V == 1 || M != P) {
    for (int s = 0; s < P; ++s) {
      for (int vf = 0; vf < V; ++vf) {
        for (int vb = 0; vb < V; ++vb) {
          const double ht = (s == 0 ? (vf == 0 ? hf : 0) + (vb == 0 ? hb : 0) : 0) +
                            (s == P - 1 ? (vf == V - 1 ? tf : 0) + (vb == V - 1 ? tb : 0) : 0);
          LinearRow row{fmt::format("tmax[{},{},{}]", s, vf, vb), ht, kInfinity, {{tmax, 1}}};
          add_time(row, vf, s, false, -1);
          add_time(row, vb, s, true, -1);
          model.AddRow(std::move(row));
        }
      }
    }
    model.AddRow({"objective", 0, kInfinity, {{T, 1}, {tmax, -1}}});
  } else {
    const int tlast = model.AddColumn("Tlast", 0, kInfinity, 0, false);
    for (int s = 0; s < P; ++s) {
      for (int v = 0; v + 1 < V; ++v) {
        LinearRow row{fmt::format("tmax[{},{}]", s, v), s == 0 && v == 0 ? hb : 0, kInfinity, {{tmax, 1}}};
        add_time(row, v, s, true, -1);
        model.AddRow(std::move(row));
      }
      const int kappa = (M < 2 * P && s < P / 2) ? 0 : std::abs(P - 1 - 2 * s);
      LinearRow row{fmt::format("tlast[{}]", s), s == P - 1 ? tf + tb : 0, kInfinity, {{tlast, 1}}};
      add_time(row, V - 1, s, true, -1);
      add_time(row, V - 1, s, false, -static_cast<double>(kappa) / M);
      model.AddRow(std::move(row));
    }
    model.AddRow({"tlast_ge_tmax", 0, kInfinity, {{tlast, 1}, {tmax, -1}}});
    model.AddRow({"objective", 0, kInfinity, {{T, 1}, {tmax, -1}, {tlast, -1}}});
  }
  // C5: memory in MB-free bytes scaled to GB to keep coefficients small.
  const double gb = 1 / kGigabyte;
  auto in_flight = [&](int v, int s) -> double {
    if (V == 1) return P - s;
    return std::min(M, P + (v == 0 ? std::max(0, P - 2 * s - 1) : 0) + (v == V - 1 ? std::min(0, P - 2 * s - 1) : 0));
  };
  for (int s = 0; s < P; ++s) {
    double constant = static_cast<double>(problem.reserved_bytes);
    if (s == 0 && has_head) {
      constant += static_cast<double>(problem.layers[0].static_bytes) + static_cast<double>(head->saved_bytes) * in_flight(0, 0);
    }
    if (s == P - 1 && has_tail) {
      constant += static_cast<double>(problem.layers[n - 1].static_bytes) +
                  static_cast<double>(tail->saved_bytes) * in_flight(V - 1, P - 1);
    }
    LinearRow mem{fmt::format("mem[{}]", s), -kInfinity, (static_cast<double>(problem.memory_bytes) - constant) * gb, {}};
    for (int r = 0; r < types; ++r) {
      for (int v = 0; v < V; ++v) {
        const double per_layer = static_cast<double>(body.static_bytes) +
                                 static_cast<double>(body.options[r].saved_bytes) * in_flight(v, s);
        mem.terms.push_back({x[r][v][s], per_layer * gb});
      }
    }
    if (V > 1 && M != P) {
      // OV[s] >= Omega_s: the tool's correction for chunks whose activations differ.
      const int ov = model.AddColumn(fmt::format("OV[{}]", s), 0, kInfinity, 0, true);
      mem.terms.push_back({ov, 1});
      LinearRow omega{fmt::format("overhead[{}]", s), 0, kInfinity, {{ov, 1}}};
      auto add_activation = [&](int v, double coef) {
        for (int r = 0; r < types; ++r) {
          omega.terms.push_back({x[r][(v % V + V) % V][s], -coef * static_cast<double>(body.options[r].saved_bytes) * gb});
        }
      };
      int vf = V - 1, vb = V - 1;
      for (int k = 1; k < V; ++k) {
        if (k % 2 == 1) {
          vf = (vf + 1) % V;
          const double f = P - std::abs(P - 2 * s - 1);
          add_activation(vf, f);
          add_activation(vb, -f);
        } else {
          vb = vb - 1;
          const double f1 = std::max(P - 2 * s - 1, 0), f2 = std::max(2 * s + 1 - P, 0);
          add_activation(vf + 1, f1);
          add_activation(vb + 1, -f1);
          add_activation(vf, f2);
          add_activation(vb, -f2);
        }
      }
      model.AddRow(std::move(omega));
    }
    model.AddRow(std::move(mem));
  }
  MipOptions mip;
  mip.time_limit_s = std::max(1e-3, std::min(deadline.SecondsLeft(), 90.0));  // the tool's default -t
  mip.deadline = deadline;
  // CBC's failure without a solution (numerical trouble) reads as no solution found.
  const Result<MipResult> mip_result = SolveMip(model, mip);
  const MipResult solved = mip_result.ok() ? mip_result.value() : MipResult{};
  PlanPicker picker(problem);
  if (HasSolution(solved.status)) {
    // Stages in pipeline order (chunk-major); within a stage, types in option order.
    Plan plan;
    plan.stage_begin.push_back(0);
    plan.option = NoneOptions(problem);
    LayerIdx at = shape.body_begin;
    std::string offsets;
    for (int v = 0; v < V; ++v) {
      for (int s = 0; s < P; ++s) {
        int count = 0;
        for (int r = 0; r < types; ++r) {
          const int k = static_cast<int>(std::lround(solved.solution[x[r][v][s]]));
          for (int i = 0; i < k; ++i) plan.option[at + count + i] = r;
          count += k;
        }
        at += count;
        const bool last = v == V - 1 && s == P - 1;
        plan.stage_begin.push_back(last ? n : at);
        offsets += (offsets.empty() ? "" : ", ") + std::to_string(count);
      }
    }
    picker.Offer(plan, fmt::format("decoder layers per stage [{}]; min-max objective {:.3f} ms{}", offsets,
                                   solved.objective,
                                   solved.status == ModelStatus::kOptimal ? "" : " (CBC stopped by the time limit)"));
  }
  picker.Fill(result);
  if (!result.has_plan) {
    result.config = solved.status == ModelStatus::kInfeasible ? "its ILP is infeasible (its memory model says no plan fits)"
                                                            : "CBC found no solution within the time limit";
  }
  return result;
}

}  // namespace bmpipe
