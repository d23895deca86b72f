// The adapter to COIN-OR CBC (mixed-integer programs) and CLP (linear programs). This header
// exposes no COIN type; coin.cc is the only file that includes COIN headers. CBC and CLP are not
// thread-safe: every call here builds a fresh model and holds a process-wide lock while solving.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bmpipe/core/deadline.h"
#include "bmpipe/solve/linear_model.h"

namespace bmpipe {

// What happened to the problem (the call itself always returns).
enum class MipStatus {
  kOptimal,     // proven optimal (within the relative gap)
  kFeasible,    // a solution, but a limit stopped the proof
  kInfeasible,  // proven infeasible
  kNoSolution,  // a limit stopped the search before any solution
  kError,       // the solver failed (numerical trouble, unbounded)
};

struct MipOptions {
  double time_limit_s = 60;
  double relative_gap = 1e-9;
  std::vector<double> start;  // optional MIP start: a value per column
  bool write_lp = false;      // return the model as text (CPLEX LP format) in MipResult::lp_text
};

struct MipResult {
  MipStatus status = MipStatus::kError;
  double objective = kInfinity;  // best solution's objective
  double bound = -kInfinity;     // best proven lower bound
  std::vector<double> solution;
  double seconds = 0;
  long nodes = 0;
  std::string lp_text;  // with MipOptions::write_lp
};

MipResult SolveMip(const LinearModel& model, const MipOptions& options);

// A linear program kept between solves, for branch and bound: column bounds change and rows are
// added, and each solve starts from the previous basis.
class LpSolver {
 public:
  explicit LpSolver(const LinearModel& model);
  ~LpSolver();
  LpSolver(const LpSolver&) = delete;
  LpSolver& operator=(const LpSolver&) = delete;

  enum class Status { kOptimal, kInfeasible, kStopped, kError };  // kStopped: the deadline

  void SetColumnBounds(const std::vector<double>& lower, const std::vector<double>& upper);
  void AddRow(const LinearRow& row);
  // CLP stops at `deadline` (kStopped).
  Status Solve(const Deadline& deadline = Deadline::Never());
  double objective() const;
  std::vector<double> solution() const;
  int num_rows() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace bmpipe
