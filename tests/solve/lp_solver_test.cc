// The linear-programming solver branch and bound keeps between nodes: a cutoff stops a relaxation
// that cannot beat the incumbent, and a basis saved before rows were added still starts a solve
// that ends at the right optimum.
#include <vector>

#include <gtest/gtest.h>

#include "bmpipe/solve/coin.h"
#include "bmpipe/solve/linear_model.h"

namespace bmpipe {
namespace {

// minimize t subject to t >= x + y, t >= 2x, x in [1, 10], y in [2, 10].
struct Small {
  LinearModel model;
  int t = 0, x = 0, y = 0;
  Small() {
    t = model.AddColumn("t", 0, kInfinity, 1, false);
    x = model.AddColumn("x", 1, 10, 0, false);
    y = model.AddColumn("y", 2, 10, 0, false);
    model.AddRow({"sum", 0, kInfinity, {{t, 1}, {x, -1}, {y, -1}}});
    model.AddRow({"twice", 0, kInfinity, {{t, 1}, {x, -2}}});
  }
};

TEST(LpSolver, ACutoffNeverHidesAnOptimumBelowIt) {
  Small s;
  LpSolver lp(s.model);
  lp.SetCutoff(10);
  ASSERT_EQ(lp.Solve().value(), ModelStatus::kOptimal);
  EXPECT_NEAR(lp.objective(), 3, 1e-9);
  // x >= 4: the optimum rises to 8 (t >= 2x), past a cutoff of 7.
  std::vector<double> lo = s.model.column_lower, hi = s.model.column_upper;
  lo[s.x] = 4;
  lp.SetColumnBounds(lo, hi);
  // A cutoff above the optimum changes nothing.
  lp.SetCutoff(8.5);
  ASSERT_EQ(lp.Solve().value(), ModelStatus::kOptimal);
  EXPECT_NEAR(lp.objective(), 8, 1e-9);
  // Below it the solve may stop early (infeasible) or finish; never with a value under the cutoff.
  lo[s.x] = 5;  // optimum 10
  lp.SetColumnBounds(lo, hi);
  lp.SetCutoff(7);
  const ModelStatus cut = lp.Solve().value();
  EXPECT_TRUE(cut == ModelStatus::kInfeasible || (cut == ModelStatus::kOptimal && lp.objective() >= 7));
  lp.SetCutoff(kInfinity);
  ASSERT_EQ(lp.Solve().value(), ModelStatus::kOptimal);
  EXPECT_NEAR(lp.objective(), 10, 1e-9);
}

TEST(LpSolver, ABasisFromBeforeARowWasAddedStartsTheNextSolve) {
  Small s;
  LpSolver lp(s.model);
  ASSERT_EQ(lp.Solve().value(), ModelStatus::kOptimal);
  const std::vector<unsigned char> root = lp.Basis();
  ASSERT_EQ(root.size(), 5u);  // three columns, two rows
  // Another node (y >= 9: optimum 10), then a cut t >= 3y - 10 (binding at y = 9: 17), then back
  // to the root's box from the root's basis, which has no status for the cut's row.
  std::vector<double> lo = s.model.column_lower, hi = s.model.column_upper;
  lo[s.y] = 9;
  lp.SetColumnBounds(lo, hi);
  ASSERT_EQ(lp.Solve().value(), ModelStatus::kOptimal);
  EXPECT_NEAR(lp.objective(), 10, 1e-9);
  lp.AddRow({"cut", -10, kInfinity, {{s.t, 1}, {s.y, -3}}});
  ASSERT_EQ(lp.Solve().value(), ModelStatus::kOptimal);
  EXPECT_NEAR(lp.objective(), 17, 1e-9);
  lp.SetColumnBounds(s.model.column_lower, s.model.column_upper);
  lp.SetBasis(root);
  ASSERT_EQ(lp.Solve().value(), ModelStatus::kOptimal);
  EXPECT_NEAR(lp.objective(), 3, 1e-9);  // x = 1, y = 2: t >= 3, t >= 2, t >= -4
  EXPECT_EQ(lp.Basis().size(), 6u);
  // A basis of another size than the model's columns is ignored, not read out of bounds.
  lp.SetBasis(std::vector<unsigned char>(2, 1));
  ASSERT_EQ(lp.Solve().value(), ModelStatus::kOptimal);
  EXPECT_NEAR(lp.objective(), 3, 1e-9);
}

}  // namespace
}  // namespace bmpipe
