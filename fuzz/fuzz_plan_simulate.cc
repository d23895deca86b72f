// Property harness for the planner (solve/planner.h) and the simulator: the input is decoded into
// a small valid Problem (1-4 ranks, 1-2 chunks, 1-8 micro-batches, up to 10 layers, 1-3 options,
// W times under split backwards, bounded costs, every schedule; interleaving without micro-batch
// groups), planned by branch and bound with small limits, and the answer checked: a returned plan
// simulates to the reported iteration time, and fits in memory.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include <fuzzer/FuzzedDataProvider.h>

#include "bmpipe/problem/plan.h"
#include "bmpipe/sim/simulator.h"
#include "bmpipe/solve/planner.h"
#include "fuzz_support.h"

using namespace bmpipe;

namespace {

Problem DecodeProblem(FuzzedDataProvider& in) {
  Problem p;
  switch (in.ConsumeIntegralInRange(0, 7)) {
    case 0:
      p.pipeline = {ScheduleKind::kGPipe, in.ConsumeIntegralInRange(1, 4), 1, in.ConsumeIntegralInRange(1, 8)};
      break;
    case 1:
      p.pipeline = {ScheduleKind::kOneFOneB, in.ConsumeIntegralInRange(1, 4), 1, in.ConsumeIntegralInRange(1, 8)};
      break;
    case 2: {
      const int ranks = in.ConsumeIntegralInRange(1, 4);
      p.pipeline = {ScheduleKind::kInterleavedOneFOneB, ranks, 2, ranks * in.ConsumeIntegralInRange(1, 8 / ranks)};
      break;
    }
    case 3:
      p.pipeline = {ScheduleKind::kZeroBubbleH1, in.ConsumeIntegralInRange(1, 4), 1, in.ConsumeIntegralInRange(1, 8)};
      break;
    case 4:
      p.pipeline = {ScheduleKind::kZeroBubbleH2, in.ConsumeIntegralInRange(1, 4), 1, in.ConsumeIntegralInRange(1, 8)};
      break;
    case 5: {
      const int ranks = in.ConsumeIntegralInRange(1, 4);
      p.pipeline = {ScheduleKind::kInterleavedZeroBubble, ranks, 2, ranks * in.ConsumeIntegralInRange(1, 8 / ranks)};
      break;
    }
    case 6: {
      const int ranks = in.ConsumeIntegralInRange(1, 4);
      p.pipeline = {ScheduleKind::kDualPipeV, ranks, 2, in.ConsumeIntegralInRange(2 * ranks, 12)};
      break;
    }
    default:
      p.pipeline = {ScheduleKind::kZeroBubbleV, in.ConsumeIntegralInRange(1, 4), 2, in.ConsumeIntegralInRange(1, 8)};
  }
  const int n = in.ConsumeIntegralInRange(p.pipeline.stages(), 10);
  for (int l = 0; l < n; ++l) {
    // Runs of identical layers are common in real models and take other paths in the planner.
    if (l > 0 && in.ConsumeBool()) {
      p.layers.push_back(p.layers.back());
      continue;
    }
    Layer layer;
    layer.name = "l" + std::to_string(l);
    layer.static_bytes = in.ConsumeIntegralInRange<Bytes>(0, 1000);
    layer.p2p_ns = in.ConsumeIntegralInRange<TimeNs>(0, 50);
    layer.update_ns = in.ConsumeIntegralInRange<TimeNs>(0, 200);
    const int options = in.ConsumeIntegralInRange(1, 3);
    for (int o = 0; o < options; ++o) {
      LayerOption option;
      option.name = "o" + std::to_string(o);
      option.forward_ns = in.ConsumeIntegralInRange<TimeNs>(0, 1000);
      option.backward_ns = in.ConsumeIntegralInRange<TimeNs>(0, 2000);
      option.recompute_ns = in.ConsumeIntegralInRange<TimeNs>(0, 1000);
      option.saved_bytes = in.ConsumeIntegralInRange<Bytes>(0, 1000);
      option.peak_extra_bytes = in.ConsumeIntegralInRange<Bytes>(0, 500);
      layer.options.push_back(option);
    }
    if (p.pipeline.SplitBackward()) {
      // The weight-gradient part: at most every option's backward, at least 1 ns on the first layer
      // (a split schedule needs some W; ValidateProblem).
      if (l == 0) {
        for (LayerOption& o : layer.options) o.backward_ns = std::max<TimeNs>(o.backward_ns, 1);
      }
      TimeNs least = layer.options[0].backward_ns;
      for (const LayerOption& o : layer.options) least = std::min(least, o.backward_ns);
      layer.weight_grad_ns = in.ConsumeIntegralInRange<TimeNs>(l == 0 ? 1 : 0, least);
      layer.weight_grad_bytes = in.ConsumeIntegralInRange<Bytes>(0, 500);
    }
    p.layers.push_back(layer);
  }
  p.reserved_bytes = in.ConsumeIntegralInRange<Bytes>(0, 300);
  // Capacity around what the even split needs, so that memory binds and some problems have no plan.
  p.memory_bytes = Bytes{1} << 40;
  const SimResult even = SimulatePlan(p, EvenPlan(p)).value();
  Bytes peak = 0;
  for (const RankResult& r : even.ranks) peak = std::max(peak, r.peak_memory_bytes);
  p.memory_bytes = std::max<Bytes>(p.reserved_bytes + 1, peak * in.ConsumeIntegralInRange<Bytes>(40, 130) / 100);
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const Problem problem = DecodeProblem(in);
  if (Status valid = ValidateProblem(problem); !valid.ok()) fuzz::Violation("decoded an invalid problem: " + valid.error().message);

  PlannerOptions options;
  options.kind = PlannerKind::kBranchAndBound;
  options.time_limit_s = 2;
  options.node_limit = 200;
  Result<PlannerResult> result = PlanPipeline(problem, options);
  if (!result.ok()) return 0;
  const PlannerResult& r = result.value();
  if (r.status != ModelStatus::kOptimal && r.status != ModelStatus::kFeasible) return 0;

  Result<SimResult> sim = SimulatePlan(problem, r.plan);
  if (!sim.ok()) fuzz::Violation("the planner's plan does not simulate: " + sim.error().message);
  if (sim.value().iteration_ns != r.iteration_ns) {
    fuzz::Violation("reported iteration " + std::to_string(r.iteration_ns) + " ns, simulated " +
                    std::to_string(sim.value().iteration_ns) + " ns");
  }
  for (std::size_t rank = 0; rank < sim.value().ranks.size(); ++rank) {
    if (sim.value().ranks[rank].peak_memory_bytes > problem.memory_bytes) {
      fuzz::Violation("rank " + std::to_string(rank) + " peaks at " + std::to_string(sim.value().ranks[rank].peak_memory_bytes) +
                      " bytes, over the capacity " + std::to_string(problem.memory_bytes));
    }
  }
  return 0;
}
