// Pieces the baselines share: how a Problem looks to a framework (embedding, decoder layers,
// head), which option plays which role, and judging candidate plans with the simulator.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bmpipe/baselines/baselines.h"
#include "bmpipe/problem/layer_roles.h"
#include "bmpipe/solve/candidates.h"

namespace bmpipe {

// A result that says the planner cannot express the problem, and why.
BaselineResult NotApplicable(std::string why);

// Forward + backward + recomputation time of layers [begin, end) at `option`.
double ComputeNs(const Problem& problem, LayerIdx begin, LayerIdx end, const std::vector<OptionIdx>& option);

// Keeps the best of the plans offered: among those that fit, the fastest; if none fits, the one
// whose worst rank is least over capacity. Ties keep the first offered.
class PlanPicker {
 public:
  explicit PlanPicker(const Problem& problem) : problem_(problem) {}
  void Offer(const Plan& plan, const std::string& config);
  void Fill(BaselineResult& result) const;

 private:
  const Problem& problem_;
  bool has_ = false, fits_ = false;
  TimeNs best_time_ = 0;
  Bytes best_over_ = 0;
  Plan plan_;
  std::string config_;
};

// With one chunk per rank: the peak memory of stage s holding layers [begin, end) with the
// options in `option` (indexed by layer), by the schedule's memory rows (candidates.h).
class StageMemory {
 public:
  explicit StageMemory(const Problem& problem);
  Bytes Peak(StageIdx s, LayerIdx begin, LayerIdx end, const std::vector<OptionIdx>& option) const;
  bool Fits(StageIdx s, LayerIdx begin, LayerIdx end, const std::vector<OptionIdx>& option) const {
    return Peak(s, begin, end, option) <= problem_.memory_bytes;
  }

 private:
  const Problem& problem_;
  std::vector<std::vector<MemoryRow>> rows_;
};

// Merak's stage-aware rule: the fraction of its layers stage i checkpoints, from the first
// stage's ratio r0: 1 - (1 - r0)(S-1)/(S-1-i) for i < S-1 (0 when that is negative), 0 for the last.
std::vector<double> MerakCheckpointRatios(int stages, double r0);

// Stage boundaries minimizing the largest stage cost, cost(s, begin, end) for stage s holding
// layers [begin, end) (infinite = not allowed); ties prefer the earliest boundaries. Empty when
// no partition has a finite cost, or when `deadline` passed first (then *stopped is set).
std::vector<LayerIdx> MinMaxPartition(const Problem& problem, int stages,
                                      const std::function<double(StageIdx, LayerIdx, LayerIdx)>& cost,
                                      const Deadline& deadline = Deadline::Never(), bool* stopped = nullptr);

// What a baseline says when its deadline stopped it.
inline constexpr const char* kStoppedByTimeLimit = "the time limit";

}  // namespace bmpipe
