#include "bmpipe/solve/diagnose.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "bmpipe/core/text.h"
#include "bmpipe/schedule/schedule.h"
#include "bmpipe/sim/simulator.h"
#include "bmpipe/solve/candidates.h"

namespace bmpipe {

std::vector<OptionIdx> MostMemorySavingOptions(const Problem& problem) {
  std::vector<OptionIdx> chosen(problem.num_layers(), 0);
  for (LayerIdx l = 0; l < problem.num_layers(); ++l) {
    const auto& options = problem.layers[l].options;
    for (OptionIdx o = 1; o < static_cast<OptionIdx>(options.size()); ++o) {
      const LayerOption& a = options[o];
      const LayerOption& b = options[chosen[l]];
      if (a.saved_bytes < b.saved_bytes || (a.saved_bytes == b.saved_bytes && a.peak_extra_bytes < b.peak_extra_bytes)) {
        chosen[l] = o;
      }
    }
  }
  return chosen;
}

std::vector<int> MemoryBalancedBoundaries(const Problem& problem, const std::vector<std::vector<MemoryRow>>& rows) {
  const Pipeline& p = problem.pipeline;
  const int n = problem.num_layers();
  const int stages = p.stages();
  if (static_cast<double>(n) * n * stages > 5e7) return StageEnds(EvenPlan(problem));
  std::vector<int> end(stages);
  const std::vector<OptionIdx> option = MostMemorySavingOptions(problem);
  auto stage_memory = [&](StageIdx s, LayerIdx begin, LayerIdx stop) {
    Bytes static_bytes = problem.reserved_bytes, saved = 0, weight_grad = 0, transient = 0;
    for (LayerIdx l = begin; l < stop; ++l) {
      const LayerOption& o = problem.layers[l].options[option[l]];
      static_bytes += problem.layers[l].static_bytes;
      saved += o.saved_bytes;
      weight_grad += problem.layers[l].weight_grad_bytes;
      transient = std::max(transient, o.peak_extra_bytes);
    }
    Bytes worst = 0;
    const int c = p.ChunkOf(s);
    for (int copy = 0; copy < p.Copies(); ++copy) {
      for (const MemoryRow& row : rows[p.RankOf(s, copy)]) {
        worst = std::max(worst, static_bytes + row.ChunkBytes(c, saved, weight_grad, transient));
      }
    }
    return worst;
  };
  // best[s][e]: least possible largest stage memory of stages 0..s covering [0, e).
  const Bytes kNone = std::numeric_limits<Bytes>::max();
  std::vector<std::vector<Bytes>> best(stages, std::vector<Bytes>(n + 1, kNone));
  std::vector<std::vector<LayerIdx>> from(stages, std::vector<LayerIdx>(n + 1, 0));
  for (LayerIdx e = 1; e <= n; ++e) best[0][e] = stage_memory(0, 0, e);
  for (StageIdx s = 1; s < stages; ++s) {
    for (LayerIdx e = s + 1; e <= n; ++e) {
      for (LayerIdx b = s; b < e; ++b) {
        if (best[s - 1][b] == kNone) continue;
        const Bytes v = std::max(best[s - 1][b], stage_memory(s, b, e));
        if (v < best[s][e]) {
          best[s][e] = v;
          from[s][e] = b;
        }
      }
    }
  }
  end[stages - 1] = n;
  for (StageIdx s = stages - 1; s > 0; --s) end[s - 1] = from[s][end[s]];
  return end;
}

MemoryShortfall DiagnoseMemory(const Problem& problem) {
  MemoryShortfall out;
  out.capacity_bytes = problem.memory_bytes;
  out.plan.option = MostMemorySavingOptions(problem);
  out.plan.stage_begin = {0};
  for (int e : MemoryBalancedBoundaries(problem, PeakMemoryRows(Schedule(problem.pipeline)))) {
    out.plan.stage_begin.push_back(e);
  }
  const SimResult sim = SimulatePlan(problem, out.plan).value();
  for (RankIdx r = 0; r < problem.pipeline.ranks; ++r) {
    if (sim.ranks[r].peak_memory_bytes > sim.ranks[out.rank].peak_memory_bytes) out.rank = r;
  }
  out.peak_bytes = sim.ranks[out.rank].peak_memory_bytes;
  return out;
}

std::string DescribeShortfall(const Problem& problem, const MemoryShortfall& s) {
  const Pipeline& p = problem.pipeline;
  std::string text = fmt::format(
      "no plan fits in {} per device. With the most memory-saving option on every layer and the layers split to "
      "balance memory, rank {} still peaks at {}, {} over capacity.",
      FormatBytes(problem.memory_bytes), s.rank, FormatBytes(s.peak_bytes), FormatBytes(s.peak_bytes - s.capacity_bytes));
  text += " What would help: more pipeline ranks (pipeline.ranks) to spread the layers";
  if (p.schedule == ScheduleKind::kGPipe) {
    text += "; 1F1B instead of GPipe (GPipe holds all micro-batches at once)";
  } else if (p.Copies() > 1) {
    text += "; DualPipeV or ZB-V instead of DualPipe (DualPipe keeps two copies of every stage's parameters)";
  } else if (p.schedule == ScheduleKind::kZeroBubbleH2) {
    text += "; ZB-H1 instead of ZB-H2 (ZB-H2 holds up to 2p-1 micro-batches, ZB-H1 p)";
  } else if (p.chunks > 1) {
    text += "; fewer virtual stages (interleaving holds more micro-batches in flight on early ranks)";
  }
  text += "; a layer option that saves fewer activations (more recomputation); a smaller micro-batch; more tensor "
          "parallelism; or devices with more memory.";
  return text;
}

}  // namespace bmpipe
