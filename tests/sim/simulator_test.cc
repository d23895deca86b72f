#include "bmpipe/sim/simulator.h"

#include <gtest/gtest.h>

#include "bmpipe/io/plan_json.h"
#include "bmpipe/problem/problem_reader.h"
#include "bmpipe/sim/timing.h"
#include "test_support.h"

namespace bmpipe {
namespace {

using testing::OneLayerPerStage;
using testing::UniformProblem;

SimResult SimulateOk(const Problem& problem, const Plan& plan) {
  Result<SimResult> r = SimulatePlan(problem, plan, SimOptions{true});
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.value();
}

TEST(Simulator, Uniform1F1BTakesMPlusPMinus1TimesFPlusB) {
  for (int p : {1, 2, 3, 4, 8}) {
    for (int m : {1, 2, 3, 4, 7, 8, 16}) {
      Problem problem = UniformProblem(ScheduleKind::kOneFOneB, p, 1, m, p, 1000, 2500);
      SimResult sim = SimulateOk(problem, OneLayerPerStage(problem));
      EXPECT_EQ(sim.iteration_ns, TimeNs{m + p - 1} * 3500) << "p=" << p << " m=" << m;
    }
  }
}

TEST(Simulator, UniformGPipeTakesMPlusPMinus1TimesFPlusB) {
  for (int p : {1, 2, 4, 8}) {
    for (int m : {1, 3, 8, 16}) {
      Problem problem = UniformProblem(ScheduleKind::kGPipe, p, 1, m, p, 1000, 2500);
      SimResult sim = SimulateOk(problem, OneLayerPerStage(problem));
      EXPECT_EQ(sim.iteration_ns, TimeNs{m + p - 1} * 3500) << "p=" << p << " m=" << m;
    }
  }
}

TEST(Simulator, UniformInterleavedTakesMTimesFPlusBPlusBubbleOverV) {
  // Every chunk takes F/v and B/v, with F = 1200 and B = 2400 per rank: the iteration is
  // m(F+B) + (p-1)(F+B)/v.
  for (int p : {2, 3, 4}) {
    for (int v : {2, 3, 4}) {
      for (int m : {p, 2 * p, 4 * p}) {
        Problem problem =
            UniformProblem(ScheduleKind::kInterleavedOneFOneB, p, v, m, p * v, 1200 / v, 2400 / v);
        SimResult sim = SimulateOk(problem, OneLayerPerStage(problem));
        EXPECT_EQ(sim.iteration_ns, TimeNs{m} * 3600 + TimeNs{p - 1} * 3600 / v)
            << "p=" << p << " v=" << v << " m=" << m;
        EXPECT_NEAR(sim.bubble.real, static_cast<double>(p - 1) / (v * m), 1e-12);
        EXPECT_NEAR(sim.bubble.imbalance, 0.0, 1e-12);
      }
    }
  }
}

TEST(Simulator, OneFOneBHoldsMinPMinusRAndMMicroBatches) {
  for (int p : {1, 2, 4, 8}) {
    for (int m : {1, 2, 5, 8, 12}) {
      Problem problem = UniformProblem(ScheduleKind::kOneFOneB, p, 1, m, p, 10, 20, 3, /*saved_bytes=*/1);
      SimResult sim = SimulateOk(problem, OneLayerPerStage(problem));
      for (int r = 0; r < p; ++r) {
        EXPECT_EQ(sim.ranks[r].peak_memory_bytes, std::min(p - r, m)) << "p=" << p << " m=" << m << " r=" << r;
        EXPECT_EQ(sim.ranks[r].max_in_flight, std::min(p - r, m));
      }
    }
  }
}

TEST(Simulator, GPipeHoldsAllMicroBatches) {
  for (int p : {1, 3, 4}) {
    for (int m : {1, 4, 9}) {
      Problem problem = UniformProblem(ScheduleKind::kGPipe, p, 1, m, p, 10, 20, 0, /*saved_bytes=*/1);
      SimResult sim = SimulateOk(problem, OneLayerPerStage(problem));
      for (int r = 0; r < p; ++r) EXPECT_EQ(sim.ranks[r].peak_memory_bytes, m);
    }
  }
}

TEST(Simulator, InterleavedHoldsWarmupPlusOneChunkMicroBatches) {
  for (int p : {2, 4}) {
    for (int v : {2, 3}) {
      for (int m : {p, 2 * p, 4 * p}) {
        Problem problem =
            UniformProblem(ScheduleKind::kInterleavedOneFOneB, p, v, m, p * v, 10, 20, 0, /*saved_bytes=*/1);
        SimResult sim = SimulateOk(problem, OneLayerPerStage(problem));
        for (int r = 0; r < p; ++r) {
          const int warmup = 2 * (p - r - 1) + (v - 1) * p;
          EXPECT_EQ(sim.ranks[r].peak_memory_bytes, std::min(warmup + 1, m * v)) << p << " " << v << " " << m << " " << r;
        }
      }
    }
  }
}

// The zero-bubble paper's bubble rates from its measured stage times (arXiv 2401.10241, Tables 5
// and 6): the 1.5B model on 8 ranks, 24 micro-batches, T_F 18.52, T_B 18.09, T_W 9.34 and T_comm
// 0.60 ms per stage. The paper computes 0.2431 for 1F1B, 0.1585 for ZB-H1 and 0.1083 for ZB-H2
// from them; its bubble rate is (iteration - m(T_F+T_B+T_W)) / iteration, the report's bubble
// ratio with equal stages.
TEST(Simulator, ZeroBubblePapersBubbleRates) {
  for (const auto& [kind, rate] : {std::pair{ScheduleKind::kOneFOneB, 0.2431}, std::pair{ScheduleKind::kZeroBubbleH1, 0.1585},
                                   std::pair{ScheduleKind::kZeroBubbleH2, 0.1083}}) {
    Problem problem = UniformProblem(kind, 8, 1, 24, 8, 18'520'000, 18'090'000 + 9'340'000, 600'000);
    for (Layer& layer : problem.layers) layer.weight_grad_ns = 9'340'000;
    const SimResult sim = SimulateOk(problem, OneLayerPerStage(problem));
    EXPECT_NEAR(sim.bubble.ratio, rate, 2e-4) << ScheduleName(kind);
    EXPECT_NEAR(1.0 - 24 * 45.95e-3 / ToSeconds(sim.iteration_ns), sim.bubble.ratio, 1e-12);
  }
}

// The MindFormers pipeline-balance tool's demo and its own plan: the tool's simulator reports a
// makespan of 56366 ms (56.367 s here, exact) and real bubble 1.1088 = 0.9375 + 0.1231 + 0.0481, peak 55097 MB.
TEST(Simulator, MindFormersDemoToolPlan) {
  Result<Problem> problem = LoadProblem(testing::SourcePath("examples/mindformers-demo/problem.yaml"));
  ASSERT_TRUE(problem.ok()) << problem.error().message;
  Result<PlanDocument> plan = LoadPlan(testing::SourcePath("examples/mindformers-demo/tool-plan.json"), problem.value());
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  SimResult sim = SimulateOk(problem.value(), plan.value().plan);
  EXPECT_EQ(sim.iteration_ns, 56'367'000'000);
  EXPECT_NEAR(sim.bubble.real, 1.1088, 5e-5);
  EXPECT_NEAR(sim.bubble.ideal, 0.9375, 1e-12);
  EXPECT_NEAR(sim.bubble.imbalance, 0.1231, 5e-5);
  EXPECT_NEAR(sim.bubble.recompute, 0.0481, 5e-5);
  Bytes peak = 0;
  for (const RankResult& r : sim.ranks) peak = std::max(peak, r.peak_memory_bytes);
  EXPECT_EQ(peak, Bytes{55'097'000'000});
  EXPECT_TRUE(sim.fits);
}

TEST(Simulator, P2PDelaysOnlyCrossRankDependencies) {
  // Two ranks, one micro-batch: F0, (p2p), F1, B1, (p2p), B0.
  Problem problem = UniformProblem(ScheduleKind::kOneFOneB, 2, 1, 1, 2, 100, 200, 7);
  SimResult sim = SimulateOk(problem, OneLayerPerStage(problem));
  EXPECT_EQ(sim.iteration_ns, 100 + 7 + 100 + 200 + 7 + 200);
  // With one rank the same layers run back to back.
  Problem one = UniformProblem(ScheduleKind::kOneFOneB, 1, 1, 1, 2, 100, 200, 7);
  Plan plan;
  plan.stage_begin = {0, 2};
  plan.option = {0, 0};
  EXPECT_EQ(SimulateOk(one, plan).iteration_ns, 600);
}

TEST(Simulator, P2PTimeIsThatOfTheStagesLastLayer) {
  Problem problem = UniformProblem(ScheduleKind::kOneFOneB, 2, 1, 1, 3, 100, 200, 7);
  problem.layers[0].p2p_ns = 1000;  // inside stage 0: not on a boundary
  problem.layers[1].p2p_ns = 50;    // last layer of stage 0
  Plan plan;
  plan.stage_begin = {0, 2, 3};
  plan.option = {0, 0, 0};
  EXPECT_EQ(SimulateOk(problem, plan).iteration_ns, 200 + 50 + 100 + 200 + 50 + 400);
}

TEST(Simulator, UpdateTimeIsAddedPerRankAfterItsLastBackward) {
  Problem problem = UniformProblem(ScheduleKind::kOneFOneB, 2, 1, 2, 2, 100, 200);
  // Rank 1 finishes its compute 200 ns before rank 0 (its last backward ends at 700, rank 0's
  // at 900): an update shorter than that does not lengthen the iteration; rank 0's update does.
  problem.layers[1].update_ns = 150;
  SimResult sim = SimulateOk(problem, OneLayerPerStage(problem));
  EXPECT_EQ(sim.iteration_ns, 3 * 300);
  EXPECT_EQ(sim.ranks[1].finish_ns, sim.ranks[1].compute_end_ns + 150);
  problem.layers[0].update_ns = 40;
  EXPECT_EQ(SimulateOk(problem, OneLayerPerStage(problem)).iteration_ns, 3 * 300 + 40);
}

TEST(Simulator, MemoryCountsStaticReservedSavedAndRunningTransient) {
  Problem problem = UniformProblem(ScheduleKind::kOneFOneB, 2, 1, 4, 2, 100, 200);
  problem.reserved_bytes = 1000;
  problem.layers[0].static_bytes = 50;
  problem.layers[0].options[0].saved_bytes = 10;
  problem.layers[0].options[0].peak_extra_bytes = 7;
  problem.layers[1].static_bytes = 60;
  problem.layers[1].options[0].saved_bytes = 20;
  problem.layers[1].options[0].peak_extra_bytes = 3;
  SimResult sim = SimulateOk(problem, OneLayerPerStage(problem));
  // Rank 0 holds 2 micro-batches; its peak is during the backward of the first, both saved.
  EXPECT_EQ(sim.ranks[0].peak_memory_bytes, 1000 + 50 + 2 * 10 + 7);
  EXPECT_EQ(sim.ranks[1].peak_memory_bytes, 1000 + 60 + 20 + 3);
  EXPECT_EQ(sim.ranks[0].static_bytes, 1050);
}

TEST(Simulator, ExceedingCapacityIsReportedNotAnError) {
  Problem problem = UniformProblem(ScheduleKind::kOneFOneB, 2, 1, 4, 2, 100, 200, 0, 100);
  problem.memory_bytes = 150;
  SimResult sim = SimulateOk(problem, OneLayerPerStage(problem));
  EXPECT_FALSE(sim.fits);
  EXPECT_EQ(sim.ranks[0].peak_memory_bytes, 200);
}

TEST(Simulator, RecomputeShareOfBreakdown) {
  Problem problem = UniformProblem(ScheduleKind::kOneFOneB, 2, 1, 2, 2, 100, 200);
  problem.layers[0].options[0].recompute_ns = 100;  // stage 0: backward 300, 100 of it recompute
  SimResult sim = SimulateOk(problem, OneLayerPerStage(problem));
  // useful = 2 micro-batches x (300 + 300); recompute = 2 x 100.
  EXPECT_NEAR(sim.bubble.recompute, 200.0 / 1200.0, 1e-12);
  EXPECT_NEAR(sim.bubble.real, (2.0 * static_cast<double>(sim.iteration_ns) - 1200.0) / 1200.0, 1e-12);
  EXPECT_NEAR(sim.bubble.ideal + sim.bubble.imbalance + sim.bubble.recompute, sim.bubble.real, 1e-12);
}

TEST(Simulator, DeadlockingOrderIsAnInternalError) {
  Pipeline pipeline{ScheduleKind::kOneFOneB, 2, 1, 1};
  // Rank 0 runs its backward before its forward: the backward waits for rank 1, which waits
  // for rank 0's forward.
  Result<Schedule> schedule = Schedule::FromOrders(pipeline, {{{0, 0, OpKind::kBackward}, {0, 0, OpKind::kForward}},
                                                              {{1, 0, OpKind::kForward}, {1, 0, OpKind::kBackward}}});
  ASSERT_TRUE(schedule.ok());
  Result<SimResult> r = Simulate(schedule.value(), std::vector<StageCost>(2), std::vector<RankCost>(2), 100);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::kInternal);
  EXPECT_NE(r.error().message.find("deadlock"), std::string::npos);
}

TEST(Simulator, InvalidPlanIsRejected) {
  Problem problem = UniformProblem(ScheduleKind::kOneFOneB, 2, 1, 2, 4, 1, 1);
  Plan plan;
  plan.stage_begin = {0, 4, 4};
  plan.option = {0, 0, 0, 0};
  Result<SimResult> r = SimulatePlan(problem, plan);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "stage 1 is empty; every stage needs at least one layer");
}

}  // namespace
}  // namespace bmpipe

namespace bmpipe {
namespace {

// Equal stages, no p2p: each rank's idle time against the closed forms of the schedules' papers,
// with T_F = T_B = T_W = 1 (split) or T_F = 1, T_B = 2 per stage: 1F1B and GPipe idle (p-1)(F+B),
// interleaved 1F1B the same in chunk-stage times, which is (p-1)(F+B)/v of a rank's whole model,
// ZB-H1 (p-1)(F+B-W) (Qi et al., "Zero Bubble Pipeline Parallelism", §2.1), ZB-V (p-1)F in
// chunk-stage times: half ZB-H1's bubble ratio at the same activation memory. (The paper's "zero"
// for ZB-V leaves out this ramp, which its optimizer post-validation overlaps with the next
// iteration; bmpipe's iteration starts and ends together on every rank, docs/semantics.md.) ZB-H2
// and interleaved ZB also idle (p-1)F: below, with B and W apart.
TEST(Simulator, BubblesOfEqualStagesMatchTheClosedForms) {
  struct Case {
    ScheduleKind kind;
    int p, v, m, group;
    double idle_units;  // on the busiest rank, in units of F
  };
  for (const Case& c : {Case{ScheduleKind::kGPipe, 4, 1, 8, 0, 3 * 3.0}, Case{ScheduleKind::kOneFOneB, 4, 1, 8, 0, 3 * 3.0},
                        Case{ScheduleKind::kInterleavedOneFOneB, 4, 2, 8, 0, 3 * 3.0},
                        Case{ScheduleKind::kInterleavedOneFOneB, 4, 2, 10, 5, 3 * 3.0},
                        Case{ScheduleKind::kZeroBubbleH1, 4, 1, 8, 0, 3 * 1.0},
                        Case{ScheduleKind::kZeroBubbleH1, 8, 1, 24, 0, 7 * 1.0},
                        Case{ScheduleKind::kZeroBubbleV, 4, 2, 8, 0, 3 * 1.0},
                        Case{ScheduleKind::kZeroBubbleV, 4, 2, 7, 0, 3 * 1.0},
                        Case{ScheduleKind::kZeroBubbleV, 8, 2, 24, 0, 7 * 1.0},
                        Case{ScheduleKind::kZeroBubbleV, 8, 2, 15, 0, 7 * 1.0},
                        Case{ScheduleKind::kZeroBubbleH2, 4, 1, 8, 0, 3 * 1.0},
                        Case{ScheduleKind::kZeroBubbleH2, 8, 1, 24, 0, 7 * 1.0},
                        Case{ScheduleKind::kInterleavedZeroBubble, 4, 2, 8, 0, 3 * 1.0},
                        Case{ScheduleKind::kInterleavedZeroBubble, 4, 3, 8, 0, 3 * 1.0},
                        Case{ScheduleKind::kInterleavedZeroBubble, 8, 2, 16, 0, 7 * 1.0},
                        Case{ScheduleKind::kInterleavedZeroBubble, 4, 2, 10, 5, 3 * 1.0}}) {
    Problem problem = UniformProblem(c.kind, c.p, c.v, c.m, c.p * c.v, 1000, 2000);
    for (Layer& layer : problem.layers) layer.weight_grad_ns = 1000;  // W = F (split backwards only)
    problem.pipeline.micro_batch_group = c.group;
    const SimResult sim = SimulateOk(problem, OneLayerPerStage(problem));
    const double busy = static_cast<double>(sim.ranks[0].busy_ns);
    EXPECT_EQ(busy, 3000.0 * c.v * c.m) << ScheduleName(c.kind);
    EXPECT_DOUBLE_EQ(static_cast<double>(sim.iteration_ns) - busy, 1000 * c.idle_units) << ScheduleName(c.kind);
    // The report's ideal bubble is that idle time over the rank's work.
    EXPECT_DOUBLE_EQ(sim.bubble.ideal, c.idle_units / (3.0 * c.v * c.m)) << ScheduleName(c.kind);
    EXPECT_NEAR(sim.bubble.imbalance, 0, 1e-12) << ScheduleName(c.kind);
  }
}

// Equal stages, no p2p, T_F, T_B (input gradient) and T_W apart: the zero-bubble paper's closed
// forms (Qi et al., Table 1 and §3). ZB-H1 idles (p-1)(F+B-W), and interleaved ZB the same in
// chunk-stage times. ZB-H2 idles (p-1)(F+B-2W) inside its parallelogram, which the paper's
// optimizer post-validation lets the next iteration overlap with its ramp. In bmpipe's iteration,
// which starts and ends together on every rank, the last rank waits (p-1)F for its first forward
// whatever the schedule, so each idles (p-1) max(F, closed form): for ZB-H1 that is the closed
// form while B >= W, for ZB-H2 while B >= 2W.
TEST(Simulator, ZeroBubbleClosedFormsWithBAndWApart) {
  struct Times {
    double f, b, w;
  };
  for (const Times& t : {Times{1, 1, 1}, Times{1, 1, 0.5}, Times{1, 1.5, 0.5}, Times{2, 1, 1}, Times{1, 2, 1},
                         Times{1, 1, 2}, Times{1.5, 2.5, 0.75}}) {
    for (const ScheduleKind kind :
         {ScheduleKind::kZeroBubbleH1, ScheduleKind::kZeroBubbleH2, ScheduleKind::kInterleavedZeroBubble}) {
      const int p = 4, v = kind == ScheduleKind::kInterleavedZeroBubble ? 2 : 1, m = 12;
      Problem problem = UniformProblem(kind, p, v, m, p * v, static_cast<std::int64_t>(1000 * t.f),
                                       static_cast<std::int64_t>(1000 * (t.b + t.w)));
      for (Layer& layer : problem.layers) layer.weight_grad_ns = static_cast<std::int64_t>(1000 * t.w);
      const SimResult sim = SimulateOk(problem, OneLayerPerStage(problem));
      const double idle = static_cast<double>(sim.iteration_ns - sim.ranks[0].busy_ns) / 1000;
      const double closed_form = kind == ScheduleKind::kZeroBubbleH2 ? t.f + t.b - 2 * t.w : t.f + t.b - t.w;
      const double want = (p - 1) * std::max(t.f, closed_form);
      EXPECT_NEAR(idle, want, 1e-9) << ScheduleName(kind) << " F " << t.f << " B " << t.b << " W " << t.w;
    }
  }
}

// DualPipeV as torch's runtime runs it: an overlapped pair's forward and backward one after the
// other in one action, whose outputs are sent when it ends. With equal stages and F = B = W each
// rank idles 2(p-1)F in chunk-stage times, twice ZB-V's: the overlap DualPipe gains from (one
// micro-batch's all-to-all under the other's compute) needs a custom overlap function and is not
// modelled (docs/semantics.md, "Actions").
TEST(Simulator, DualPipeVRunsOverlappedPairsInTurn) {
  for (const auto& [p, m] : {std::pair{4, 8}, std::pair{4, 16}, std::pair{8, 32}}) {
    Problem problem = UniformProblem(ScheduleKind::kDualPipeV, p, 2, m, 2 * p, 1000, 2000);
    for (Layer& layer : problem.layers) layer.weight_grad_ns = 1000;
    const SimResult sim = SimulateOk(problem, OneLayerPerStage(problem));
    for (const RankResult& r : sim.ranks) {
      EXPECT_EQ(sim.iteration_ns - r.busy_ns, 2 * (p - 1) * 1000) << "p " << p << " m " << m;
    }
    EXPECT_DOUBLE_EQ(sim.bubble.ideal, 2.0 * (p - 1) / (6.0 * m));
  }
}

// An overlapped pair (pipeline.overlap): the forward's compute beside the backward's
// communication, then the backward's compute and its W beside the forward's communication. With
// F = 1000 (400 of it communication), B = 2000 (W 1000, communication 400): the forward runs
// max(600, 400) = 600, the backward max(600 + 1000, 400) - 1000 = 600, the W 1000: 2200 for the
// pair against 3000 in turn, 800 hidden per pair. With the forward mostly communication (900 of
// 1000), the first phase is the backward's communication (400 against 100 of compute).
TEST(Simulator, OverlappedPairsRunTheLongerOfTwoStreamsPerPhase) {
  for (const auto& [mf, mb, first, second] : {std::tuple{400, 400, 600, 600}, std::tuple{900, 400, 400, 600}}) {
    Problem problem = UniformProblem(ScheduleKind::kDualPipeV, 2, 2, 8, 4, 1000, 2000);
    problem.pipeline.overlap = true;
    for (Layer& layer : problem.layers) {
      layer.weight_grad_ns = 1000;
      layer.options[0].forward_comm_ns = mf;
      layer.options[0].backward_comm_ns = mb;
    }
    // A forward of 1000 with mf of it communication: first phase max(1000 - mf, mb).
    const TimeNs phase1 = std::max<TimeNs>(1000 - mf, mb), phase2 = std::max<TimeNs>(2000 - mb, mf);
    ASSERT_EQ(phase1, first);
    ASSERT_EQ(phase2 - 1000, second);
    const SimResult sim = SimulateOk(problem, OneLayerPerStage(problem));
    const Schedule schedule(problem.pipeline);
    int pairs = 0;
    for (RankIdx r = 0; r < 2; ++r) {
      const std::vector<Op>& ops = schedule.ops_of(r);
      int rank_pairs = 0;
      for (std::size_t i = 0; i + 2 < ops.size(); ++i) {
        if (ops[i].kind != OpKind::kForward || !ops[i + 1].joined || ops[i + 1].kind != OpKind::kBackward) continue;
        ++rank_pairs;
        EXPECT_EQ(sim.op_timing[r][i].end_ns - sim.op_timing[r][i].start_ns, phase1);
        EXPECT_EQ(sim.op_timing[r][i + 1].end_ns - sim.op_timing[r][i + 1].start_ns, phase2 - 1000);
        EXPECT_EQ(sim.op_timing[r][i + 2].end_ns - sim.op_timing[r][i + 2].start_ns, 1000);
      }
      EXPECT_EQ(sim.ranks[r].hidden_comm_ns, rank_pairs * (3000 - phase1 - phase2));
      // The timeline's spans: the backward's communication from the pair's start, the forward's
      // from its second phase, each hiding what the other op's compute covers.
      const std::vector<CommSpan>& spans = sim.ranks[r].pair_comm;
      ASSERT_EQ(spans.size(), static_cast<std::size_t>(2 * rank_pairs));
      TimeNs hidden = 0;
      for (std::size_t k = 0; k < spans.size(); k += 2) {
        EXPECT_EQ(spans[k].op.kind, OpKind::kBackward);
        EXPECT_EQ(spans[k].end_ns - spans[k].start_ns, mb);
        EXPECT_EQ(spans[k].hidden_ns, std::min(1000 - mf, mb));
        EXPECT_EQ(spans[k + 1].op.kind, OpKind::kForward);
        EXPECT_EQ(spans[k + 1].start_ns, spans[k].start_ns + phase1);
        EXPECT_EQ(spans[k + 1].end_ns - spans[k + 1].start_ns, mf);
        EXPECT_EQ(spans[k + 1].hidden_ns, std::min(2000 - mb, mf));
        hidden += spans[k].hidden_ns + spans[k + 1].hidden_ns;
      }
      EXPECT_EQ(hidden, sim.ranks[r].hidden_comm_ns);
      pairs += rank_pairs;
    }
    EXPECT_GT(pairs, 0);
    // The same plan with the pairs in turn is slower by at most what they hide.
    Problem serial = problem;
    serial.pipeline.overlap = false;
    const SimResult in_turn = SimulateOk(serial, OneLayerPerStage(serial));
    EXPECT_GT(in_turn.iteration_ns, sim.iteration_ns);
    EXPECT_LE(in_turn.iteration_ns - sim.iteration_ns, pairs * (3000 - phase1 - phase2));
  }
}

// DualPipe: half the micro-batches enter at each end, so each half fills the pipeline through
// half the ranks. With equal stages and B <= W every rank idles (p-2)F in stage times, 2(p/2-1)F:
// the paper's (p/2-1)(F&B+B-3W) with the pair run in turn (F&B = F+B+W) is (p/2-1)(F+2B-2W), and
// bmpipe's synchronous iteration adds the (p/2-1)F ramp, as for the ZB schedules above. A B longer
// than its W idles more (the middle ranks' steps 4 and 6 wait for it). Stage times are 1/p of
// the model here, not DualPipeV's 1/(2p), so at F = B = W DualPipe idles (p-2)/p of one model
// forward to DualPipeV's (p-1)/p on the same ranks.
TEST(Simulator, DualPipeFillsFromBothEnds) {
  for (const auto& [f, b, w] : {std::tuple{1, 1, 1}, std::tuple{2, 1, 1}, std::tuple{3, 1, 2}, std::tuple{1, 1, 3}}) {
    for (const auto& [p, m] : {std::pair{4, 8}, std::pair{4, 16}, std::pair{6, 24}, std::pair{8, 16}, std::pair{8, 32}}) {
      Problem problem = UniformProblem(ScheduleKind::kDualPipe, p, 2, m, p, 1000 * f, 1000 * (b + w));
      for (Layer& layer : problem.layers) layer.weight_grad_ns = 1000 * w;
      const SimResult sim = SimulateOk(problem, OneLayerPerStage(problem));
      for (const RankResult& r : sim.ranks) {
        EXPECT_EQ(sim.iteration_ns - r.busy_ns, (p - 2) * 1000 * f) << "F " << f << " B " << b << " W " << w << " p "
                                                                    << p << " m " << m;
      }
      if (f == 1 && b == 1 && w == 1) {
        EXPECT_DOUBLE_EQ(sim.bubble.ideal, (p - 2) / (3.0 * m));
      }
    }
  }
  // B longer than W: more than the ramp.
  Problem problem = UniformProblem(ScheduleKind::kDualPipe, 8, 2, 16, 8, 1000, 3000);
  for (Layer& layer : problem.layers) layer.weight_grad_ns = 1000;
  const SimResult sim = SimulateOk(problem, OneLayerPerStage(problem));
  EXPECT_EQ(sim.iteration_ns - sim.ranks[0].busy_ns, 11'000);
}

// An action's ops run back to back and what waits for any of them waits for its end: rank 0
// runs F(0, 1) and then B(0, 0), apart or joined into one action. Joined, F(1, 1) on rank 1
// waits for B(0, 0) to end, as torch sends an overlapped action's outputs when it ends.
TEST(Simulator, WhatWaitsForAnActionsOpWaitsForTheAction) {
  const Pipeline p{ScheduleKind::kOneFOneB, 2, 1, 2};
  Durations<std::int64_t> d;
  d.forward = {1000, 1000};
  d.backward = {2000, 2000};
  d.weight_grad = {0, 0};
  d.p2p_out = {10, 10};
  d.rank_update = {0, 0};
  auto timed = [&](bool joined) {
    const Result<Schedule> s = Schedule::FromOrders(
        p, {{{0, 0, OpKind::kForward}, {0, 1, OpKind::kForward}, {0, 0, OpKind::kBackward, joined},
             {0, 1, OpKind::kBackward}},
            {{1, 0, OpKind::kForward}, {1, 0, OpKind::kBackward}, {1, 1, OpKind::kForward}, {1, 1, OpKind::kBackward}}});
    EXPECT_TRUE(s.ok());
    return TimeSchedule(s.value(), d, false);
  };
  // Apart: F(0,1) 1000-2000; rank 1 runs F(1,0) 1010-2010 and B(1,0) 2010-4010, then F(1,1).
  const Timing<std::int64_t> apart = timed(false);
  EXPECT_EQ(apart.span[1][2].start_ns, 4010);
  // Joined: the action waits for B(1,0) + p2p = 4020; F(0,1) 4020-5020, B(0,0) 5020-7020; F(1,1)
  // waits for the action: 7030.
  const Timing<std::int64_t> joined = timed(true);
  EXPECT_EQ(joined.span[0][1].start_ns, 4020);
  EXPECT_EQ(joined.span[0][2].end_ns, 7020);
  EXPECT_EQ(joined.span[1][2].start_ns, 7030);
}

}  // namespace
}  // namespace bmpipe
