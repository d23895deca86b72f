#include "bmpipe/search/search.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>
#include <tuple>

#include <fmt/format.h>

#include "bmpipe/core/deadline.h"
#include "bmpipe/cost/problem_builder.h"
#include "bmpipe/solve/load_bound.h"
#include "bmpipe/solve/quick_plan.h"

namespace bmpipe {
namespace {

// The planner's time limit in the search: none (its runs are bounded by nodes, so that the result
// does not depend on the machine's speed); the search's budget and stop flag come as a deadline.
constexpr double kNoTimeLimitS = 1e9;

// Configurations planned between two updates of the pruning threshold. Fixed, so that which
// configurations are planned does not depend on the number of threads.
constexpr int kWave = 8;

// The share of a time budget the bounding pass may take (the rest screens and plans).
constexpr double kBoundShare = 0.5;

// At most this many threads (--threads): more only adds stacks and contention.
constexpr int kMaxThreads = 1024;

// The memory bound keeps, per distinct count of activations held, the layers' sorted costs: at
// most this many entries in all (8 bytes each); beyond, counts are rounded down to fewer levels,
// which lowers the bound (it stays valid).
constexpr std::int64_t kMemoryBoundEntries = std::int64_t{1} << 24;

// The fields in tie-break order; those added later come last, so earlier orders still hold.
// The fields in the order configurations sort by, as one flat array: comparing it is a plain
// lexicographic compare of integers (the search sorts hundreds of thousands of configurations).
std::array<int, 13> Key(const SearchConfig& c) {
  return {c.tp, c.pp, c.dp, c.vpp, c.mbs, c.sequence_parallel, c.zero, c.cp, c.ep, c.etp,
          static_cast<int>(c.precision), static_cast<int>(c.schedule), c.overlap};
}

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::vector<int> Divisors(long n) {
  std::vector<int> out;
  for (long d = 1; d <= n; ++d) {
    if (n % d == 0) out.push_back(static_cast<int>(d));
  }
  return out;
}

bool Allowed(const std::vector<int>& only, int v) {
  return only.empty() || std::find(only.begin(), only.end(), v) != only.end();
}

// The (ep, etp) layouts of the experts on a pipeline stage of `stage_devices` devices: ep divides
// the routed experts, ep x etp the stage's devices; etp is 1 and tp unless --etp lists others. A
// dense model has the one layout (1, tp).
std::vector<std::pair<int, int>> ExpertLayouts(const ModelSpec& model, const SearchOptions& options, int tp,
                                               int stage_devices) {
  if (!model.moe.enabled()) return {{1, tp}};
  std::vector<std::pair<int, int>> layouts;
  for (int ep : Divisors(model.moe.experts)) {
    if (ep > stage_devices || !Allowed(options.ep, ep)) continue;
    for (int etp : Divisors(tp)) {
      const bool listed = options.etp.empty() ? etp == 1 || etp == tp : Allowed(options.etp, etp);
      if (listed && stage_devices % (ep * etp) == 0) layouts.push_back({ep, etp});
    }
  }
  return layouts;
}

// The ZeRO stages to try with `group` data- and context-parallel ranks to shard over: none without
// a group; else those --zero lists, by default 1 to 3, because ZeRO-1 is no costlier than no
// sharding in any term (its reduce-scatter and gather move no more than the all-reduce, its step
// and state are a share).
std::vector<int> ZeroStages(const SearchOptions& options, int group) {
  if (group == 1) return Allowed(options.zero, 0) ? std::vector<int>{0} : std::vector<int>{};
  std::vector<int> stages;
  for (int zero = options.zero.empty() ? 1 : 0; zero <= 3; ++zero) {
    if (Allowed(options.zero, zero)) stages.push_back(zero);
  }
  return stages;
}

// Runs fn(0..n-1) on `threads` threads; fn must only write to its own index's state. An exception
// in any call (out of memory, say) stops the others from starting new indices and is rethrown
// here, on the caller's thread, instead of ending the process.
template <typename Fn>
void ParallelFor(int n, int threads, const Fn& fn) {
  std::atomic<int> next{0};
  std::mutex failed_lock;
  std::exception_ptr failed;
  auto worker = [&] {
    try {
      for (int i = next++; i < n; i = next++) fn(i);
    } catch (...) {
      next = n;
      std::lock_guard<std::mutex> guard(failed_lock);
      if (!failed) failed = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < std::min(threads, n); ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  if (failed) std::rethrow_exception(failed);
}

// What dominance compares: the problem less the layers that repeat. Every configuration has the
// same model, so the same entries (runs of one layer kind) in the same order.
struct Signature {
  Pipeline pipeline;
  Bytes usable_bytes = 0;  // memory - reserved
  TimeNs p2p_ns = 0;
  std::vector<Layer> entries;  // the first layer of each entry
};

Signature SignatureOf(const Problem& p) {
  Signature s{p.pipeline, p.memory_bytes - p.reserved_bytes, p.p2p_ns, {}};
  for (const Layer& layer : p.layers) {
    if (s.entries.size() <= static_cast<std::size_t>(layer.entry)) s.entries.push_back(layer);
  }
  return s;
}

bool SamePipeline(const Pipeline& a, const Pipeline& b) {
  return a.ranks == b.ranks && a.chunks == b.chunks && a.micro_batches == b.micro_batches && a.schedule == b.schedule &&
         a.MicroBatchGroup() == b.MicroBatchGroup() && a.overlap == b.overlap;
}

// True when every cost of `a` is at most that of `b`: then every plan of b is a plan of a that
// fits wherever it fits in b and is no slower (the iteration is a longest path, monotone in every
// duration; peaks are sums, monotone in every byte).
bool NoCostlier(const Signature& a, const Signature& b) {
  if (!SamePipeline(a.pipeline, b.pipeline) || a.entries.size() != b.entries.size()) return false;
  if (a.usable_bytes < b.usable_bytes || a.p2p_ns > b.p2p_ns) return false;
  for (std::size_t e = 0; e < a.entries.size(); ++e) {
    const Layer& la = a.entries[e];
    const Layer& lb = b.entries[e];
    if (la.static_bytes > lb.static_bytes || la.update_ns > lb.update_ns || la.p2p_ns > lb.p2p_ns ||
        la.options.size() != lb.options.size()) {
      return false;
    }
    // A split backward runs B (backward - W) and W apart: each must be no costlier.
    if (a.pipeline.SplitBackward() &&
        (la.weight_grad_ns > lb.weight_grad_ns || la.weight_grad_bytes > lb.weight_grad_bytes)) {
      return false;
    }
    for (std::size_t o = 0; o < la.options.size(); ++o) {
      const LayerOption& x = la.options[o];
      const LayerOption& y = lb.options[o];
      if (x.forward_ns > y.forward_ns || x.backward_ns > y.backward_ns || x.recompute_ns > y.recompute_ns ||
          x.saved_bytes > y.saved_bytes || x.peak_extra_bytes > y.peak_extra_bytes) {
        return false;
      }
      if (a.pipeline.SplitBackward() && x.backward_ns - la.weight_grad_ns > y.backward_ns - lb.weight_grad_ns) {
        return false;
      }
    }
  }
  return true;
}

// Per rank, the fewest micro-batches any of its stages holds at its first backward: every layer
// of the rank keeps at least that many activations at that moment (it runs the forward of
// micro-batch 0 on all its stages before the backward of micro-batch 0 on any of them).
std::vector<int> HeldAtFirstBackward(const Schedule& schedule) {
  const Pipeline& p = schedule.pipeline();
  std::vector<int> held(p.ranks, 0);
  for (RankIdx r = 0; r < p.ranks; ++r) {
    std::vector<int> forwards(p.chunks, 0);
    for (const Op& op : schedule.ops_of(r)) {
      if (op.kind == OpKind::kBackward) break;
      ++forwards[p.ChunkOf(op.stage)];
    }
    held[r] = *std::min_element(forwards.begin(), forwards.end());
  }
  return held;
}

// The least capacity some rank needs, over every assignment of layers to ranks (contiguity
// relaxed, each rank at least one layer per chunk): rank r can take k layers only if the k
// cheapest of (static + held_r x fewest saved bytes) fit. Reserved bytes included.
Bytes MemoryLowerBound(const Problem& problem, const Schedule& schedule) {
  const Pipeline& p = problem.pipeline;
  std::vector<int> held = HeldAtFirstBackward(schedule);
  // Ranks holding the same count share their sums; too many counts are rounded down to levels.
  std::vector<int> levels = held;
  std::sort(levels.begin(), levels.end());
  levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
  const std::int64_t n = problem.num_layers() + 1;
  const std::size_t most = static_cast<std::size_t>(std::max<std::int64_t>(1, kMemoryBoundEntries / n));
  if (levels.size() > most) {
    std::vector<int> fewer;  // evenly spaced, the smallest included, so every count has a level below it
    for (std::size_t i = 0; i < most; ++i) fewer.push_back(levels[i * levels.size() / most]);
    levels = fewer;
  }
  std::vector<int> level_of(p.ranks);
  for (RankIdx r = 0; r < p.ranks; ++r) {
    level_of[r] = static_cast<int>(std::upper_bound(levels.begin(), levels.end(), held[r]) - levels.begin() - 1);
  }
  std::vector<Bytes> fewest_saved;
  for (const Layer& layer : problem.layers) {
    Bytes saved = layer.options[0].saved_bytes;
    for (const LayerOption& o : layer.options) saved = std::min(saved, o.saved_bytes);
    fewest_saved.push_back(saved);
  }
  std::vector<std::vector<Bytes>> prefix(levels.size());  // per level: sums of the k cheapest layers
  for (std::size_t v = 0; v < levels.size(); ++v) {
    std::vector<Bytes> cost;
    for (LayerIdx l = 0; l < problem.num_layers(); ++l) {
      cost.push_back(problem.layers[l].static_bytes + levels[v] * fewest_saved[l]);
    }
    std::sort(cost.begin(), cost.end());
    prefix[v].assign(1, 0);
    for (Bytes c : cost) prefix[v].push_back(prefix[v].back() + c);
  }
  // Can every layer be placed with at most `capacity` bytes of layers per rank?
  auto placeable = [&](Bytes capacity) {
    long total = 0;
    for (RankIdx r = 0; r < p.ranks; ++r) {
      const std::vector<Bytes>& sums = prefix[level_of[r]];
      const long k = std::upper_bound(sums.begin(), sums.end(), capacity) - sums.begin() - 1;
      if (k < p.chunks) return false;
      total += k;
    }
    return total >= problem.num_layers();
  };
  Bytes lo = 0, hi = 0;
  for (const std::vector<Bytes>& sums : prefix) hi = std::max(hi, sums.back());
  while (lo < hi) {
    const Bytes mid = lo + (hi - lo) / 2;
    if (placeable(mid)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo + problem.reserved_bytes;
}

// Fills the throughput and memory figures of a planned configuration.
void Measure(const Problem& problem, const SearchOptions& options, double model_flops, double peak_flops,
             ConfigOutcome& out) {
  const SimResult sim = SimulatePlan(problem, out.planner.plan).value();
  const double seconds = ToSeconds(sim.iteration_ns);
  out.tokens_per_s = static_cast<double>(options.base.global_batch_size) * options.base.seq / seconds;
  out.mfu = model_flops / (seconds * options.devices * peak_flops);
  out.bubble = sim.bubble.ratio;
  double sum = 0;
  for (const RankResult& r : sim.ranks) {
    const double fraction = static_cast<double>(r.peak_memory_bytes) / static_cast<double>(DeviceMemoryBytes(problem));
    out.peak_memory_fraction = std::max(out.peak_memory_fraction, fraction);
    sum += fraction;
  }
  out.mean_memory_fraction = sum / static_cast<double>(sim.ranks.size());
}

Status CheckOptions(const SearchOptions& o) {
  if (o.devices < 1) return InvalidInput(fmt::format("--devices {} must be at least 1", o.devices));
  if (o.base.global_batch_size < 1) {
    return InvalidInput(fmt::format("--gbs {} must be at least 1 sequence", o.base.global_batch_size));
  }
  if (o.base.seq < 1) return InvalidInput(fmt::format("--seq {} must be at least 1 token", o.base.seq));
  if (o.top < 1) return InvalidInput(fmt::format("--top {} must be at least 1", o.top));
  if (o.threads < 0 || o.threads > kMaxThreads) {
    return InvalidInput(fmt::format("--threads {} must be from 0 (every hardware thread) to {}", o.threads, kMaxThreads));
  }
  if (o.plan_count < -1) {
    return InvalidInput(fmt::format("--plan-count {} must be -1 (every configuration not ruled out) or at least 0",
                                    o.plan_count));
  }
  if (o.node_limit < -1) {
    return InvalidInput(fmt::format("--node-limit {} must be -1 (no limit) or at least 0", o.node_limit));
  }
  if (o.time_budget_s < 0) return InvalidInput(fmt::format("--time-budget {} must not be negative", o.time_budget_s));
  for (const auto& [flag, values] : {std::pair<const char*, const std::vector<int>*>{"--tp", &o.tp},
                                     {"--pp", &o.pp},
                                     {"--vpp", &o.vpp},
                                     {"--mbs", &o.mbs},
                                     {"--cp", &o.cp},
                                     {"--ep", &o.ep},
                                     {"--etp", &o.etp}}) {
    for (int v : *values) {
      if (v < 1) return InvalidInput(fmt::format("{} {}: every value must be at least 1", flag, v));
    }
  }
  for (int z : o.zero) {
    if (z < 0 || z > 3) return InvalidInput(fmt::format("--zero {}: every stage must be 0, 1, 2 or 3", z));
  }
  return {};
}

}  // namespace

bool HasPlan(const ConfigOutcome& out) {
  return out.verdict == Verdict::kPlanned &&
         (out.planner.status == ModelStatus::kOptimal || out.planner.status == ModelStatus::kFeasible);
}

bool SearchConfig::operator<(const SearchConfig& o) const { return Key(*this) < Key(o); }

bool TiedByVirtualStages(const ConfigOutcome& ranked, const ConfigOutcome& c) {
  SearchConfig same = c.config;
  same.vpp = ranked.config.vpp;
  if (!(same == ranked.config) || !HasPlan(ranked) || !HasPlan(c)) return false;
  const double t = static_cast<double>(ranked.planner.iteration_ns);
  return std::abs(static_cast<double>(c.planner.iteration_ns) - t) <= t * std::max(ranked.planner.gap, c.planner.gap);
}
bool SearchConfig::operator==(const SearchConfig& o) const { return Key(*this) == Key(o); }

std::string DescribeConfig(const SearchConfig& c) {
  std::string out = fmt::format("tp {}", c.tp);
  if (c.cp > 1) out += fmt::format(", cp {}", c.cp);
  out += fmt::format(", pp {}, dp {}", c.pp, c.dp);
  if (c.ep > 1) out += fmt::format(", ep {}", c.ep);
  if (c.etp != c.tp) out += fmt::format(", etp {}", c.etp);
  out += fmt::format(", vpp {}, mbs {}", c.vpp, c.mbs);
  if (c.sequence_parallel) out += ", sequence parallel";
  if (c.zero == 1) out += ", distributed optimizer";
  if (c.zero > 1) out += fmt::format(", ZeRO-{}", c.zero);
  if (IsQuantized(c.precision)) out += fmt::format(", {}", PrecisionLabel(c.precision));
  if (c.schedule != ScheduleKind::kOneFOneB) out += fmt::format(", {}", ScheduleName(c.schedule));
  if (c.overlap) out += c.schedule == ScheduleKind::kOneFOneB ? ", combined 1F1B (overlapped pairs)" : ", overlapped pairs";
  return out;
}

Verdict VerdictOf(ModelStatus planned) {
  switch (planned) {
    case ModelStatus::kInfeasible:
      return Verdict::kNoFit;
    case ModelStatus::kNoSolution:
      return Verdict::kNotPlanned;
    case ModelStatus::kOptimal:
    case ModelStatus::kFeasible:
      return Verdict::kPlanned;
  }
  return Verdict::kPlanned;
}

std::string_view VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kDominated:
      return "dominated";
    case Verdict::kMemoryBound:
      return "cannot fit (memory bound)";
    case Verdict::kTimeBound:
      return "pruned (time bound)";
    case Verdict::kScreened:
      return "screened only";
    case Verdict::kNoFit:
      return "no plan fits (planner)";
    case Verdict::kPlanned:
      return "planned";
    case Verdict::kNotPlanned:
      return "not planned (time budget)";
  }
  return "?";
}

TrainingSetup SetupOf(const SearchOptions& options, const SearchConfig& c) {
  TrainingSetup s = options.base;
  s.tp = c.tp;
  s.pp = c.pp;
  s.dp = c.dp;
  s.vpp = c.vpp;
  s.micro_batch_size = c.mbs;
  s.sequence_parallel = c.sequence_parallel;
  s.zero = c.zero;
  s.distributed_optimizer = c.zero >= 1;
  s.cp = c.cp;
  s.ep = c.ep;
  s.etp = c.etp;
  s.precision = c.precision;
  s.schedule = c.schedule;
  // FP8 weights where the configuration runs FP8 GEMMs from a distributed optimizer, and their
  // transposes dropped where it runs FP8 GEMMs without Megatron-FSDP.
  s.fp8_params = options.base.fp8_params && IsQuantized(c.precision) && c.zero >= 1;
  s.no_fp8_transpose_cache = options.base.no_fp8_transpose_cache && IsQuantized(c.precision) && c.zero <= 2;
  // The expert-parallel overlap where megatron-core runs it: with expert parallelism and, when
  // pp > 1, interleaving.
  if (!(c.ep > 1 && (c.pp == 1 || c.vpp > 1))) s.ep_comm_overlap = 0;
  // Overlapped pairs hide the all-to-all by its size: the fixed fraction is not applied beside them.
  s.overlap_pairs = c.overlap;
  if (c.overlap) s.ep_comm_overlap = 0;
  s.devices = options.devices;
  if (options.headroom_of) s.headroom_bytes = options.headroom_of(s);
  return s;
}

Result<SearchResult> SearchConfigurations(const ModelSpec& model, const DeviceSpec& device, const SearchOptions& options) {
  Status ok = CheckOptions(options);
  if (!ok.ok()) return ok.error();
  ok = ValidateModel(model);
  if (!ok.ok()) return ok.error();
  const auto began = std::chrono::steady_clock::now();
  // Bounds every step: bounds, screening and planning (planner runs in flight stop at it too).
  const Deadline deadline =
      options.deadline.Earlier(options.time_budget_s > 0 ? Deadline::In(options.time_budget_s) : Deadline::Never());
  auto report = [&](const char* phase) {
    if (options.progress) options.progress(Progress{phase});
  };
  report("enumerating configurations");
  SearchResult result;
  result.threads = options.threads > 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  const int gbs = options.base.global_batch_size;
  const int max_stages = std::min(model.layers + 2, kMaxStages);
  DeadlinePoll enumerating(deadline);

  // 1. Every valid combination.
  struct Enumerated {
    SearchConfig config;
    int micro_batches = 0;
  };
  std::vector<Enumerated> enumerated;
  Error first_invalid = InvalidInput("");
  const std::vector<Precision> precisions =
      options.precision.empty() ? std::vector<Precision>{options.base.precision} : options.precision;
  std::vector<ScheduleKind> schedules{ScheduleKind::kOneFOneB};
  for (ScheduleKind kind : options.schedules) {
    if (kind != ScheduleKind::kOneFOneB) schedules.push_back(kind);
  }
  for (int tp : Divisors(device.devices_per_node)) {
    if (options.devices % tp != 0 || !Allowed(options.tp, tp)) continue;
    for (int cp : Divisors(options.devices / tp)) {
      if (options.cp.empty() ? cp > 1 && (!options.base.flash_attention || options.base.seq / cp < kMinContextTokens)
                             : !Allowed(options.cp, cp)) {
        continue;
      }
      for (int pp : Divisors(options.devices / tp / cp)) {
        if (pp > max_stages || !Allowed(options.pp, pp)) continue;
        const int dp = options.devices / (tp * cp * pp);
        if (gbs % dp != 0) continue;  // no micro-batch size divides the batch evenly
        const std::vector<std::pair<int, int>> experts = ExpertLayouts(model, options, tp, tp * cp * dp);
        const std::vector<int> zeros = ZeroStages(options, dp * cp);
        for (int mbs : Divisors(gbs / dp)) {
          if (!Allowed(options.mbs, mbs)) continue;
          const int m = gbs / dp / mbs;
          std::vector<int> vpps{1};
          for (int v = 2; pp > 1 && pp * v <= max_stages && TargetOf(options.target).Interleaves(); ++v) vpps.push_back(v);
          for (int vpp : vpps) {
            if (!Allowed(options.vpp, vpp)) continue;
            for (bool sp : {false, true}) {
              if (sp && tp == 1) continue;  // the same configuration
              for (int zero : zeros) {
                for (const auto& [ep, etp] : experts) {
                  for (Precision precision : precisions) {
                    for (ScheduleKind schedule : schedules) {
                     // With expert parallelism, the schedules with pairs run them in turn and overlapped.
                     const bool pairs = ep > 1 && (schedule == ScheduleKind::kDualPipe ||
                                                   schedule == ScheduleKind::kDualPipeV ||
                                                   (schedule == ScheduleKind::kOneFOneB && vpp > 1));
                     for (bool overlap : {false, true}) {
                      if (overlap && !pairs) continue;
                      // 1F1B interleaves with vpp > 1; the others run the chunks their row says.
                      const ScheduleTraits& traits = TraitsOf(schedule);
                      if (schedule != ScheduleKind::kOneFOneB && (vpp < traits.min_chunks || vpp > traits.max_chunks)) {
                        continue;
                      }
                      if (enumerating.Expired()) break;
                      ++result.combinations;
                      SearchConfig c{tp, pp, dp, vpp, mbs, sp, zero, cp, ep, etp, precision, schedule};
                      c.overlap = overlap;
                      const TrainingSetup setup = SetupOf(options, c);
                      Status valid = ValidateSetup(model, device, setup);
                      if (!valid.ok()) {
                        if (result.invalid++ == 0) first_invalid = valid.error();
                        continue;
                      }
                      // A setup the target's framework cannot run (DeepSpeed and ZeRO-2, say) is not enumerated.
                      if (options.target != TargetKind::kAny) {
                        const Pipeline pipeline = SetupPipeline(setup);
                        Status runs = TargetRunsSetup(options.target, SetupTrainingInfo(model, setup), &pipeline);
                        if (!runs.ok()) {
                          if (result.target_refused++ == 0 && result.invalid == 0) first_invalid = runs.error();
                          continue;
                        }
                      }
                      enumerated.push_back({c, m});
                     }
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  // Sorted as light records (an outcome carries plans), then made outcomes in that order.
  std::sort(enumerated.begin(), enumerated.end(),
            [](const Enumerated& a, const Enumerated& b) { return a.config < b.config; });
  result.configs.resize(enumerated.size());
  for (std::size_t i = 0; i < enumerated.size(); ++i) {
    result.configs[i].config = enumerated[i].config;
    result.configs[i].micro_batches = enumerated[i].micro_batches;
  }
  enumerated = {};
  if (result.configs.empty() && deadline.Expired()) {
    return TooLarge(fmt::format("the time budget ran out after {} combinations, before any valid one; restrict the "
                                "space with --tp, --pp, --vpp and --mbs, or raise --time-budget",
                                result.combinations));
  }
  if (deadline.Expired()) result.budget_exhausted = true;
  auto no_valid_configuration = [&] {
    return InvalidInput(fmt::format(
        "no valid configuration of {} devices for global batch {}: {} combinations tried{}{}; check --devices, --gbs, "
        "the --tp/--pp/--vpp/--mbs/--cp/--ep/--etp/--zero restrictions and --target",
        options.devices, gbs, result.combinations,
        result.invalid + result.target_refused > 0 ? ", the first rejected because: " : "",
        result.invalid + result.target_refused > 0 ? first_invalid.message : ""));
  };
  if (result.configs.empty()) return no_valid_configuration();
  int n = static_cast<int>(result.configs.size());

  // 2. Bounds and signatures, in parallel (each index writes its own slot).
  report("bounding configurations");
  result.model_flops = ModelFlopsPerIteration(model, device, options.base, options.mfu_attention);
  std::vector<Signature> signatures(n);
  std::vector<std::optional<Error>> build_errors(n);
  std::vector<char> bounded(n, 0);  // not when the time budget ran out first
  std::vector<Bytes> capacity(n, 0);  // the memory plans fit in: the device's less the headroom
  // With a budget, bounding takes at most half of it, leaving the rest to screening and planning,
  // and visits the configurations with a stride coprime with their count near n/phi, so that
  // those bounded before it runs out spread over the whole space, not a prefix of its key order.
  const Deadline bound_deadline = deadline.Share(kBoundShare);
  std::int64_t stride = std::max<std::int64_t>(1, std::llround(n * 0.6180339887));
  while (std::gcd(stride, static_cast<std::int64_t>(n)) != 1) ++stride;
  ParallelFor(n, result.threads, [&](int k) {
    if (bound_deadline.Expired()) return;
    const int i = static_cast<int>(static_cast<std::int64_t>(k) * stride % n);
    ConfigOutcome& out = result.configs[i];
    Result<Problem> problem = BuildProblem(model, device, SetupOf(options, out.config));
    if (!problem.ok()) {
      build_errors[i] = problem.error();
      return;
    }
    const Schedule schedule = Schedule(problem.value().pipeline);
    out.time_bound_ns = RankLoadBound(problem.value(), schedule);
    out.memory_bound_bytes = MemoryLowerBound(problem.value(), schedule);
    capacity[i] = problem.value().memory_bytes;
    if (!options.exhaustive) signatures[i] = SignatureOf(problem.value());
    bounded[i] = 1;
  });
  // A configuration whose costs lie beyond what a problem may hold (a sequence of millions of
  // tokens, say) is rejected like one the setup rules reject.
  std::vector<int> kept;
  std::optional<Error> first_build_error;
  for (int i = 0; i < n; ++i) {
    if (!build_errors[i]) {
      kept.push_back(i);
      continue;
    }
    if (build_errors[i]->kind != ErrorKind::kInvalidInput) {
      return InternalError(fmt::format("the cost model failed on a configuration ({}): {}",
                                       DescribeConfig(result.configs[i].config), build_errors[i]->message));
    }
    ++result.invalid;
    if (!first_build_error) first_build_error = build_errors[i];
  }
  if (static_cast<int>(kept.size()) < n) {
    for (std::size_t k = 0; k < kept.size(); ++k) {
      if (static_cast<int>(k) == kept[k]) continue;
      result.configs[k] = std::move(result.configs[kept[k]]);
      signatures[k] = std::move(signatures[kept[k]]);
      bounded[k] = bounded[kept[k]];
    }
    n = static_cast<int>(kept.size());
    result.configs.resize(n);
    signatures.resize(n);
    bounded.resize(n);
    if (n == 0) {
      return InvalidInput(fmt::format("none of the {} configurations the setup rules accept can be planned; the "
                                      "first: {}",
                                      build_errors.size(), first_build_error->message));
    }
  }

  std::vector<int> survivors;
  result.bound_seconds = SecondsSince(began);
  if (options.exhaustive) {
    for (int i = 0; i < n; ++i) {
      if (bounded[i]) survivors.push_back(i);
    }
  } else {
    // 3. Dominance within each pipeline shape; among equal signatures the first in key order stays.
    std::vector<int> order;
    for (int i = 0; i < n; ++i) {
      if (bounded[i]) order.push_back(i);
    }
    auto shape = [&](int i) {
      const Pipeline& p = signatures[i].pipeline;
      return std::make_tuple(p.ranks, p.chunks, p.micro_batches);
    };
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return shape(a) < shape(b); });
    for (std::size_t g = 0; g < order.size();) {
      std::size_t end = g;
      while (end < order.size() && shape(order[end]) == shape(order[g])) ++end;
      for (std::size_t x = g; x < end; ++x) {
        const int b = order[x];
        for (std::size_t y = g; y < end && result.configs[b].dominated_by < 0; ++y) {
          const int a = order[y];
          if (a == b || !NoCostlier(signatures[a], signatures[b])) continue;
          // Equal costs: keep the first in key order.
          if (NoCostlier(signatures[b], signatures[a]) && b < a) continue;
          result.configs[b].dominated_by = a;
        }
      }
      g = end;
    }
    for (int i = 0; i < n; ++i) {
      ConfigOutcome& out = result.configs[i];
      if (!bounded[i]) {
        out.verdict = Verdict::kNotPlanned;  // the time budget ran out before its bounds
      } else if (out.memory_bound_bytes > capacity[i]) {
        out.verdict = Verdict::kMemoryBound;
      } else if (out.dominated_by >= 0) {
        out.verdict = Verdict::kDominated;
      } else {
        survivors.push_back(i);
      }
    }
    // A chain of dominance ends at a configuration that is not dominated.
    for (int i = 0; i < n; ++i) {
      int& d = result.configs[i].dominated_by;
      while (d >= 0 && result.configs[d].dominated_by >= 0) d = result.configs[d].dominated_by;
    }
    std::stable_sort(survivors.begin(), survivors.end(),
                     [&](int a, int b) { return result.configs[a].time_bound_ns < result.configs[b].time_bound_ns; });
  }
  signatures.clear();
  signatures.shrink_to_fit();

  // 4. Screen, then plan, each in waves over a fixed order; a configuration whose time bound is
  // above the K-th best plan found so far (screened or planned) is pruned.
  std::vector<TimeNs> found;  // iteration times of plans found so far, sorted
  auto add_found = [&](TimeNs t) { found.insert(std::upper_bound(found.begin(), found.end(), t), t); };
  // Ranked configurations are the `top` fastest, or those within kTimeTie of the fastest (the
  // least memory first): neither may be pruned.
  auto threshold = [&]() -> TimeNs {
    if (options.exhaustive || static_cast<int>(found.size()) < options.top) return -1;
    return std::max(found[options.top - 1], static_cast<TimeNs>(static_cast<double>(found[0]) * (1 + kTimeTie)));
  };
  auto out_of_time = [&] { return deadline.Expired(); };
  // Runs `step` on `order` in waves until `limit` configurations have run (-1: all), marking those
  // the threshold prunes; returns the configurations that ran, in order.
  auto in_waves = [&](const std::vector<int>& order, int limit, const auto& step, const auto& after) {
    std::vector<int> ran;
    std::size_t next = 0;
    while (next < order.size() && (limit < 0 || static_cast<int>(ran.size()) < limit)) {
      const TimeNs bar = threshold();
      std::vector<int> wave;
      while (next < order.size() && static_cast<int>(wave.size()) < kWave &&
             (limit < 0 || static_cast<int>(ran.size() + wave.size()) < limit)) {
        ConfigOutcome& out = result.configs[order[next++]];
        if (bar >= 0 && out.time_bound_ns > bar) {
          out.verdict = Verdict::kTimeBound;
        } else {
          wave.push_back(static_cast<int>(&out - result.configs.data()));
        }
      }
      ParallelFor(static_cast<int>(wave.size()), result.threads, [&](int w) { step(result.configs[wave[w]]); });
      for (int i : wave) after(result.configs[i]);
      ran.insert(ran.end(), wave.begin(), wave.end());
    }
    return ran;
  };

  // 4a. Screening: a quick plan for each configuration.
  report("screening configurations");
  std::vector<int> planned_order = survivors;
  if (!options.exhaustive) {
    const std::vector<int> screened = in_waves(
        survivors, -1,
        [&](ConfigOutcome& out) {
          if (out_of_time()) {
            out.verdict = Verdict::kNotPlanned;
            return;
          }
          const Problem problem = BuildProblem(model, device, SetupOf(options, out.config)).value();
          std::optional<QuickPlan> quick = FindQuickPlan(problem, Schedule(problem.pipeline), deadline);
          // Only a plan the target runs may prune others.
          if (quick && options.target != TargetKind::kAny) {
            if (!TargetRunsPlan(problem, quick->plan, options.target)) quick.reset();
          }
          out.screen_ns = quick ? quick->iteration_ns : 0;
          if (quick) out.screen_plan = std::move(quick->plan);
          out.verdict = Verdict::kScreened;
        },
        [&](const ConfigOutcome& out) {
          if (out.screen_ns > 0) add_found(out.screen_ns);
        });
    result.screened = static_cast<int>(std::count_if(screened.begin(), screened.end(), [&](int i) {
      return result.configs[i].verdict == Verdict::kScreened;
    }));
    // Most promising first: by screened time; those the screen could not fit after, by their bound.
    planned_order = screened;
    std::stable_sort(planned_order.begin(), planned_order.end(), [&](int a, int b) {
      const TimeNs sa = result.configs[a].screen_ns, sb = result.configs[b].screen_ns;
      if ((sa > 0) != (sb > 0)) return sa > 0;
      return sa != sb ? sa < sb : false;
    });
  }

  result.screen_seconds = SecondsSince(began) - result.bound_seconds;

  // 4b. The exact planner.
  PlannerOptions planner;
  planner.kind = PlannerKind::kBranchAndBound;
  planner.time_limit_s = kNoTimeLimitS;  // limits are in work, not seconds: see node_limit
  planner.deadline = deadline;  // but a run in flight stops at the time budget
  planner.node_limit = options.node_limit;
  std::mutex progress_lock;
  Progress progress{"planning configurations"};
  progress.done = 0;
  progress.total = options.exhaustive || options.plan_count < 0
                       ? static_cast<int>(planned_order.size())
                       : std::min(options.plan_count, static_cast<int>(planned_order.size()));
  if (options.progress) options.progress(progress);
  in_waves(
      planned_order, options.exhaustive ? -1 : options.plan_count,
      [&](ConfigOutcome& out) {
        if (out_of_time()) {
          out.verdict = Verdict::kNotPlanned;
          return;
        }
        const Problem problem = BuildProblem(model, device, SetupOf(options, out.config)).value();
        Result<TargetPlan> planned = PlanForTarget(problem, options.target, planner);
        if (!planned.ok()) {
          out.verdict = Verdict::kNotPlanned;
          out.planner.stopped_by = planned.error().message;
          return;
        }
        out.planner = planned.value().planner;
        out.setting = planned.value().setting;
        out.verdict = VerdictOf(out.planner.status);
        if (HasPlan(out)) Measure(problem, options, result.model_flops, device.peak_flops, out);
        std::lock_guard<std::mutex> guard(progress_lock);
        ++progress.done;
        if (HasPlan(out)) {
          const double t = ToSeconds(out.planner.iteration_ns);
          if (progress.best_s < 0 || t < progress.best_s) progress.best_s = t;
        }
        if (options.progress) options.progress(progress);
      },
      [&](const ConfigOutcome& out) {
        if (HasPlan(out)) add_found(out.planner.iteration_ns);
        if (out.verdict == Verdict::kNotPlanned) result.budget_exhausted = true;
      });

  // 4c. A budget (or Ctrl-C) that ended the search before any exact plan: the fastest screened
  // configuration's quick plan (simulated, fits, runs on the target) is the answer, and says so.
  if (std::none_of(result.configs.begin(), result.configs.end(), [](const ConfigOutcome& o) { return HasPlan(o); })) {
    ConfigOutcome* quickest = nullptr;
    for (ConfigOutcome& out : result.configs) {
      if (out.screen_ns > 0 && (quickest == nullptr || out.screen_ns < quickest->screen_ns)) quickest = &out;
    }
    if (quickest != nullptr) {
      ConfigOutcome& out = *quickest;
      const Problem problem = BuildProblem(model, device, SetupOf(options, out.config)).value();
      PlannerResult& r = out.planner;
      r = PlannerResult{};
      r.solver = "quick plan";
      r.plan = out.screen_plan;
      r.iteration_ns = out.screen_ns;
      r.objective_ns = static_cast<double>(out.screen_ns);
      r.bound_ns = std::min(static_cast<double>(out.time_bound_ns), static_cast<double>(out.screen_ns));
      r.gap = (static_cast<double>(r.iteration_ns) - r.bound_ns) / static_cast<double>(r.iteration_ns);
      r.status = r.gap < kOptimalityTolerance ? ModelStatus::kOptimal : ModelStatus::kFeasible;
      r.stopped_by = std::string(options.deadline.Stopped() ? "the interruption" : "the time budget") +
                     " before the exact planner: the plan is the screening's quick one (one recomputation option "
                     "on every layer, equal compute per stage)";
      out.verdict = Verdict::kPlanned;
      Measure(problem, options, result.model_flops, device.peak_flops, out);
      result.budget_exhausted = true;
    }
  }
  for (ConfigOutcome& out : result.configs) out.screen_plan = Plan{};

  result.plan_seconds = SecondsSince(began) - result.bound_seconds - result.screen_seconds;

  // 5. Ranking and the bound over the whole space.
  std::vector<int> with_plan;
  for (int i = 0; i < n; ++i) {
    const ConfigOutcome& out = result.configs[i];
    ++result.count[static_cast<int>(out.verdict)];
    if (out.verdict == Verdict::kNotPlanned) result.budget_exhausted = true;
    if (HasPlan(out)) with_plan.push_back(i);
  }
  std::sort(with_plan.begin(), with_plan.end(), [&](int a, int b) {
    const TimeNs ta = result.configs[a].planner.iteration_ns, tb = result.configs[b].planner.iteration_ns;
    return ta != tb ? ta < tb : a < b;
  });
  if (!with_plan.empty()) {
    result.fastest = with_plan[0];
    // Those within kTimeTie of the fastest: the least memory first.
    const double tie = static_cast<double>(result.configs[with_plan[0]].planner.iteration_ns) * (1 + kTimeTie);
    const auto tied = std::find_if(with_plan.begin(), with_plan.end(), [&](int i) {
      return static_cast<double>(result.configs[i].planner.iteration_ns) > tie;
    });
    std::stable_sort(with_plan.begin(), tied, [&](int a, int b) {
      return result.configs[a].peak_memory_fraction < result.configs[b].peak_memory_fraction;
    });
  }
  // `top` rows: a configuration tied with a ranked one (TiedByVirtualStages) is ranked too, as
  // that row's tie, without taking a row.
  int rows = 0;
  for (int i : with_plan) {
    const bool tie = std::any_of(result.ranking.begin(), result.ranking.end(),
                                 [&](int r) { return TiedByVirtualStages(result.configs[r], result.configs[i]); });
    if (!tie && rows == options.top) break;
    result.ranking.push_back(i);
    rows += tie ? 0 : 1;
  }
  if (!with_plan.empty()) {
    const double best = static_cast<double>(result.configs[result.fastest].planner.iteration_ns);
    double bound = best;
    for (const ConfigOutcome& out : result.configs) {
      // Both the planner's bound and the rank-load bound hold for a planned configuration; a
      // target's planner stopped early may prove none (0), the rank-load bound still holds.
      if (out.verdict == Verdict::kPlanned) {
        bound = std::min(bound, std::max(out.planner.bound_ns, static_cast<double>(out.time_bound_ns)));
      }
      if (out.verdict == Verdict::kNotPlanned || out.verdict == Verdict::kTimeBound ||
          out.verdict == Verdict::kScreened) {
        bound = std::min(bound, static_cast<double>(out.time_bound_ns));
      }
    }
    result.bound_ns = bound;
    result.gap = (best - bound) / best;
  }
  result.interrupted = options.deadline.Stopped();
  result.seconds = SecondsSince(began);
  return result;
}

}  // namespace bmpipe
