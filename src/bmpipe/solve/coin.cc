// The only file that includes COIN-OR headers.
#include "bmpipe/solve/coin.h"

#include <unistd.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>

#include <coin/Cbc_C_Interface.h>
#include <coin/Clp_C_Interface.h>

namespace bmpipe {
namespace {

// The longest CLP runs between two looks at the deadline's stop flag.
constexpr double kClpSliceS = 1.0;

std::mutex& CoinLock() {
  static std::mutex lock;
  return lock;
}

double Finite(double v) {
  if (v == kInfinity) return DBL_MAX;
  if (v == -kInfinity) return -DBL_MAX;
  return v;
}

// Column-major copy of a model, as COIN's loadProblem takes it.
struct ColumnMajor {
  std::vector<CoinBigIndex> start;
  std::vector<int> index;
  std::vector<double> value;
  std::vector<double> column_lower, column_upper, objective, row_lower, row_upper;

  explicit ColumnMajor(const LinearModel& m) {
    std::vector<int> count(m.num_columns() + 1, 0);
    for (const LinearRow& row : m.rows) {
      for (const LinearTerm& t : row.terms) ++count[t.column + 1];
    }
    start.assign(m.num_columns() + 1, 0);
    for (int c = 0; c < m.num_columns(); ++c) start[c + 1] = start[c] + count[c + 1];
    index.resize(start.back());
    value.resize(start.back());
    std::vector<CoinBigIndex> fill(start.begin(), start.end() - 1);
    for (int r = 0; r < m.num_rows(); ++r) {
      for (const LinearTerm& t : m.rows[r].terms) {
        index[fill[t.column]] = r;
        value[fill[t.column]] = t.coefficient;
        ++fill[t.column];
      }
    }
    for (int c = 0; c < m.num_columns(); ++c) {
      column_lower.push_back(Finite(m.column_lower[c]));
      column_upper.push_back(Finite(m.column_upper[c]));
      objective.push_back(m.objective[c]);
    }
    for (const LinearRow& row : m.rows) {
      row_lower.push_back(Finite(row.lower));
      row_upper.push_back(Finite(row.upper));
    }
  }
};

// CBC writes LP files only to a path: it writes into a private temporary directory, and the text
// comes back, so that the caller decides whether the file appears (only when the run succeeds).
std::string LpText(Cbc_Model* cbc) {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/bmpipe-lp-XXXXXX";
  if (::mkdtemp(dir.data()) == nullptr) return "";
  const std::string file = dir + "/model.lp";
  Cbc_writeLp(cbc, file.c_str());
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  std::remove(file.c_str());
  ::rmdir(dir.c_str());
  return text.str();
}

}  // namespace

Result<MipResult> SolveMip(const LinearModel& model, const MipOptions& options) {
  std::lock_guard<std::mutex> guard(CoinLock());
  const auto began = std::chrono::steady_clock::now();
  ColumnMajor cm(model);
  Cbc_Model* cbc = Cbc_newModel();
  Cbc_loadProblem(cbc, model.num_columns(), model.num_rows(), cm.start.data(), cm.index.data(), cm.value.data(),
                  cm.column_lower.data(), cm.column_upper.data(), cm.objective.data(), cm.row_lower.data(),
                  cm.row_upper.data());
  for (int c = 0; c < model.num_columns(); ++c) {
    Cbc_setColName(cbc, c, model.column_names[c].c_str());
    if (model.integer[c]) Cbc_setInteger(cbc, c);
  }
  for (int r = 0; r < model.num_rows(); ++r) Cbc_setRowName(cbc, r, model.rows[r].name.c_str());
  MipResult result;
  if (options.write_lp) result.lp_text = LpText(cbc);
  Cbc_setLogLevel(cbc, 0);
  Cbc_setMaximumSeconds(cbc, options.time_limit_s);
  Cbc_setAllowableFractionGap(cbc, options.relative_gap);
  Cbc_setAllowableGap(cbc, 0.0);
  if (!options.start.empty()) {
    std::vector<int> columns;
    std::vector<double> values;
    for (int c = 0; c < model.num_columns(); ++c) {
      if (model.integer[c] && options.start[c] != 0.0) {
        columns.push_back(c);
        values.push_back(options.start[c]);
      }
    }
    Cbc_setMIPStartI(cbc, static_cast<int>(columns.size()), columns.data(), values.data());
  }
  Cbc_solve(cbc);

  const double* best = Cbc_bestSolution(cbc);
  const bool has_solution = best != nullptr;
  if (has_solution) {
    result.solution.assign(best, best + model.num_columns());
    result.objective = Cbc_getObjValue(cbc);
  }
  result.bound = Cbc_getBestPossibleObjValue(cbc);
  result.nodes = Cbc_getNodeCount(cbc);
  if (Cbc_isProvenOptimal(cbc) && has_solution) {
    result.status = ModelStatus::kOptimal;
    result.bound = std::min(result.bound, result.objective);
  } else if (Cbc_isProvenInfeasible(cbc)) {
    result.status = ModelStatus::kInfeasible;
  } else if (Cbc_status(cbc) == 1) {
    result.status = has_solution ? ModelStatus::kFeasible : ModelStatus::kNoSolution;
  } else if (Cbc_status(cbc) == 0 && !has_solution && Cbc_secondaryStatus(cbc) == 1) {
    result.status = ModelStatus::kInfeasible;
  } else if (has_solution) {
    result.status = ModelStatus::kFeasible;
  } else {
    Cbc_deleteModel(cbc);
    return InternalError("CBC reported a numerical failure");
  }
  Cbc_deleteModel(cbc);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  return result;
}

struct LpSolver::Impl {
  Clp_Simplex* clp = nullptr;
};

LpSolver::LpSolver(const LinearModel& model) : impl_(std::make_unique<Impl>()) {
  ColumnMajor cm(model);
  std::lock_guard<std::mutex> guard(CoinLock());
  impl_->clp = Clp_newModel();
  Clp_setLogLevel(impl_->clp, 0);
  Clp_loadProblem(impl_->clp, model.num_columns(), model.num_rows(), cm.start.data(), cm.index.data(), cm.value.data(),
                  cm.column_lower.data(), cm.column_upper.data(), cm.objective.data(), cm.row_lower.data(),
                  cm.row_upper.data());
}

LpSolver::~LpSolver() {
  std::lock_guard<std::mutex> guard(CoinLock());
  Clp_deleteModel(impl_->clp);
}

void LpSolver::SetColumnBounds(const std::vector<double>& lower, const std::vector<double>& upper) {
  std::vector<double> lo(lower.size()), hi(upper.size());
  for (std::size_t i = 0; i < lower.size(); ++i) {
    lo[i] = Finite(lower[i]);
    hi[i] = Finite(upper[i]);
  }
  Clp_chgColumnLower(impl_->clp, lo.data());
  Clp_chgColumnUpper(impl_->clp, hi.data());
}

void LpSolver::AddRow(const LinearRow& row) {
  std::vector<int> index;
  std::vector<double> value;
  for (const LinearTerm& t : row.terms) {
    index.push_back(t.column);
    value.push_back(t.coefficient);
  }
  const CoinBigIndex starts[2] = {0, static_cast<CoinBigIndex>(index.size())};
  const double lower = Finite(row.lower), upper = Finite(row.upper);
  Clp_addRows(impl_->clp, 1, &lower, &upper, starts, index.data(), value.data());
}

Result<ModelStatus> LpSolver::Solve(const Deadline& deadline) {
  std::lock_guard<std::mutex> guard(CoinLock());
  Clp_Simplex* clp = impl_->clp;
  // CLP's own limit, checked between its iterations; it counts the process's CPU time, which runs
  // ahead of the clock while other threads work: CLP is resumed until the deadline has passed.
  // It runs in slices of at most kClpSliceS, so that a stop flag (Ctrl-C) is seen within one.
  auto limit = [&] {
    Clp_setMaximumSeconds(clp, deadline.IsNever() ? -1.0 : std::clamp(deadline.SecondsLeft(), 1e-3, kClpSliceS));
  };
  auto stopped_by_limit = [&] { return Clp_status(clp) == 3; };
  limit();
  if (deadline.Expired()) return ModelStatus::kNoSolution;
  // The dual simplex, also for the first solve (from the slack basis), not initialSolve: its
  // presolve does not look at the time limit (2 s past it on 332k columns), it took 6.5 s where
  // the dual took 1.0 s there, and it was no faster on the planning benchmark (7 cases proven in
  // 26 s by the dual against 28-29 s, alternated twice).
  Clp_dual(clp, 0);
  if (Clp_isProvenOptimal(clp)) return ModelStatus::kOptimal;
  if (Clp_isProvenPrimalInfeasible(clp)) return ModelStatus::kInfeasible;
  while (!deadline.IsNever() && stopped_by_limit() && !deadline.Expired()) {
    limit();
    Clp_dual(clp, 0);
    if (Clp_isProvenOptimal(clp)) return ModelStatus::kOptimal;
    if (Clp_isProvenPrimalInfeasible(clp)) return ModelStatus::kInfeasible;
  }
  if (deadline.Expired()) return ModelStatus::kNoSolution;
  // Dual simplex from a stale basis can stop without a verdict; retry from scratch once.
  limit();
  Clp_initialSolve(clp);
  if (Clp_isProvenOptimal(clp)) return ModelStatus::kOptimal;
  if (Clp_isProvenPrimalInfeasible(clp)) return ModelStatus::kInfeasible;
  if (deadline.Expired()) return ModelStatus::kNoSolution;
  return InternalError("CLP gave no verdict on the relaxation");
}

double LpSolver::objective() const { return Clp_getObjValue(impl_->clp); }

std::vector<double> LpSolver::solution() const {
  const double* x = Clp_getColSolution(impl_->clp);
  return std::vector<double>(x, x + Clp_getNumCols(impl_->clp));
}

int LpSolver::num_rows() const { return Clp_getNumRows(impl_->clp); }

}  // namespace bmpipe
