#include "bmpipe/schedule/schedule.h"

#include <string>

#include <gtest/gtest.h>

namespace bmpipe {
namespace {

// "F0.1" = forward of stage 0, micro-batch 1.
std::string Describe(const std::vector<Op>& ops) {
  std::string out;
  for (const Op& op : ops) {
    if (!out.empty()) out += ' ';
    out += (op.kind == OpKind::kForward ? "F" : "B") + std::to_string(op.stage) + "." + std::to_string(op.micro_batch);
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
  for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB, ScheduleKind::kInterleavedOneFOneB}) {
    const int v = kind == ScheduleKind::kInterleavedOneFOneB ? 3 : 1;
    Pipeline p{kind, 4, v, 8};
    Schedule s = Schedule(p);
    std::vector<int> count(2 * p.stages() * p.micro_batches, 0);
    for (RankIdx r = 0; r < p.ranks; ++r) {
      EXPECT_EQ(s.rank_ops()[r].size(), 2u * v * p.micro_batches);
      for (const Op& op : s.rank_ops()[r]) {
        EXPECT_EQ(p.RankOf(op.stage), r);
        ++count[(op.kind == OpKind::kForward ? 0 : p.stages() * p.micro_batches) + op.stage * p.micro_batches +
                op.micro_batch];
      }
    }
    for (int c : count) EXPECT_EQ(c, 1);
  }
}

}  // namespace
}  // namespace bmpipe
