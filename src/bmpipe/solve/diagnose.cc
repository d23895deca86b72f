#include "bmpipe/solve/diagnose.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "bmpipe/core/text.h"
#include "bmpipe/schedule/schedule.h"
#include "bmpipe/sim/simulator.h"
#include "bmpipe/solve/candidates.h"

namespace bmpipe {

MemoryShortfall DiagnoseMemory(const Problem& problem) {
  const Pipeline& p = problem.pipeline;
  const int n = problem.num_layers();
  const int stages = p.stages();
  MemoryShortfall out;
  out.capacity_bytes = problem.memory_bytes;
  Plan& plan = out.plan;
  plan.option.assign(n, 0);
  for (LayerIdx l = 0; l < n; ++l) {
    const auto& options = problem.layers[l].options;
    for (OptionIdx o = 1; o < static_cast<OptionIdx>(options.size()); ++o) {
      const LayerOption& a = options[o];
      const LayerOption& b = options[plan.option[l]];
      if (a.saved_bytes < b.saved_bytes || (a.saved_bytes == b.saved_bytes && a.peak_extra_bytes < b.peak_extra_bytes)) {
        plan.option[l] = o;
      }
    }
  }
  // Per stage, the most micro-batches its chunk holds at once on its rank.
  const std::vector<std::vector<MemoryRow>> rows = PeakMemoryRows(BuildSchedule(p));
  auto stage_memory = [&](StageIdx s, LayerIdx begin, LayerIdx end) {
    Bytes static_bytes = problem.reserved_bytes, saved = 0, transient = 0;
    for (LayerIdx l = begin; l < end; ++l) {
      const LayerOption& o = problem.layers[l].options[plan.option[l]];
      static_bytes += problem.layers[l].static_bytes;
      saved += o.saved_bytes;
      transient = std::max(transient, o.peak_extra_bytes);
    }
    Bytes worst = 0;
    for (const MemoryRow& row : rows[p.RankOf(s)]) {
      const int c = p.ChunkOf(s);
      worst = std::max(worst, static_bytes + row.in_flight[c] * saved + (row.transient_chunk == c ? transient : 0));
    }
    return worst;
  };
  // Bottleneck split: best[s][e] = least possible max stage memory of stages 0..s covering [0, e).
  if (static_cast<double>(n) * n * stages <= 5e7) {
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
    plan.stage_begin.assign(stages + 1, 0);
    plan.stage_begin[stages] = n;
    for (StageIdx s = stages - 1; s > 0; --s) plan.stage_begin[s] = from[s][plan.stage_begin[s + 1]];
  } else {
    plan.stage_begin = EvenPlan(problem).stage_begin;
  }
  const SimResult sim = SimulatePlan(problem, plan).value();
  for (RankIdx r = 0; r < p.ranks; ++r) {
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
  text += " What would help: more pipeline stages (pipeline.stages) to spread the layers";
  if (p.schedule == ScheduleKind::kGPipe) {
    text += "; 1F1B instead of GPipe (GPipe holds all micro-batches at once)";
  } else if (p.schedule == ScheduleKind::kInterleavedOneFOneB) {
    text += "; fewer virtual stages (interleaving holds more micro-batches in flight on early ranks)";
  }
  text += "; a layer option that saves fewer activations (more recomputation); a smaller micro-batch; more tensor "
          "parallelism; or devices with more memory.";
  return text;
}

}  // namespace bmpipe
