// The whole-cluster search: for N devices, a model and a global batch, every valid combination of
// tensor parallelism (within a node), context parallelism, pipeline ranks, data parallelism, expert
// parallelism and expert tensor parallelism (MoE models), virtual stages, micro-batch size, sequence
// parallelism, the ZeRO stage and the GEMM precision, each judged by the exact planner after cheap,
// sound bounds have set aside what cannot be among the best:
//   1. dominance: a configuration whose problem is no cheaper in any cost than another one's with
//      the same pipeline cannot be faster (the simulator is monotone in every duration and byte);
//   2. memory: the least bytes some rank must hold (its static bytes and the activations it keeps
//      at its first backward, each layer on its cheapest option) exceed the device;
//   3. time: the rank-load lower bound (solve/load_bound.h) exceeds the iteration time of K plans
//      already found (any plan that fits is an upper bound on its configuration's optimum).
// What survives is first screened, in order of its time bound, with a quick plan (one
// recomputation option on every layer, stages cut at equal shares of compute, simulated:
// milliseconds); then the most promising,
// by screened time, are planned with the exact planner, which is the costly step (its candidate
// blocks and local search grow with stages x micro-batches). Both steps run in waves of a fixed
// size, each wave's threshold depending only on earlier waves, and every planner run is limited
// by nodes, not seconds, so the result (and every count) is the same for any number of threads.
// Configurations only screened keep their lower bound in the search's overall bound.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bmpipe/core/deadline.h"
#include "bmpipe/core/error.h"
#include "bmpipe/core/progress.h"
#include "bmpipe/cost/problem_builder.h"
#include "bmpipe/cost/training_setup.h"
#include "bmpipe/sim/simulator.h"
#include "bmpipe/solve/planner.h"
#include "bmpipe/frameworks/settings.h"

