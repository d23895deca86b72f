// The adapter to COIN-OR CBC (mixed-integer programs) and CLP (linear programs). This header
// exposes no COIN type; coin.cc is the only file that includes COIN headers. CBC and CLP are not
// thread-safe: every call here builds a fresh model and holds a process-wide lock while solving.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bmpipe/core/build.h"
#include "bmpipe/core/deadline.h"
#include "bmpipe/core/error.h"
#include "bmpipe/core/outcome.h"
#include "bmpipe/solve/linear_model.h"

namespace bmpipe {

struct MipOptions {
  double time_limit_s = 60;  // CBC's own limit, on its search
  // A hard stop: CBC runs in a child process, ended at this deadline's stop flag (Ctrl-C) at
  // once, and a grace after its time (below) when CBC has not stopped by itself (its root LP and
  // cuts do not look at its limit). A solve ended so has no solution (kNoSolution).
  Deadline deadline = Deadline::Never();
  double relative_gap = 1e-9;
  std::vector<double> start;  // optional MIP start: a value per column
  bool write_lp = false;      // return the model as text (CPLEX LP format) in MipResult::lp_text
};

struct MipResult {
  ModelStatus status = ModelStatus::kNoSolution;
  double objective = kInfinity;  // best solution's objective
  double bound = -kInfinity;     // best proven lower bound
  std::vector<double> solution;
  double seconds = 0;
  long nodes = 0;
  std::string lp_text;  // with MipOptions::write_lp
};

// How long past the earlier of MipOptions::time_limit_s and its deadline CBC may run before it
// is ended: a quarter of that time, at least kMipGraceS and at most kMipMaxGraceS, times
// kMipGraceScale (CBC looks at its clock between heuristics, strong branching and cut rounds,
// which take longer on a busy machine). On the MindFormers tool's demo model CBC ended at most
// 0.15 s past its limit in a release build, and up to 3 s past it under the address sanitizer,
// whose allocator maps and unmaps each of CBC's large blocks: a sanitized build scales the grace.
inline constexpr double kMipGraceS = 0.5;
inline constexpr double kMipMaxGraceS = 2.0;
inline constexpr double kMipGraceScale = kSanitizedBuild ? 4 : 1;

// What happened to the model (core/outcome.h); an internal error when CBC failed (numerical
// trouble, unbounded) without a solution, or its process ended abnormally.
Result<MipResult> SolveMip(const LinearModel& model, const MipOptions& options);

// A linear program kept between solves, for branch and bound: column bounds change and rows are
// added, and each solve starts from the previous basis.
class LpSolver {
 public:
  explicit LpSolver(const LinearModel& model);
  ~LpSolver();
  LpSolver(const LpSolver&) = delete;
  LpSolver& operator=(const LpSolver&) = delete;

  void SetColumnBounds(const std::vector<double>& lower, const std::vector<double>& upper);
  void AddRow(const LinearRow& row);
  // Solutions whose objective is not below `cutoff` are of no use: the dual simplex may stop as
  // soon as its objective (which only rises) reaches it, and Solve then says infeasible.
  void SetCutoff(double cutoff);
  // Optimal, infeasible (or cut off), or kNoSolution when CLP stopped at `deadline`; an internal error when CLP
  // gave no verdict.
  Result<ModelStatus> Solve(const Deadline& deadline = Deadline::Never());
  double objective() const;
  std::vector<double> solution() const;
  int num_rows() const;
  // The basis of the last solve (a status per column, then per row), and a basis to start the next
  // solve from; rows added since it was taken start basic (their slacks).
  std::vector<unsigned char> Basis() const;
  void SetBasis(const std::vector<unsigned char>& basis);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace bmpipe
