#include "bmpipe/solve/benchmark_problem.h"

#include <algorithm>

#include "bmpipe/schedule/schedule.h"

namespace bmpipe {

Problem SyntheticPlannerProblem(ScheduleKind schedule, int layers, int ranks, int chunks, int micro_batches) {
  Problem p;
  p.name = "synthetic";
  p.pipeline = {schedule, ranks, chunks, micro_batches};
  p.p2p_ns = 200'000;
  const Bytes activation = 600'000'000;
  const Bytes parameters = 1'500'000'000;
  auto layer = [&](const char* name, Bytes static_bytes, TimeNs f, TimeNs b, Bytes saved, bool recompute) {
    Layer l;
    l.name = name;
    l.static_bytes = static_bytes;
    l.p2p_ns = p.p2p_ns;
    l.weight_grad_ns = b / 2;
    l.weight_grad_bytes = saved / 3;
    l.options.push_back({"none", f, b, 0, saved, 0});
    if (recompute) {
      l.options.push_back({"selective", f, b, f * 15 / 100, saved * 45 / 100, 0});
      l.options.push_back({"full", f, b, f, saved * 8 / 100, saved / 4});
    }
    return l;
  };
  p.layers.push_back(layer("embedding", 3 * parameters, 2'000'000, 4'000'000, activation / 4, false));
  for (int i = 0; i < layers; ++i) p.layers.push_back(layer("decoder", parameters, 10'000'000, 20'000'000, activation, true));
  p.layers.push_back(layer("lm_head", 3 * parameters, 14'000'000, 28'000'000, activation, false));
  // Rank 0 without recomputation: its layers' static memory (its chunks' stages; under DualPipe
  // two full stages) plus all it holds in flight.
  const double stage_layers = static_cast<double>(layers) / p.pipeline.stages();
  // The most (stage, micro-batch) activations rank 0 keeps at once, saved or held for a W, by the
  // schedule's own order (min(p, m) under 1F1B, its warm-up + 1 under interleaved 1F1B).
  int held = 0;
  {
    const Schedule order(p.pipeline);
    int now = 0;
    for (const Op& op : order.ops_of(0)) {
      const MemoryEffect e = order.EffectOf(op.kind);
      now += e.saved + e.held;
      held = std::max(held, now);
    }
  }
  const double need = 3.0 * parameters + stage_layers * chunks * parameters + held * stage_layers * activation;
  p.reserved_bytes = 2'000'000'000;
  p.memory_bytes = p.reserved_bytes + static_cast<Bytes>(need / 1.3);
  return p;
}

}  // namespace bmpipe