namespace bmpipe {

struct SearchConfig {
  int tp = 1, pp = 1, dp = 1, vpp = 1, mbs = 1;
  bool sequence_parallel = false;
  int zero = 0;  // ZeRO stage: 1 is Megatron's distributed optimizer
  int cp = 1, ep = 1;
  int etp = 1;  // expert tensor-parallel size (MoE models); equal to tp otherwise
  Precision precision = Precision::kBf16;
  // kOneFOneB runs interleaved when vpp > 1.
  ScheduleKind schedule = ScheduleKind::kOneFOneB;
  // Overlapped pairs (Pipeline::overlap): DualPipe's and DualPipeV's with their overlap, interleaved
  // 1F1B as Megatron's combined 1F1B; searched for MoE models with expert parallelism.
  bool overlap = false;
  // A fixed order: the tie-break between configurations with equal iteration times.
  bool operator<(const SearchConfig& o) const;
  bool operator==(const SearchConfig& o) const;
};

// "tp 8, pp 16, dp 128, vpp 4, mbs 1, sequence parallel, ZeRO-1", with cp, ep, etp, FP8 and a
// schedule other than 1F1B where they are not the default.
std::string DescribeConfig(const SearchConfig& c);

inline constexpr int kMinContextTokens = 4096;
// The search command's time budget when none is given (seconds; the library's default is none).
inline constexpr double kDefaultSearchBudgetS = 300;
// Configurations within this fraction of the fastest one's iteration time rank by their fullest
// rank's memory, the most free first: the cost model cannot tell their times apart, and the one
// with more free memory is the likelier to fit when run.
inline constexpr double kTimeTie = 0.005;

struct SearchOptions {
  int devices = 0;
  // Batch, sequence, flash attention, recomputation options, reserved memory, overlap; its
  // parallel sizes and switches are what the search sets.
  TrainingSetup base;
  // Restrict the space; empty means every valid value, except where noted.
  std::vector<int> tp, pp, vpp, mbs;
  // Empty: 1, and with flash attention every size that leaves each rank at least
  // kMinContextTokens tokens of the sequence (below that the ring's K/V passes outrun attention).
  std::vector<int> cp;
  std::vector<int> ep;    // MoE models; empty: every size dividing the experts and the stage's devices
  std::vector<int> etp;   // MoE models; empty: 1 and tp
  // Empty: 1, 2 and 3 (ZeRO-1 dominates ZeRO-0 where there is a group to shard over), or 0
  // without data or context parallelism.
  std::vector<int> zero;
  std::vector<Precision> precision;  // empty: base.precision
  // Schedules with one chunk per rank to try beside (interleaved) 1F1B, e.g. zb-h1; empty: 1f1b
  // (interleaved when vpp > 1) only.
  std::vector<ScheduleKind> schedules;
  // The memory a configuration keeps free on every rank, from its setup (the default headroom,
  // which depends on the kind of run); empty: base.headroom_bytes for all. Called from several
  // threads at once: a pure function.
  std::function<Bytes(const TrainingSetup&)> headroom_of;
  int top = 5;       // configurations to rank
  int threads = 0;   // 0: the machine's hardware threads
  // Configurations planned with the exact planner, most promising (by screened time) first; -1:
  // every one not pruned.
  int plan_count = 12;
  // Branch-and-bound nodes per planner run (deterministic, unlike seconds); -1: none. The root's
  // incumbents (even and memory-balanced splits improved by local search) come before node 1.
  long node_limit = 0;
  double time_budget_s = 0;  // 0: none; else no planner run starts after this many seconds
  bool exhaustive = false;   // plan every valid configuration exactly, no bound, no screening (to verify)
  AttentionFlops mfu_attention = AttentionFlops::kCausal;  // how MFU counts attention
  // The framework that will run the plan: every configuration is planned within its space, and
  // configurations it cannot run (interleaving for DeepSpeed) are not enumerated.
  TargetKind target = TargetKind::kAny;
  // Told each step, and each planner run that ends (done of total: configurations planned of at
  // most those left after the cheap bounds); called from one thread at a time.
  ProgressSink progress;
  Deadline deadline;  // the caller's (a stop flag, say); the sooner of it and the time budget stops the search
};

// What the search decided about a configuration: the step that set it aside, or, once the exact
// planner ran, what happened to its model (ConfigOutcome::planner.status, a ModelStatus) in the
// search's statistics' words (VerdictOf). Not an outcome of its own: a classification for the
// statistics, keyed by VerdictName in the report and the JSON.
enum class Verdict {
  kDominated,    // another configuration with the same pipeline is at least as cheap in every cost
  kMemoryBound,  // cannot fit: the memory lower bound exceeds the device
  kTimeBound,    // its time lower bound is above the K-th best iteration time found
  kScreened,     // screened with the quick plan only (see screen_ns), not planned exactly
  kNoFit,        // planned: ModelStatus::kInfeasible, no plan fits
  kPlanned,      // planned: ModelStatus::kOptimal or kFeasible, see `planner`
  kNotPlanned,   // the time budget ran out before its turn (planned: ModelStatus::kNoSolution)
};
inline constexpr int kVerdicts = 7;
std::string_view VerdictName(Verdict v);
// The verdict of a configuration the exact planner ran on: what its ModelStatus says.
Verdict VerdictOf(ModelStatus planned);

struct ConfigOutcome {
  SearchConfig config;
  int micro_batches = 0;
  Verdict verdict = Verdict::kNotPlanned;
  TimeNs time_bound_ns = 0;         // rank-load lower bound on the iteration time
  Bytes memory_bound_bytes = 0;     // least peak some rank must reach
  int dominated_by = -1;            // index into SearchResult::configs
  TimeNs screen_ns = 0;             // the quick plan's iteration time (0: none fits, or not screened)
  Plan screen_plan;                 // that plan, while the search runs (the answer of a budget that
                                    // ends before any exact plan; cleared at the end)
  PlannerResult planner;            // when planned
  std::string setting;              // the target's recomputation setting of the plan (global targets)
  // For plans found: from the simulator.
  double tokens_per_s = 0;
  double mfu = 0;                   // model FLOPs (no recomputation) / (time x devices x peak)
  double bubble = 0;
  double peak_memory_fraction = 0;  // largest rank peak / device memory
  double mean_memory_fraction = 0;
};

// Planned, with a plan that fits (optimal or not).
bool HasPlan(const ConfigOutcome& out);

// `c` differs from `ranked` only in its virtual stages, by less than their planners' gaps: the
// planner has not proven them different. The ranking lists it as `ranked`'s tie, not as a row.
bool TiedByVirtualStages(const ConfigOutcome& ranked, const ConfigOutcome& c);

struct SearchResult {
  std::vector<ConfigOutcome> configs;  // every valid configuration, in SearchConfig order
  // The `top` fastest with a plan (indices), fastest first, except that those within kTimeTie of
  // the fastest come first, the least memory first.
  std::vector<int> ranking;
  int fastest = -1;                    // the fastest with a plan (index), -1: none
  long combinations = 0;               // tuples tried, valid or not
  long invalid = 0;                    // rejected by the setup rules (divisibility, layer count, ...)
  long target_refused = 0;             // valid, but the target's framework cannot run the setup
  int count[kVerdicts] = {};           // configurations per Verdict
  int screened = 0;                    // configurations screened with the quick plan
  // The least iteration time any configuration could reach: the best plan's time if every other
  // configuration was pruned or proven, else the least proven lower bound among the rest.
  double bound_ns = 0;
  double gap = 0;                      // (best - bound) / best
  double model_flops = 0;              // per iteration
  double seconds = 0;
  double bound_seconds = 0, screen_seconds = 0, plan_seconds = 0;  // the steps' wall time
  int threads = 1;
  bool budget_exhausted = false;
  bool interrupted = false;       // the caller's stop flag (Ctrl-C) stopped it

  int Count(Verdict v) const { return count[static_cast<int>(v)]; }
};

// The training setup of one configuration.
TrainingSetup SetupOf(const SearchOptions& options, const SearchConfig& config);

// Fails on bad options (devices, batch) or when no combination is valid.
Result<SearchResult> SearchConfigurations(const ModelSpec& model, const DeviceSpec& device, const SearchOptions& options);

}  // namespace bmpipe
