// Simulator throughput: ops simulated per second on large pipelines. The target is
// >= 1M ops/s for p = 64, v = 4, m = 1024 (524,288 ops) on the 2-core CI machine.
#include <benchmark/benchmark.h>

#include "bmpipe/sim/simulator.h"

namespace bmpipe {
namespace {

Problem MakeProblem(ScheduleKind kind, int p, int v, int m) {
  Problem problem;
  problem.pipeline = Pipeline{kind, p, v, m};
  problem.memory_bytes = Bytes{1} << 50;
  problem.p2p_ns = 20'000;
  for (int l = 0; l < p * v; ++l) {
    Layer layer;
    layer.name = "decoder";
    layer.static_bytes = 1'000'000'000;
    layer.p2p_ns = problem.p2p_ns;
    // Slightly unequal stages so the timing is not trivially periodic.
    layer.options.push_back(LayerOption{"none", 1'000'000 + 997 * (l % 7), 2'000'000 + 1009 * (l % 5), 0,
                                        500'000'000, 100'000'000});
    problem.layers.push_back(layer);
  }
  return problem;
}

void BM_Simulate(benchmark::State& state, ScheduleKind kind, bool record_memory) {
  const int p = static_cast<int>(state.range(0));
  const int v = static_cast<int>(state.range(1));
  const int m = static_cast<int>(state.range(2));
  Problem problem = MakeProblem(kind, p, v, m);
  Plan plan = EvenPlan(problem);
  const std::int64_t ops = 2LL * p * v * m;
  for (auto _ : state) {
    Result<SimResult> r = SimulatePlan(problem, plan, SimOptions{record_memory});
    benchmark::DoNotOptimize(r.value().iteration_ns);
  }
  state.SetItemsProcessed(state.iterations() * ops);
  state.counters["ops"] = static_cast<double>(ops);
}

// The parts of BM_Simulate: building the op order and graph, and timing it (what the planner
// repeats for every relaxation it checks).
void BM_BuildSchedule(benchmark::State& state) {
  const Pipeline pipeline{ScheduleKind::kInterleavedOneFOneB, 64, 4, 1024};
  for (auto _ : state) benchmark::DoNotOptimize(Schedule(pipeline).rank_ops().size());
  state.SetItemsProcessed(state.iterations() * pipeline.Ops());
}
BENCHMARK(BM_BuildSchedule)->Unit(benchmark::kMillisecond);

void BM_TimeSchedule(benchmark::State& state) {
  const Problem problem = MakeProblem(ScheduleKind::kInterleavedOneFOneB, 64, 4, 1024);
  const Schedule schedule(problem.pipeline);
  const Plan plan = EvenPlan(problem);
  Durations<TimeNs> d;
  for (const StageCost& c : ComputeStageCosts(problem, plan)) {
    d.forward.push_back(c.forward_ns);
    d.backward.push_back(c.backward_ns);
    d.weight_grad.push_back(c.weight_grad_ns);
    d.p2p_out.push_back(c.p2p_out_ns);
  }
  d.rank_update.assign(problem.pipeline.ranks, 0);
  for (auto _ : state) benchmark::DoNotOptimize(TimeSchedule(schedule, d, /*record_binding=*/false).iteration);
  state.SetItemsProcessed(state.iterations() * problem.pipeline.Ops());
}
BENCHMARK(BM_TimeSchedule)->Unit(benchmark::kMillisecond);

BENCHMARK_CAPTURE(BM_Simulate, interleaved, ScheduleKind::kInterleavedOneFOneB, false)
    ->Args({64, 4, 1024})
    ->Args({16, 2, 256})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Simulate, interleaved_with_memory_trace, ScheduleKind::kInterleavedOneFOneB, true)
    ->Args({64, 4, 1024})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Simulate, one_f_one_b, ScheduleKind::kOneFOneB, false)
    ->Args({64, 1, 1024})
    ->Args({16, 1, 16})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Simulate, gpipe, ScheduleKind::kGPipe, false)->Args({64, 1, 1024})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace bmpipe

BENCHMARK_MAIN();
