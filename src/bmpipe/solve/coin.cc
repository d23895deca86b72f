// The only file that includes COIN-OR headers.
#include "bmpipe/solve/coin.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

#include <fmt/format.h>

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

namespace {

// What CBC's run left, as the child process sends it back.
struct MipVerdict {
  int status = 0;  // ModelStatus, or -1: numerical failure without a solution
  int has_solution = 0;
  double objective = 0;
  double bound = 0;
  long nodes = 0;
};

MipVerdict VerdictOf(Cbc_Model* cbc) {
  MipVerdict v;
  v.has_solution = Cbc_bestSolution(cbc) != nullptr ? 1 : 0;
  if (v.has_solution) v.objective = Cbc_getObjValue(cbc);
  v.bound = Cbc_getBestPossibleObjValue(cbc);
  v.nodes = Cbc_getNodeCount(cbc);
  ModelStatus status;
  if (Cbc_isProvenOptimal(cbc) && v.has_solution) {
    status = ModelStatus::kOptimal;
    v.bound = std::min(v.bound, v.objective);
  } else if (Cbc_isProvenInfeasible(cbc)) {
    status = ModelStatus::kInfeasible;
  } else if (Cbc_status(cbc) == 1) {
    status = v.has_solution ? ModelStatus::kFeasible : ModelStatus::kNoSolution;
  } else if (Cbc_status(cbc) == 0 && !v.has_solution && Cbc_secondaryStatus(cbc) == 1) {
    status = ModelStatus::kInfeasible;
  } else if (v.has_solution) {
    status = ModelStatus::kFeasible;
  } else {
    v.status = -1;
    return v;
  }
  v.status = static_cast<int>(status);
  return v;
}

bool WriteAll(int fd, const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

// Solves in a child process and sends the verdict and the solution down `fd`; never returns.
[[noreturn]] void SolveInChild(Cbc_Model* cbc, int columns, int fd) {
  Cbc_solve(cbc);
  const MipVerdict v = VerdictOf(cbc);
  bool sent = WriteAll(fd, &v, sizeof v);
  if (sent && v.has_solution) sent = WriteAll(fd, Cbc_bestSolution(cbc), sizeof(double) * static_cast<std::size_t>(columns));
  ::_exit(sent ? 0 : 1);
}

// Reads the child's answer until it closes its end, the stop flag is set or `hard` passes;
// ends the child in the last two cases. Returns the bytes read (all of them only when the child
// finished) and whether it was stopped.
struct ChildAnswer {
  std::string bytes;
  bool ended = false;   // killed by us
  bool clean = false;   // exited with status 0
  int signal = 0;       // the signal that ended it, if not us
};

ChildAnswer AwaitChild(pid_t child, int fd, const Deadline& hard) {
  ChildAnswer a;
  char buffer[1 << 16];
  while (true) {
    if (hard.Expired()) {
      ::kill(child, SIGKILL);
      a.ended = true;
      break;
    }
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, 50);
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the child closed its end: it is done
    a.bytes.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  a.clean = !a.ended && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!a.ended && WIFSIGNALED(status)) a.signal = WTERMSIG(status);
  return a;
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
  const Deadline limit = options.deadline.Earlier(Deadline::In(options.time_limit_s));
  Cbc_setLogLevel(cbc, getenv("CBCLOG") ? 1 : 0);
  // Its limit on the clock, not on CPU time (which runs behind the clock on a busy machine, so
  // that CBC would still be searching when its grace ends and it is stopped without its plan).
  Cbc_setParameter(cbc, "timeMode", "elapsed");
  Cbc_setMaximumSeconds(cbc, std::max(1e-3, std::min(options.time_limit_s, limit.SecondsLeft())));
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
  const int columns = model.num_columns();
  MipVerdict verdict;
  std::vector<double> solution;
  int pipe_fds[2] = {-1, -1};
  const bool piped = ::pipe(pipe_fds) == 0;
  const pid_t child = piped ? ::fork() : -1;
  if (child == 0) {
    ::close(pipe_fds[0]);
    SolveInChild(cbc, columns, pipe_fds[1]);
  }
  if (child < 0) {
    // No process to run it in (out of processes or memory): CBC runs here, bounded by its own
    // limit only.
    if (piped) {
      ::close(pipe_fds[0]);
      ::close(pipe_fds[1]);
    }
    Cbc_solve(cbc);
    verdict = VerdictOf(cbc);
    if (verdict.has_solution) solution.assign(Cbc_bestSolution(cbc), Cbc_bestSolution(cbc) + columns);
  } else {
    ::close(pipe_fds[1]);
    // The stop flag ends it at once; the time a grace after CBC's own limit.
    const Deadline hard =
        limit.Extended(kMipGraceScale * std::clamp(0.25 * limit.SecondsLeft(), kMipGraceS, kMipMaxGraceS));
    const ChildAnswer answer = AwaitChild(child, pipe_fds[0], hard);
    if (!answer.ended && !answer.clean) {
      Cbc_deleteModel(cbc);
      return InternalError(answer.signal != 0 ? fmt::format("CBC's process ended with signal {}", answer.signal)
                                              : std::string("CBC's process ended without its answer"));
    }
    if (answer.ended) {
      verdict.status = static_cast<int>(ModelStatus::kNoSolution);  // stopped before its verdict
      verdict.bound = -kInfinity;
    } else {
      if (answer.bytes.size() < sizeof verdict) {
        Cbc_deleteModel(cbc);
        return InternalError("CBC's process sent a short answer");
      }
      std::memcpy(&verdict, answer.bytes.data(), sizeof verdict);
      const std::size_t want = sizeof verdict + (verdict.has_solution ? sizeof(double) * columns : 0);
      if (answer.bytes.size() != want) {
        Cbc_deleteModel(cbc);
        return InternalError("CBC's process sent a short answer");
      }
      if (verdict.has_solution) {
        solution.resize(columns);
        std::memcpy(solution.data(), answer.bytes.data() + sizeof verdict, sizeof(double) * columns);
      }
    }
  }
  Cbc_deleteModel(cbc);
  if (verdict.status < 0) return InternalError("CBC reported a numerical failure");
  result.status = static_cast<ModelStatus>(verdict.status);
  if (verdict.has_solution) {
    result.solution = std::move(solution);
    result.objective = verdict.objective;
  }
  result.bound = verdict.bound;
  result.nodes = verdict.nodes;
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
  // Infeasible, or stopped at the cutoff (no solution below it).
  auto infeasible = [&] { return Clp_isProvenPrimalInfeasible(clp) || Clp_isDualObjectiveLimitReached(clp); };
  limit();
  if (deadline.Expired()) return ModelStatus::kNoSolution;
  // The dual simplex, also for the first solve (from the slack basis), not initialSolve: its
  // presolve does not look at the time limit (2 s past it on 332k columns), it took 6.5 s where
  // the dual took 1.0 s there, and it was no faster on the planning benchmark (7 cases proven in
  // 26 s by the dual against 28-29 s, alternated twice).
  Clp_dual(clp, 0);
  if (Clp_isProvenOptimal(clp)) return ModelStatus::kOptimal;
  if (infeasible()) return ModelStatus::kInfeasible;
  while (!deadline.IsNever() && stopped_by_limit() && !deadline.Expired()) {
    limit();
    Clp_dual(clp, 0);
    if (Clp_isProvenOptimal(clp)) return ModelStatus::kOptimal;
    if (infeasible()) return ModelStatus::kInfeasible;
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

void LpSolver::SetCutoff(double cutoff) { Clp_setDualObjectiveLimit(impl_->clp, Finite(cutoff)); }

std::vector<unsigned char> LpSolver::Basis() const {
  const unsigned char* status = Clp_statusArray(impl_->clp);
  if (status == nullptr) return {};
  return std::vector<unsigned char>(status, status + Clp_getNumCols(impl_->clp) + Clp_getNumRows(impl_->clp));
}

void LpSolver::SetBasis(const std::vector<unsigned char>& basis) {
  const std::size_t columns = Clp_getNumCols(impl_->clp), rows = Clp_getNumRows(impl_->clp);
  if (basis.size() < columns || basis.size() > columns + rows) return;
  std::vector<unsigned char> status(basis);
  status.resize(columns + rows, 1);  // ClpSimplex::basic
  Clp_copyinStatus(impl_->clp, status.data());
}

int LpSolver::num_rows() const { return Clp_getNumRows(impl_->clp); }

}  // namespace bmpipe
