#include "bmpipe/baselines/common.h"

#include <algorithm>
#include <limits>

#include "bmpipe/sim/simulator.h"

namespace bmpipe {

BaselineResult NotApplicable(std::string why) {
  BaselineResult r;
  r.applicable = false;
  r.not_applicable = std::move(why);
  return r;
}

double ComputeNs(const Problem& problem, LayerIdx begin, LayerIdx end, const std::vector<OptionIdx>& option) {
  double t = 0;
  for (LayerIdx l = begin; l < end; ++l) {
    const LayerOption& o = problem.layers[l].options[option[l]];
    t += static_cast<double>(o.forward_ns + o.backward_ns + o.recompute_ns);
  }
  return t;
}

void PlanPicker::Offer(const Plan& plan, const std::string& config) {
  Result<SimResult> sim = SimulatePlan(problem_, plan);
  if (!sim.ok()) return;
  const SimResult& r = sim.value();
  Bytes over = 0;
  for (const RankResult& rank : r.ranks) over = std::max(over, rank.peak_memory_bytes - problem_.memory_bytes);
  const bool better = !has_ || (r.fits && !fits_) ||
                      (r.fits == fits_ && (r.fits ? r.iteration_ns < best_time_ : over < best_over_));
  if (!better) return;
  has_ = true;
  fits_ = r.fits;
  best_time_ = r.iteration_ns;
  best_over_ = over;
  plan_ = plan;
  config_ = config;
}

void PlanPicker::Fill(BaselineResult& result) const {
  result.has_plan = has_;
  result.fits = fits_;
  if (has_) {
    result.plan = plan_;
    result.config = config_;
  }
}

std::vector<double> MerakCheckpointRatios(int stages, double r0) {
  std::vector<double> ratio(stages, 0.0);
  for (StageIdx i = 0; i + 1 < stages; ++i) {
    ratio[i] = std::max(0.0, 1 - (1 - r0) * (stages - 1) / (stages - 1 - i));
  }
  return ratio;
}

StageMemory::StageMemory(const Problem& problem)
    : problem_(problem), rows_(PeakMemoryRows(Schedule(problem.pipeline))) {}

Bytes StageMemory::Peak(StageIdx s, LayerIdx begin, LayerIdx end, const std::vector<OptionIdx>& option) const {
  Bytes fixed = problem_.reserved_bytes, saved = 0, weight_grad = 0, transient = 0;
  for (LayerIdx l = begin; l < end; ++l) {
    const Layer& layer = problem_.layers[l];
    const LayerOption& o = layer.options[option[l]];
    fixed += layer.static_bytes;
    saved += o.saved_bytes;
    weight_grad += layer.weight_grad_bytes;
    transient = std::max(transient, o.peak_extra_bytes);
  }
  Bytes peak = 0;
  const Pipeline& p = problem_.pipeline;
  for (int copy = 0; copy < p.Copies(); ++copy) {
    for (const MemoryRow& row : rows_[p.RankOf(s, copy)]) {
      peak = std::max(peak, row.ChunkBytes(p.ChunkOf(s), saved, weight_grad, transient));
    }
  }
  return fixed + peak;
}

std::vector<LayerIdx> MinMaxPartition(const Problem& problem, int stages,
                                      const std::function<double(StageIdx, LayerIdx, LayerIdx)>& cost,
                                      const Deadline& deadline, bool* stopped) {
  // A cost can take O(layers): the clock is read every few calls.
  DeadlinePoll poll(deadline, 16);
  const int n = problem.num_layers();
  constexpr double kNone = std::numeric_limits<double>::infinity();
  // best[s][e]: the least largest cost of stages 0..s covering layers [0, e).
  std::vector<std::vector<double>> best(stages, std::vector<double>(n + 1, kNone));
  std::vector<std::vector<LayerIdx>> from(stages, std::vector<LayerIdx>(n + 1, -1));
  for (LayerIdx e = 1; e <= n - stages + 1; ++e) {
    if (poll.Expired()) {
      if (stopped != nullptr) *stopped = true;
      return {};
    }
    best[0][e] = cost(0, 0, e);
  }
  for (StageIdx s = 1; s < stages; ++s) {
    for (LayerIdx e = s + 1; e <= n - stages + s + 1; ++e) {
      for (LayerIdx b = s; b < e; ++b) {
        if (best[s - 1][b] == kNone) continue;
        if (poll.Expired()) {
          if (stopped != nullptr) *stopped = true;
          return {};
        }
        const double c = std::max(best[s - 1][b], cost(s, b, e));
        if (c < best[s][e]) {
          best[s][e] = c;
          from[s][e] = b;
        }
      }
    }
  }
  if (best[stages - 1][n] == kNone) return {};
  std::vector<LayerIdx> end(stages);
  end[stages - 1] = n;
  for (StageIdx s = stages - 1; s > 0; --s) end[s - 1] = from[s][end[s]];
  return end;
}

}  // namespace bmpipe
