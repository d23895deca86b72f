#include "bmpipe/schedule/schedule.h"

#include <algorithm>
#include <string>

#include <gtest/gtest.h>

namespace bmpipe {
namespace {

// "F0.1" = forward of stage 0, micro-batch 1; ops joined into one action (Op::joined) are
// written with '+' between them: "F0.3+B3.1+W3.1".
std::string Describe(const std::vector<Op>& ops) {
  std::string out;
  for (const Op& op : ops) {
    if (!out.empty()) out += op.joined ? '+' : ' ';
    out += "FBW"[static_cast<int>(op.kind)] + std::to_string(op.stage) + "." + std::to_string(op.micro_batch);
  }
  return out;
}

TEST(Schedule, GPipeRunsAllForwardsThenAllBackwards) {
  Schedule s = Schedule(Pipeline{ScheduleKind::kGPipe, 2, 1, 3});
  EXPECT_EQ(Describe(s.rank_ops()[0]), "F0.0 F0.1 F0.2 B0.0 B0.1 B0.2");
  EXPECT_EQ(Describe(s.rank_ops()[1]), "F1.0 F1.1 F1.2 B1.0 B1.1 B1.2");
}

TEST(Schedule, OneFOneBWarmsUpThenAlternates) {
  Schedule s = Schedule(Pipeline{ScheduleKind::kOneFOneB, 3, 1, 4});
  EXPECT_EQ(Describe(s.rank_ops()[0]), "F0.0 F0.1 F0.2 B0.0 F0.3 B0.1 B0.2 B0.3");
  EXPECT_EQ(Describe(s.rank_ops()[1]), "F1.0 F1.1 B1.0 F1.2 B1.1 F1.3 B1.2 B1.3");
  EXPECT_EQ(Describe(s.rank_ops()[2]), "F2.0 B2.0 F2.1 B2.1 F2.2 B2.2 F2.3 B2.3");
}

TEST(Schedule, OneFOneBWithFewerMicroBatchesThanRanks) {
  Schedule s = Schedule(Pipeline{ScheduleKind::kOneFOneB, 4, 1, 2});
  EXPECT_EQ(Describe(s.rank_ops()[0]), "F0.0 F0.1 B0.0 B0.1");
  EXPECT_EQ(Describe(s.rank_ops()[2]), "F2.0 F2.1 B2.0 B2.1");  // w = min(1, 2)
  EXPECT_EQ(Describe(s.rank_ops()[3]), "F3.0 B3.0 F3.1 B3.1");
}

// Megatron's interleaved order, p = 2, v = 2, m = 4: rank 0 warms up with 2(p-1) + (v-1)p = 4
// forwards, rank 1 with 2.
TEST(Schedule, InterleavedFollowsMegatronOrder) {
  Schedule s = Schedule(Pipeline{ScheduleKind::kInterleavedOneFOneB, 2, 2, 4});
  EXPECT_EQ(Describe(s.rank_ops()[0]),
            "F0.0 F0.1 F2.0 F2.1 F0.2 B2.0 F0.3 B2.1 F2.2 B0.0 F2.3 B0.1 B2.2 B2.3 B0.2 B0.3");
  EXPECT_EQ(Describe(s.rank_ops()[1]),
            "F1.0 F1.1 F3.0 B3.0 F3.1 B3.1 F1.2 B1.0 F1.3 B1.1 F3.2 B3.2 F3.3 B3.3 B1.2 B1.3");
}

// Megatron's micro-batch groups, p = 2, v = 2, m = 5, N = 3: the table is chunk 0 then chunk 1 of
// micro-batches 0-2, then of 3-4 (the last group takes what is left); backwards walk the same
// table with the chunk reversed. Rank 0 warms up with 2(p-1) + (v-1)N = 5 forwards.
TEST(Schedule, InterleavedRunsMegatronsMicroBatchGroups) {
  Pipeline p{ScheduleKind::kInterleavedOneFOneB, 2, 2, 5};
  p.micro_batch_group = 3;
  Schedule s = Schedule(p);
  EXPECT_EQ(Describe(s.rank_ops()[0]),
            "F0.0 F0.1 F0.2 F2.0 F2.1 F2.2 B2.0 F0.3 B2.1 F0.4 B2.2 F2.3 B0.0 F2.4 B0.1 B0.2 B2.3 B2.4 B0.3 B0.4");
  // With m a multiple of p and N = p the order is the one above.
  Pipeline q{ScheduleKind::kInterleavedOneFOneB, 2, 2, 4};
  q.micro_batch_group = 2;
  EXPECT_EQ(Describe(Schedule(q).rank_ops()[0]), Describe(Schedule(Pipeline{ScheduleKind::kInterleavedOneFOneB, 2, 2, 4}).rank_ops()[0]));
}

// ZB-H1, p = 3, m = 4: 1F1B's order with each B followed by the W of the micro-batch r earlier on
// rank r (none deferred on rank 0, two on the last rank), the rest after the last B.
TEST(Schedule, ZeroBubbleH1DefersTheLastRanksW) {
  Schedule s = Schedule(Pipeline{ScheduleKind::kZeroBubbleH1, 3, 1, 4});
  EXPECT_EQ(Describe(s.rank_ops()[0]), "F0.0 F0.1 F0.2 B0.0 W0.0 F0.3 B0.1 W0.1 B0.2 W0.2 B0.3 W0.3");
  EXPECT_EQ(Describe(s.rank_ops()[1]), "F1.0 F1.1 B1.0 F1.2 B1.1 W1.0 F1.3 B1.2 W1.1 B1.3 W1.2 W1.3");
  EXPECT_EQ(Describe(s.rank_ops()[2]), "F2.0 B2.0 F2.1 B2.1 F2.2 B2.2 W2.0 F2.3 B2.3 W2.1 W2.2 W2.3");
}

// The most (stage, micro-batch) activations rank r keeps at once, saved or held for a W.
int MostHeld(const Schedule& s, RankIdx r) {
  int held = 0, most = 0;
  for (const Op& op : s.ops_of(r)) {
    const MemoryEffect e = s.EffectOf(op.kind);
    held += e.saved + e.held;
    most = std::max(most, held);
  }
  return most;
}

// ZB-H1 holds, on every rank, at most p micro-batches' activations, saved (F done, B not) or held
// (B done, W not): rank 0's count under 1F1B, as the zero-bubble paper's ZB-H1 keeps it.
TEST(Schedule, ZeroBubbleH1HoldsAtMostPMicroBatches) {
  for (int p : {1, 2, 4, 8}) {
    for (int m : {1, 3, 8, 24}) {
      const Schedule s(Pipeline{ScheduleKind::kZeroBubbleH1, p, 1, m});
      for (RankIdx r = 0; r < p; ++r) {
        const int most = MostHeld(s, r);
        EXPECT_LE(most, std::min(p, m)) << "p " << p << " m " << m << " rank " << r;
        if (r == 0) {
          EXPECT_EQ(most, std::min(p, m)) << "p " << p << " m " << m;
        }
      }
    }
  }
}

// ZB-H2, p = 3, m = 6: twice ZB-H1's warm-up (2(p-1-r) forwards, then (forward, backward)
// pairs, so rank 0 runs 2p-1 forwards before its first B) and twice its W deferral (the W of the
// k-th backward after backward k + 2r). The last rank defers 2(p-1) W's, which fill the tail.
TEST(Schedule, ZeroBubbleH2DoublesTheWarmUpAndTheDeferral) {
  Schedule s = Schedule(Pipeline{ScheduleKind::kZeroBubbleH2, 3, 1, 6});
  EXPECT_EQ(Describe(s.rank_ops()[0]),
            "F0.0 F0.1 F0.2 F0.3 F0.4 B0.0 W0.0 F0.5 B0.1 W0.1 B0.2 W0.2 B0.3 W0.3 B0.4 W0.4 B0.5 W0.5");
  EXPECT_EQ(Describe(s.rank_ops()[1]),
            "F1.0 F1.1 F1.2 B1.0 F1.3 B1.1 F1.4 B1.2 W1.0 F1.5 B1.3 W1.1 B1.4 W1.2 B1.5 W1.3 W1.4 W1.5");
  EXPECT_EQ(Describe(s.rank_ops()[2]),
            "F2.0 B2.0 F2.1 B2.1 F2.2 B2.2 F2.3 B2.3 F2.4 B2.4 W2.0 F2.5 B2.5 W2.1 W2.2 W2.3 W2.4 W2.5");
}

// ZB-H2 holds at most 2p-1 micro-batches per rank (the zero-bubble paper's (2p-1) M_B), and every
// rank reaches that count when m is large enough.
TEST(Schedule, ZeroBubbleH2HoldsAtMostTwoPMinusOneMicroBatches) {
  for (int p : {1, 2, 4, 8}) {
    for (int m : {1, 3, 8, 24}) {
      const Schedule s(Pipeline{ScheduleKind::kZeroBubbleH2, p, 1, m});
      for (RankIdx r = 0; r < p; ++r) {
        const int most = MostHeld(s, r);
        EXPECT_LE(most, std::min(2 * p - 1, m)) << "p " << p << " m " << m << " rank " << r;
        if (m >= 2 * p) {
          EXPECT_EQ(most, 2 * p - 1) << "p " << p << " m " << m << " rank " << r;
        }
      }
    }
  }
}

// Interleaved ZB, p = 2, v = 2, m = 4: torch's ScheduleInterleavedZeroBubble (the ZB1P order):
// interleaved 1F1B's table with a warm-up of (v-1)N + (p-1-r) forwards (one per rank from the
// last, not two), and the W of the k-th backward after backward k + r.
TEST(Schedule, InterleavedZeroBubbleFollowsTorchsOrder) {
  Schedule s = Schedule(Pipeline{ScheduleKind::kInterleavedZeroBubble, 2, 2, 4});
  EXPECT_EQ(Describe(s.rank_ops()[0]),
            "F0.0 F0.1 F2.0 F2.1 B2.0 W2.0 F0.2 B2.1 W2.1 F0.3 B0.0 W0.0 F2.2 B0.1 W0.1 F2.3 B2.2 W2.2 B2.3 W2.3 B0.2 "
            "W0.2 B0.3 W0.3");
  EXPECT_EQ(Describe(s.rank_ops()[1]),
            "F1.0 F1.1 F3.0 B3.0 F3.1 B3.1 W3.0 F1.2 B1.0 W3.1 F1.3 B1.1 W1.0 F3.2 B3.2 W1.1 F3.3 B3.3 W3.2 B1.2 W3.3 "
            "B1.3 W1.2 W1.3");
}

// Interleaved ZB holds at most (v-1)N + p chunk micro-batches per rank (N the micro-batch group):
// rank 0's warm-up and one, where interleaved 1F1B's rank 0 holds (v-1)N + 2p-1 (both at most
// the m*v a rank runs).
TEST(Schedule, InterleavedZeroBubbleHoldsLessThanInterleavedOneFOneB) {
  for (int p : {2, 4, 8}) {
    for (int v : {2, 3}) {
      for (int m : {p, 2 * p, 3 * p}) {
        const Schedule zb(Pipeline{ScheduleKind::kInterleavedZeroBubble, p, v, m});
        const Schedule one(Pipeline{ScheduleKind::kInterleavedOneFOneB, p, v, m});
        for (RankIdx r = 0; r < p; ++r) EXPECT_LE(MostHeld(zb, r), (v - 1) * p + p) << p << " " << v << " " << m;
        EXPECT_EQ(MostHeld(zb, 0), (v - 1) * p + p);
        EXPECT_EQ(MostHeld(one, 0), std::min((v - 1) * p + 2 * p - 1, m * v));
      }
    }
  }
}

// ZB-V's V placement: rank r holds stage r (chunk 0) and stage 2p-1-r (chunk 1), both ways.
TEST(Schedule, ZeroBubbleVPlacesChunksInAV) {
  const Pipeline p{ScheduleKind::kZeroBubbleV, 4, 2, 8};
  for (RankIdx r = 0; r < 4; ++r) {
    EXPECT_EQ(p.StageAt(r, 0), r);
    EXPECT_EQ(p.StageAt(r, 1), 7 - r);
    for (int c = 0; c < 2; ++c) {
      EXPECT_EQ(p.RankOf(p.StageAt(r, c)), r);
      EXPECT_EQ(p.ChunkOf(p.StageAt(r, c)), c);
    }
  }
  // The turn of the V stays on the last rank: F(4, j) waits for F(3, j) without a transfer.
  const Schedule s(p);
  const OpEdges turn = s.Dependencies({4, 0, OpKind::kForward});
  ASSERT_EQ(turn.count, 1);
  EXPECT_FALSE(turn.edge[0].crosses_ranks);
  EXPECT_TRUE(s.Dependencies({5, 0, OpKind::kForward}).edge[0].crosses_ranks);
}

// ZB-V, p = 2, m = 4 (torch's ZBVZeroBubble order). Rank 0 (stages 0 and 3): three chunk-0
// forwards, two (chunk-1 F, B, W) triples, the steady (chunk-0 F, B, W, chunk-1 F, B, W) rounds,
// then (chunk-0 B, W). Rank 1 (stages 1 and 2) starts its chunk-1 work after one (chunk-1,
// chunk-0) forward pair and ends with one (B, B) pair before the W's it left.
TEST(Schedule, ZeroBubbleVOrder) {
  const Schedule s(Pipeline{ScheduleKind::kZeroBubbleV, 2, 2, 4});
  EXPECT_EQ(Describe(s.rank_ops()[0]),
            "F0.0 F0.1 F0.2 F3.0 B3.0 W3.0 F3.1 B3.1 W3.1 F0.3 B0.0 W0.0 F3.2 B3.2 W3.2 B0.1 W0.1 F3.3 B3.3 W3.3 "
            "B0.2 W0.2 B0.3 W0.3");
  EXPECT_EQ(Describe(s.rank_ops()[1]),
            "F1.0 F2.0 F1.1 F2.1 B2.0 W2.0 F1.2 B1.0 W1.0 F2.2 B2.1 W2.1 F1.3 B1.1 W1.1 F2.3 B2.2 W2.2 B1.2 B2.3 "
            "B1.3 W1.2 W2.3 W1.3");
}

// ZB-V holds at most 2p chunk micro-batches per rank (saved or waiting for W), each half a
// 1F1B stage's: the activation memory of 1F1B's rank 0 (the V-schedule paper's "1x").
TEST(Schedule, ZeroBubbleVHoldsAtMostTwoPChunkMicroBatches) {
  for (int p : {1, 2, 4, 8}) {
    for (int m : {1, 3, 8, 24}) {
      const Schedule s(Pipeline{ScheduleKind::kZeroBubbleV, p, 2, m});
      for (RankIdx r = 0; r < p; ++r) {
        EXPECT_LE(MostHeld(s, r), std::min(2 * p, 2 * m)) << "p " << p << " m " << m << " rank " << r;
      }
    }
  }
}

// DualPipeV, p = 2, m = 4: torch's ScheduleDualPipeV order (the framework test compares the
// export with torch's own, action by action). Rank 0 holds stages 0 and 3, rank 1 stages 1 and 2
// (the V). "F0.3+B3.1+W3.1" is torch's (0F3;3B1)OVERLAP_F_B, "B3.2+W3.2" a full backward (3B2),
// a lone B a split one (3I0) whose W runs at a later W step.
TEST(Schedule, DualPipeVFollowsTorchsOrder) {
  const Schedule s(Pipeline{ScheduleKind::kDualPipeV, 2, 2, 4});
  EXPECT_EQ(Describe(s.rank_ops()[0]),
            "F0.0 F0.1 F0.2 F3.0 B3.0 W3.0 F3.1 F0.3+B3.1+W3.1 F3.2+B0.0+W0.0 B3.2+W3.2 F3.3+B0.1+W0.1 B3.3+W3.3 "
            "B0.2 W0.2 B0.3 W0.3");
  EXPECT_EQ(Describe(s.rank_ops()[1]),
            "F1.0 F2.0 F1.1 F2.1 F1.2 B2.0+W2.0 F2.2+B1.0+W1.0 F1.3+B2.1+W2.1 F2.3+B1.1+W1.1 B2.2+W2.2 B1.2+W1.2 "
            "B2.3 B1.3 W2.3 W1.3");
  // An action's first op waits for its ops' dependencies outside it, each read as the end of the
  // action holding it; the action's other ops wait for none.
  const OpEdges first = s.Dependencies({2, 2, OpKind::kForward});  // F2.2+B1.0+W1.0 on rank 1
  ASSERT_EQ(first.count, 2);
  EXPECT_EQ(s.OpOf(first.edge[0].op).kind, OpKind::kForward);  // F1.2 (a lone op)
  EXPECT_EQ(s.OpOf(first.edge[1].op).stage, 2);                 // B2.0's action ends with W2.0
  EXPECT_EQ(s.OpOf(first.edge[1].op).kind, OpKind::kWeightGrad);
  EXPECT_EQ(s.Dependencies({1, 0, OpKind::kBackward}).count, 0);
  // Its last op is waited for by every dependent of its ops outside it, each read as the first op
  // of its action: F3.2 (after F2.2) and B0.0 (after B1.0), both in rank 0's F3.2+B0.0+W0.0.
  const OpEdges last = s.Dependents({1, 0, OpKind::kWeightGrad});
  ASSERT_EQ(last.count, 2);
  const OpId f32 = s.IdOf({3, 2, OpKind::kForward});
  EXPECT_EQ(last.edge[0].op, f32);
  EXPECT_EQ(last.edge[1].op, f32);
  EXPECT_EQ(s.Dependents({2, 2, OpKind::kForward}).count, 0);
}

// DualPipe, p = 4, m = 8, written out by hand from DeepSeek's DualPipe.step: micro-batches 0-3
// run stage s on rank s, 4-7 on rank 3-s. Every rank runs DualPipeV's order for two ranks (p/2)
// and four micro-batches (m/2), its chunk 0 the stage nearer its end of the pipeline over the half
// that enters there: ranks 0 and 1 are DualPipeV's p = 2, m = 4 ranks (above) with chunk 1's
// micro-batches shifted by 4, and ranks 3 and 2 the same with the halves swapped.
TEST(Schedule, DualPipeFollowsDeepSeeksOrder) {
  const Schedule s(Pipeline{ScheduleKind::kDualPipe, 4, 2, 8});
  EXPECT_EQ(Describe(s.rank_ops()[0]),
            "F0.0 F0.1 F0.2 F3.4 B3.4 W3.4 F3.5 F0.3+B3.5+W3.5 F3.6+B0.0+W0.0 B3.6+W3.6 F3.7+B0.1+W0.1 B3.7+W3.7 "
            "B0.2 W0.2 B0.3 W0.3");
  EXPECT_EQ(Describe(s.rank_ops()[1]),
            "F1.0 F2.4 F1.1 F2.5 F1.2 B2.4+W2.4 F2.6+B1.0+W1.0 F1.3+B2.5+W2.5 F2.7+B1.1+W1.1 B2.6+W2.6 B1.2+W1.2 "
            "B2.7 B1.3 W2.7 W1.3");
  EXPECT_EQ(Describe(s.rank_ops()[2]),
            "F1.4 F2.0 F1.5 F2.1 F1.6 B2.0+W2.0 F2.2+B1.4+W1.4 F1.7+B2.1+W2.1 F2.3+B1.5+W1.5 B2.2+W2.2 B1.6+W1.6 "
            "B2.3 B1.7 W2.3 W1.7");
  EXPECT_EQ(Describe(s.rank_ops()[3]),
            "F0.4 F0.5 F0.6 F3.0 B3.0 W3.0 F3.1 F0.7+B3.1+W3.1 F3.2+B0.4+W0.4 B3.2+W3.2 F3.3+B0.5+W0.5 B3.3+W3.3 "
            "B0.6 W0.6 B0.7 W0.7");
  // The placement both ways, and the edges of the second half crossing to the mirrored ranks.
  const Pipeline& p = s.pipeline();
  EXPECT_EQ(p.stages(), 4);
  EXPECT_EQ(p.RankOf(1, 0), 1);
  EXPECT_EQ(p.RankOf(1, 1), 2);
  EXPECT_EQ(p.StageAt(2, 0), 1);
  EXPECT_EQ(p.StageAt(2, 1), 2);
  EXPECT_EQ(s.RankOf({1, 5, OpKind::kForward}), 2);
  const OpEdges next = s.Dependents({1, 5, OpKind::kForward});
  ASSERT_EQ(next.count, 1);
  EXPECT_EQ(s.RankOfOp(next.edge[0].op), 1);  // F2.5 on rank 1
  EXPECT_TRUE(next.edge[0].crosses_ranks);
  // Orders that put an op on a rank without that copy are refused.
  std::vector<std::vector<Op>> moved = s.rank_ops();
  std::swap(moved[0], moved[3]);
  EXPECT_FALSE(Schedule::FromOrders(p, moved).ok());
}

// DualPipe's "PP+1" (the most stage micro-batches a rank holds, saved or waiting for W): p+1 under
// DualPipe, with two copies of every stage's parameters, and 2p+1 chunk micro-batches under
// DualPipeV, whose PP is 2p stages (one more than ZB-V).
TEST(Schedule, DualPipesHoldPPlusOne) {
  struct Case {
    ScheduleKind kind;
    std::vector<int> ranks;
    int even;  // micro-batch counts are rounded up to a multiple of this
    int stages_per_rank;
  };
  for (const Case& c : {Case{ScheduleKind::kDualPipe, {2, 4, 8}, 2, 1}, Case{ScheduleKind::kDualPipeV, {1, 2, 4, 8}, 1, 2}}) {
    for (int p : c.ranks) {
      for (int m : {2 * p, 2 * p + 3, 4 * p}) {
        m += m % c.even;
        const Schedule s(Pipeline{c.kind, p, 2, m});
        int most = 0;
        for (RankIdx r = 0; r < p; ++r) most = std::max(most, MostHeld(s, r));
        EXPECT_EQ(most, c.stages_per_rank * p + 1) << ScheduleName(c.kind) << " p " << p << " m " << m;
      }
    }
  }
}

// The op graph: B(s, j) is waited for by B(s-1, j) and W(s, j) (two dependents), and each edge
// says whether it crosses ranks and which stage's output it carries.
TEST(Schedule, SplitBackwardHasTwoDependents) {
  const Schedule s(Pipeline{ScheduleKind::kZeroBubbleH1, 3, 1, 2});
  const OpEdges after = s.Dependents({1, 0, OpKind::kBackward});
  ASSERT_EQ(after.count, 2);
  EXPECT_EQ(s.OpOf(after.edge[0].op).stage, 0);
  EXPECT_EQ(s.OpOf(after.edge[0].op).kind, OpKind::kBackward);
  EXPECT_TRUE(after.edge[0].crosses_ranks);
  EXPECT_EQ(after.edge[0].boundary, 0);
  EXPECT_EQ(s.OpOf(after.edge[1].op).kind, OpKind::kWeightGrad);
  EXPECT_FALSE(after.edge[1].crosses_ranks);
  // Dependencies and dependents are the same edges read both ways.
  for (RankIdx r = 0; r < 3; ++r) {
    for (const Op& op : s.ops_of(r)) {
      for (const OpEdge& e : s.Dependencies(op)) {
        const OpEdges back = s.Dependents(s.OpOf(e.op));
        int found = 0;
        for (const OpEdge& d : back) found += d.op == s.IdOf(op) && d.boundary == e.boundary ? 1 : 0;
        EXPECT_EQ(found, 1);
      }
    }
  }
}

TEST(Schedule, WarmupCounts) {
  EXPECT_EQ(WarmupForwards(Pipeline{ScheduleKind::kOneFOneB, 8, 1, 24}, 0), 7);
  EXPECT_EQ(WarmupForwards(Pipeline{ScheduleKind::kOneFOneB, 8, 1, 3}, 0), 3);
  EXPECT_EQ(WarmupForwards(Pipeline{ScheduleKind::kOneFOneB, 8, 1, 24}, 7), 0);
  EXPECT_EQ(WarmupForwards(Pipeline{ScheduleKind::kGPipe, 8, 1, 24}, 3), 24);
  EXPECT_EQ(WarmupForwards(Pipeline{ScheduleKind::kInterleavedOneFOneB, 4, 3, 8}, 0), 6 + 8);
  EXPECT_EQ(WarmupForwards(Pipeline{ScheduleKind::kInterleavedOneFOneB, 4, 3, 8}, 3), 8);
  // m = p: rank 0's warm-up 2(p-1) + (v-1)p exceeds m*v and is capped.
  EXPECT_EQ(WarmupForwards(Pipeline{ScheduleKind::kInterleavedOneFOneB, 4, 2, 4}, 0), 8);
}

TEST(Schedule, EveryOpOnceOnItsRank) {
  for (const ScheduleTraits& t : kSchedules) {
    const int v = t.min_chunks;
    const Pipeline p{t.kind, 4, v, 8};
    const int kinds = t.split_backward ? 3 : 2;
    Schedule s = Schedule(p);
    std::vector<int> count(static_cast<std::size_t>(kinds) * p.stages() * p.micro_batches, 0);
    for (RankIdx r = 0; r < p.ranks; ++r) {
      EXPECT_EQ(s.rank_ops()[r].size(), static_cast<std::size_t>(kinds) * v * p.micro_batches / p.Copies()) << t.name;
      for (const Op& op : s.rank_ops()[r]) {
        EXPECT_EQ(p.RankOf(op.stage, p.CopyOf(op.micro_batch)), r);
        EXPECT_EQ(s.OpOf(s.IdOf(op)).stage, op.stage);
        ++count[s.IdOf(op)];
      }
    }
    for (int c : count) EXPECT_EQ(c, 1) << t.name;
  }
}

// Another order over the same ops is accepted; one that leaves an op out or repeats one is not.
TEST(Schedule, FromOrdersChecksTheOps) {
  const Pipeline p{ScheduleKind::kOneFOneB, 1, 1, 2};
  EXPECT_TRUE(Schedule::FromOrders(p, {{{0, 1, OpKind::kForward}, {0, 0, OpKind::kForward}, {0, 1, OpKind::kBackward},
                                        {0, 0, OpKind::kBackward}}})
                  .ok());
  EXPECT_FALSE(Schedule::FromOrders(p, {{{0, 0, OpKind::kForward}, {0, 0, OpKind::kBackward}}}).ok());
  EXPECT_FALSE(Schedule::FromOrders(p, {{{0, 0, OpKind::kForward}, {0, 0, OpKind::kForward}, {0, 1, OpKind::kBackward},
                                         {0, 0, OpKind::kBackward}}})
                   .ok());
}

}  // namespace
}  // namespace bmpipe
