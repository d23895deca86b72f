#include "bmpipe/solve/candidates.h"

#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>

namespace bmpipe {
namespace {

// An option mix over one or more run parts, with its aggregated costs.
struct Mix {
  std::vector<std::vector<int>> option_count;  // per part, per option
  TimeNs forward = 0, backward = 0, recompute = 0;
  Bytes saved = 0, transient = 0;
  // With overlapped pairs, the communication parts of forward and backward: mixes compare only
  // with mixes of the same communication (a pair's time grows with each part, not only with
  // forward and backward), which keeps the fronts exact.
  TimeNs forward_comm = 0, backward_comm = 0;

  auto Key() const { return std::tie(forward_comm, backward_comm, forward, backward, saved, transient, option_count); }
  bool SameComm(const Mix& other) const { return forward_comm == other.forward_comm && backward_comm == other.backward_comm; }

  // Adds another mix's costs (transient is a maximum, the rest add up).
  void AddCosts(const Mix& other) {
    forward += other.forward;
    backward += other.backward;
    recompute += other.recompute;
    saved += other.saved;
    transient = std::max(transient, other.transient);
    forward_comm += other.forward_comm;
    backward_comm += other.backward_comm;
  }
  // `comm`: whether the pipeline overlaps its pairs (else the communication parts are left at 0).
  static Mix OfOption(const LayerOption& o, bool comm) {
    Mix m;
    if (comm) {
      m.forward_comm = o.forward_comm_ns;
      m.backward_comm = o.backward_comm_ns;
    }
    m.forward = o.forward_ns;
    m.backward = o.backward_ns + o.recompute_ns;
    m.recompute = o.recompute_ns;
    m.saved = o.saved_bytes;
    m.transient = o.peak_extra_bytes;
    return m;
  }
};

// Bytes a vector of option counts holds: itself and its heap block, with the allocator's overhead.
std::int64_t CountsBytes(const std::vector<int>& counts) {
  return static_cast<std::int64_t>(sizeof(std::vector<int>) + 16 + counts.size() * sizeof(int));
}

// Bytes a mix holds (its option counts on the heap included).
std::int64_t MixBytes(const Mix& m) {
  std::int64_t bytes = sizeof(Mix);
  for (const std::vector<int>& counts : m.option_count) bytes += CountsBytes(counts);
  return bytes;
}

// What generation holds against its budget, and whether it must stop (the deadline, polled).
class Limiter {
 public:
  explicit Limiter(const CandidateLimits& limits) : limits_(limits), poll_(limits.deadline, 64) {}

  // Whether `bytes` more could be held now (for transient work).
  bool Affords(std::int64_t bytes) {
    if (held_ + bytes <= limits_.memory_budget_bytes) return true;
    OverBudget();
    return false;
  }
  // Holds `bytes` from now on; false (and stopped) when that is over the budget.
  bool Charge(std::int64_t bytes) {
    if (!Affords(bytes)) return false;
    held_ += bytes;
    return true;
  }
  bool CountCandidate() {
    if (++candidates_ <= limits_.max_candidates) return true;
    Stop(StopReason::kBudget,
         fmt::format("more than {} candidate blocks (about stages x layers per stage x recomputation mixes); fewer "
                     "layers (merge identical ones), fewer stages or fewer recomputation options per layer would help",
                     limits_.max_candidates));
    return false;
  }
  bool Stopped() {
    if (stop_ == StopReason::kNone && poll_.Expired()) Stop(StopReason::kDeadline, "the time limit");
    return stop_ != StopReason::kNone;
  }
  DeadlinePoll& poll() { return poll_; }
  StopReason stop() const { return stop_; }
  const std::string& reason() const { return reason_; }

 private:
  void OverBudget() {
    Stop(StopReason::kBudget,
         fmt::format("the candidate blocks need more than their memory budget of {} MiB (the Pareto fronts of "
                     "recomputation mixes grow with the layers a stage can hold and the options per layer); more "
                     "stages, fewer layers (merge identical ones) or fewer recomputation options per layer would help",
                     limits_.memory_budget_bytes >> 20));
  }
  void Stop(StopReason stop, std::string reason) {
    if (stop_ != StopReason::kNone) return;
    stop_ = stop;
    reason_ = std::move(reason);
  }

  const CandidateLimits& limits_;
  DeadlinePoll poll_;
  std::int64_t held_ = 0;
  long candidates_ = 0;
  StopReason stop_ = StopReason::kNone;
  std::string reason_;
};

// The indices (among `which`) of the mixes no other of them dominates, in Key order; among equal
// ones the first in Key order. Dominance is in (forward, backward), and with `with_memory` also
// in (saved, transient). Stops early (with part of the front) when `poll` expires.
std::vector<std::size_t> ParetoIndicesOfSorted(const std::vector<Mix>& mixes, const std::vector<std::size_t>& which,
                                               bool with_memory, DeadlinePoll* poll);
std::vector<std::size_t> ParetoIndices(const std::vector<Mix>& mixes, std::vector<std::size_t> which, bool with_memory,
                                       DeadlinePoll* poll = nullptr) {
  // Ties in Key (mixes given without option counts) keep their given order.
  std::stable_sort(which.begin(), which.end(), [&](std::size_t a, std::size_t b) { return mixes[a].Key() < mixes[b].Key(); });
  // Mixes of different communication parts (Mix::forward_comm) do not dominate each other: one
  // front per group of equal parts, in Key order.
  if (which.empty() || mixes[which.front()].SameComm(mixes[which.back()])) {
    return ParetoIndicesOfSorted(mixes, which, with_memory, poll);
  }
  std::vector<std::size_t> front;
  for (std::size_t begin = 0; begin < which.size();) {
    std::size_t end = begin + 1;
    while (end < which.size() && mixes[which[end]].SameComm(mixes[which[begin]])) ++end;
    const std::vector<std::size_t> group(which.begin() + begin, which.begin() + end);
    for (std::size_t i : ParetoIndicesOfSorted(mixes, group, with_memory, poll)) front.push_back(i);
    begin = end;
  }
  return front;
}

// ParetoIndices of mixes in Key order, all of the same communication parts.
std::vector<std::size_t> ParetoIndicesOfSorted(const std::vector<Mix>& mixes, const std::vector<std::size_t>& which,
                                               bool with_memory, DeadlinePoll* poll) {
  std::vector<std::size_t> front;
  if (!with_memory) {
    // In (forward, backward) order a mix is dominated iff an earlier one has no larger backward.
    for (std::size_t i : which) {
      if (front.empty() || mixes[i].backward < mixes[front.back()].backward) front.push_back(i);
    }
    return front;
  }
  // Every mix that can dominate m comes before it, with no larger forward. Per transient level
  // (few distinct values), a staircase of the front's (backward, saved) with transient at most
  // that level answers "is some earlier mix no worse in backward and saved" in O(log n): the
  // entry with the largest backward <= m's has the least saved.
  std::vector<Bytes> levels;
  for (std::size_t i : which) levels.push_back(mixes[i].transient);
  std::sort(levels.begin(), levels.end());
  levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
  std::vector<std::map<TimeNs, Bytes>> stairs(levels.size());  // backward -> least saved
  for (std::size_t i : which) {
    if (poll != nullptr && poll->Expired()) break;
    const Mix& m = mixes[i];
    const std::size_t level = std::lower_bound(levels.begin(), levels.end(), m.transient) - levels.begin();
    const std::map<TimeNs, Bytes>& stair = stairs[level];
    auto it = stair.upper_bound(m.backward);
    if (it != stair.begin() && std::prev(it)->second <= m.saved) continue;  // dominated
    for (std::size_t l = level; l < levels.size(); ++l) {
      std::map<TimeNs, Bytes>& s = stairs[l];
      auto at = s.upper_bound(m.backward);
      if (at != s.begin() && std::prev(at)->second <= m.saved) continue;  // this level already has better
      // Drop the entries m makes redundant (backward >= m's, saved >= m's), then add m.
      auto drop = s.lower_bound(m.backward);
      while (drop != s.end() && drop->second >= m.saved) drop = s.erase(drop);
      s[m.backward] = m.saved;
    }
    front.push_back(i);
  }
  return front;
}

// The mixes no other mix dominates (ParetoIndices over all of them).
std::vector<Mix> ParetoFront(std::vector<Mix> mixes, bool with_memory, DeadlinePoll* poll) {
  std::vector<std::size_t> all(mixes.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  std::vector<Mix> front;
  for (std::size_t i : ParetoIndices(mixes, std::move(all), with_memory, poll)) front.push_back(std::move(mixes[i]));
  return front;
}

// Pareto fronts of the mixes of k layers of each run, built one layer at a time: a mix dominated
// at k-1 layers stays dominated after adding the same option.
class RunFronts {
 public:
  RunFronts(const Problem& problem, const std::vector<LayerRun>& runs, const StageSpace& space, Limiter& limiter)
      : problem_(problem), runs_(runs), space_(space), limiter_(limiter),
        fronts_(std::max<std::size_t>(1, space.families.size()), std::vector<std::vector<std::vector<Mix>>>(runs.size())) {}

  // The front of k layers of `run` whose options family `family` allows. Empty when the limiter
  // stopped generation.
  const std::vector<Mix>& Get(std::size_t family, int run, int k) {
    std::vector<std::vector<Mix>>& f = fronts_[family][run];
    if (f.empty()) {
      Mix empty;
      empty.option_count.assign(1, std::vector<int>(Options(run).size(), 0));
      f.push_back({empty});
    }
    while (static_cast<int>(f.size()) <= k) {
      std::vector<Mix> next;
      const std::vector<LayerOption>& options = Options(run);
      const std::int64_t each = f.back().empty() ? 0 : MixBytes(f.back().front());
      if (limiter_.Stopped() ||
          !limiter_.Affords(each * static_cast<std::int64_t>(f.back().size() * options.size()))) {
        return empty_;
      }
      for (const Mix& m : f.back()) {
        for (std::size_t o = 0; o < options.size(); ++o) {
          if (!space_.families.empty() && !(space_.families[family][runs_[run].begin] >> o & 1u)) continue;
          Mix n = m;
          n.option_count[0][o] += 1;
          n.AddCosts(Mix::OfOption(options[o], problem_.pipeline.overlap));
          next.push_back(std::move(n));
        }
      }
      f.push_back(ParetoFront(std::move(next), /*with_memory=*/true, &limiter_.poll()));
      if (limiter_.Stopped() || !limiter_.Charge(each * static_cast<std::int64_t>(f.back().size()))) return empty_;
    }
    return f[k];
  }

 private:
  const std::vector<LayerOption>& Options(int run) const { return problem_.layers[runs_[run].begin].options; }

  const Problem& problem_;
  const std::vector<LayerRun>& runs_;
  const StageSpace& space_;
  Limiter& limiter_;
  std::vector<std::vector<std::vector<std::vector<Mix>>>> fronts_;  // per family, run, k
  const std::vector<Mix> empty_;
};

// Minkowski sum of the fronts of a shape's parts, pruned after each part. Empty when the limiter
// stopped generation.
std::vector<Mix> ShapeMixes(RunFronts& fronts, std::size_t family, const std::vector<std::pair<int, int>>& shape,
                            Limiter& limiter) {
  std::vector<Mix> mixes(1);
  for (const auto& [run, count] : shape) {
    // Costs of every pair first (no option counts: cheap), then only the front is built.
    const std::vector<Mix>& part = fronts.Get(family, run, count);
    if (limiter.Stopped() ||
        !limiter.Affords(static_cast<std::int64_t>((sizeof(Mix) + sizeof(std::size_t)) * mixes.size() * part.size()))) {
      return {};
    }
    std::vector<Mix> costs;
    std::vector<std::size_t> all;
    for (const Mix& a : mixes) {
      for (const Mix& b : part) {
        Mix n;
        n.forward = a.forward;
        n.backward = a.backward;
        n.recompute = a.recompute;
        n.saved = a.saved;
        n.transient = a.transient;
        n.forward_comm = a.forward_comm;
        n.backward_comm = a.backward_comm;
        n.AddCosts(b);
        all.push_back(costs.size());
        costs.push_back(n);
      }
    }
    std::vector<Mix> next;
    for (std::size_t i : ParetoIndices(costs, std::move(all), /*with_memory=*/true, &limiter.poll())) {
      Mix n = mixes[i / part.size()];
      n.option_count.push_back(part[i % part.size()].option_count[0]);
      n.AddCosts(part[i % part.size()]);
      next.push_back(std::move(n));
    }
    mixes = std::move(next);
    if (limiter.Stopped()) return {};
  }
  return mixes;
}

struct StageContext {
  StageIdx stage;
  int chunk;
  const std::vector<MemoryRow>* rows;
  Bytes budget;  // capacity - reserved
};

// Memory of the stage's own contribution under every row; the rows of the other chunks add
// non-negative terms, so exceeding the budget here rules the candidate out.
bool FitsAlone(const StageContext& ctx, Bytes static_bytes, Bytes saved, Bytes weight_grad, Bytes transient) {
  for (const MemoryRow& row : *ctx.rows) {
    if (static_bytes + row.ChunkBytes(ctx.chunk, saved, weight_grad, transient) > ctx.budget) return false;
  }
  return true;
}

}  // namespace

TimeNs LeastLayerWork(const Problem& problem, LayerIdx l) {
  TimeNs least_forward = -1, least_backward = -1;
  const bool pairs = problem.pipeline.overlap;
  for (const LayerOption& o : problem.layers[l].options) {
    const TimeNs f = o.forward_ns - (pairs ? o.forward_comm_ns : 0);
    const TimeNs b = o.backward_ns + o.recompute_ns - (pairs ? o.backward_comm_ns : 0);
    least_forward = least_forward < 0 ? f : std::min(least_forward, f);
    least_backward = least_backward < 0 ? b : std::min(least_backward, b);
  }
  return std::max<TimeNs>(0, least_forward) + std::max<TimeNs>(0, least_backward);
}

int MicroBatchesPerCopy(const Pipeline& pipeline) { return pipeline.micro_batches / pipeline.Copies(); }

OptionIdx FastestOption(const Layer& layer) {
  for (OptionIdx o = 0; o < static_cast<OptionIdx>(layer.options.size()); ++o) {
    const Mix m = Mix::OfOption(layer.options[o], false);
    bool dominates = true;
    for (const LayerOption& other : layer.options) {
      const Mix x = Mix::OfOption(other, false);
      dominates = dominates && m.forward <= x.forward && m.backward <= x.backward;
    }
    if (dominates) return o;
  }
  return -1;
}

namespace {

class Generator {
 public:
  Generator(const Problem& problem, const StageSpace& space, Candidates& out, Limiter& limiter, TimeNs time_cap_ns)
      : problem_(problem), space_(space), out_(out), limiter_(limiter), fronts_(problem, out.runs, space, limiter),
        time_cap_ns_(time_cap_ns) {
    for (const LayerRun& run : out.runs) {
      const Layer& layer = problem.layers[run.begin];
      Bytes min_saved = layer.options[0].saved_bytes, min_transient = layer.options[0].peak_extra_bytes;
      for (const LayerOption& o : layer.options) {
        min_saved = std::min(min_saved, o.saved_bytes);
        min_transient = std::min(min_transient, o.peak_extra_bytes);
      }
      min_saved_.push_back(min_saved);
      min_transient_.push_back(min_transient);
      fastest_.push_back(FastestOption(layer));
      least_work_.push_back(LeastLayerWork(problem, run.begin));
    }
    // With one chunk per rank (the memory check of a stage's candidate is exact), an unrestricted
    // space and no overlapped pairs (whose time is not monotone in forward and backward alone).
    fastest_prunes_ = out.memory_exact && space.families.empty() && space.block < 0 && !problem.pipeline.overlap &&
                      std::all_of(fastest_.begin(), fastest_.end(), [](OptionIdx o) { return o >= 0; });
  }

  void Stage(const StageContext& ctx) {
    const int n = problem_.num_layers();
    const int stages = problem_.pipeline.stages();
    const LayerIdx first_lo = ctx.stage;                        // every earlier stage has a layer
    const LayerIdx end_hi = n - (stages - 1 - ctx.stage);       // every later stage has a layer
    const std::vector<LayerRun>& runs = out_.runs;
    for (int g = 0; g < static_cast<int>(runs.size()); ++g) {
      // Inside run g: k layers starting anywhere in [lo, hi].
      for (int k = 1; k <= runs[g].size(); ++k) {
        if (limiter_.Stopped()) return;
        if (!MayFit(ctx, {{g, k}}) || !MayBeFaster({{g, k}})) break;
        LayerIdx lo = std::max(runs[g].begin, first_lo);
        LayerIdx hi = std::min(runs[g].end - k, end_hi - k);
        if (ctx.stage == 0) hi = std::min(hi, 0);               // the first stage starts at layer 0
        if (ctx.stage == stages - 1) lo = std::max(lo, n - k);  // the last one ends at the last layer
        if (lo <= hi) Add(ctx, {{g, k}}, lo, hi);
      }
      // From the last k_g layers of run g into run h.
      for (int k_g = 1; k_g <= runs[g].size(); ++k_g) {
        const LayerIdx start = runs[g].end - k_g;
        if (start < first_lo || (ctx.stage == 0 && start != 0)) continue;
        std::vector<std::pair<int, int>> shape = {{g, k_g}};
        bool stop = false;
        for (int h = g + 1; h < static_cast<int>(runs.size()) && !stop; ++h) {
          for (int k_h = 1; k_h <= runs[h].size(); ++k_h) {
            if (limiter_.Stopped()) return;
            shape.push_back({h, k_h});
            const LayerIdx end = runs[h].begin + k_h;
            if (end > end_hi || !MayFit(ctx, shape) || !MayBeFaster(shape)) {
              shape.pop_back();
              stop = true;
              break;
            }
            if (ctx.stage != stages - 1 || end == n) Add(ctx, shape, start, start);
            shape.pop_back();
          }
          shape.push_back({h, runs[h].size()});  // run h whole, continue into h+1
        }
      }
    }
  }

 private:
  // Whether a plan with this block can beat the known plan (CandidateLimits::time_cap_ns): its
  // rank runs the block's forward and backward for every micro-batch of its copy.
  bool MayBeFaster(const std::vector<std::pair<int, int>>& shape) const {
    if (time_cap_ns_ <= 0) return true;
    TimeNs work = 0;
    for (const auto& [run, count] : shape) work += count * least_work_[run];
    return static_cast<double>(work) * MicroBatchesPerCopy(problem_.pipeline) < static_cast<double>(time_cap_ns_);
  }

  // A lower bound on the stage's memory for a shape: most memory-saving option everywhere.
  bool MayFit(const StageContext& ctx, const std::vector<std::pair<int, int>>& shape) const {
    Bytes static_bytes = 0, saved = 0, weight_grad = 0, transient = 0;
    for (const auto& [run, count] : shape) {
      const Layer& layer = problem_.layers[out_.runs[run].begin];
      static_bytes += count * layer.static_bytes;
      weight_grad += count * layer.weight_grad_bytes;
      saved += count * min_saved_[run];
      transient = std::max(transient, min_transient_[run]);
    }
    return FitsAlone(ctx, static_bytes, saved, weight_grad, transient);
  }

  // Every layer of the shape at its run's fastest option.
  Mix FastestMix(const std::vector<std::pair<int, int>>& shape) const {
    Mix mix;
    for (const auto& [run, count] : shape) {
      const std::vector<LayerOption>& options = problem_.layers[out_.runs[run].begin].options;
      std::vector<int> counts(options.size(), 0);
      counts[fastest_[run]] = count;
      const Mix one = Mix::OfOption(options[fastest_[run]], false);
      for (int i = 0; i < count; ++i) mix.AddCosts(one);
      mix.option_count.push_back(std::move(counts));
    }
    return mix;
  }

  // The one mix of Megatron's block recomputation for a shape.
  Mix BlockMix(const std::vector<std::pair<int, int>>& shape) const {
    Mix mix;
    int left = space_.block;
    for (const auto& [run, count] : shape) {
      const LayerIdx l = out_.runs[run].begin;
      const std::vector<LayerOption>& options = problem_.layers[l].options;
      std::vector<int> counts(options.size(), 0);
      const OptionIdx block = space_.block_option[l];
      const int blocked = block >= 0 ? std::min(count, left) : 0;
      left -= blocked;
      const OptionIdx other = space_.FirstAllowed(l);
      for (int i = 0; i < count; ++i) {
        const OptionIdx o = i < blocked ? block : other;
        ++counts[o];
        mix.AddCosts(Mix::OfOption(options[o], problem_.pipeline.overlap));
      }
      mix.option_count.push_back(std::move(counts));
    }
    return mix;
  }

  // The mixes of a shape: the union of its families' fronts, pruned, or the block mix.
  std::vector<Mix> Mixes(const std::vector<std::pair<int, int>>& shape) {
    if (space_.block >= 0) return {BlockMix(shape)};
    const std::size_t families = std::max<std::size_t>(1, space_.families.size());
    if (families == 1) return ShapeMixes(fronts_, 0, shape, limiter_);
    std::vector<Mix> all;
    for (std::size_t f = 0; f < families; ++f) {
      std::vector<Mix> mixes = ShapeMixes(fronts_, f, shape, limiter_);
      if (limiter_.Stopped()) return {};
      for (Mix& m : mixes) all.push_back(std::move(m));
    }
    return ParetoFront(std::move(all), /*with_memory=*/true, &limiter_.poll());
  }

  void Add(const StageContext& ctx, const std::vector<std::pair<int, int>>& shape, LayerIdx start_min,
           LayerIdx start_max) {
    if (!space_.needs_one_of.empty() &&
        std::none_of(shape.begin(), shape.end(), [&](const auto& part) { return space_.needs_one_of[out_.runs[part.first].begin]; })) {
      return;
    }
    Bytes static_bytes = 0, weight_grad_bytes = 0;
    TimeNs update = 0, weight_grad = 0;
    int length = 0;
    for (const auto& [run, count] : shape) {
      const Layer& layer = problem_.layers[out_.runs[run].begin];
      static_bytes += count * layer.static_bytes;
      update += count * layer.update_ns;
      weight_grad += count * layer.weight_grad_ns;
      weight_grad_bytes += count * layer.weight_grad_bytes;
      length += count;
    }
    // When the fastest mix (every layer at its fastest option) fits this stage, it is the stage's
    // one candidate of the shape: any plan with another mix there is no faster with it, and still
    // fits (the memory check is exact). Memory-loose stages then need no Pareto front at all.
    std::vector<Mix> fastest;
    if (fastest_prunes_) {
      Mix f = FastestMix(shape);
      if (FitsAlone(ctx, static_bytes, f.saved, weight_grad_bytes, f.transient)) fastest.push_back(std::move(f));
    }
    // A shape's mixes do not depend on the stage: computed once, shared by every stage.
    auto cached = shape_mixes_.end();
    if (fastest.empty()) {
      cached = shape_mixes_.find(shape);
      if (cached == shape_mixes_.end()) {
        std::vector<Mix> mixes = Mixes(shape);
        std::int64_t bytes = 0;
        for (const Mix& m : mixes) bytes += MixBytes(m);
        if (limiter_.Stopped() || !limiter_.Charge(bytes)) return;
        cached = shape_mixes_.emplace(shape, std::move(mixes)).first;
      }
    }
    const std::vector<Mix>& all = fastest.empty() ? cached->second : fastest;
    std::vector<std::size_t> fitting;
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (FitsAlone(ctx, static_bytes, all[i].saved, weight_grad_bytes, all[i].transient)) fitting.push_back(i);
    }
    // With one chunk per rank the memory check above is exact: only time still matters.
    const Layer& last = problem_.layers[out_.runs[shape.back().first].begin];
    for (std::size_t chosen : ParetoIndices(all, std::move(fitting), /*with_memory=*/!out_.memory_exact)) {
      const Mix& m = all[chosen];
      Candidate c;
      c.length = length;
      c.start_min = start_min;
      c.start_max = start_max;
      for (std::size_t i = 0; i < shape.size(); ++i) {
        c.parts.push_back({shape[i].first, shape[i].second, m.option_count[i]});
      }
      c.cost = StageCost{m.forward,   m.backward,        m.recompute,    m.saved,         m.transient,
                         last.p2p_ns, weight_grad,       weight_grad_bytes, m.forward_comm, m.backward_comm};
      c.static_bytes = static_bytes;
      c.update_ns = update;
      std::int64_t bytes = sizeof(Candidate);
      for (const RunPart& part : c.parts) bytes += sizeof(RunPart) - sizeof(std::vector<int>) + CountsBytes(part.option_count);
      if (!limiter_.CountCandidate() || !limiter_.Charge(bytes)) return;
      out_.per_stage[ctx.stage].push_back(std::move(c));
    }
  }

  const Problem& problem_;
  const StageSpace& space_;
  Candidates& out_;
  Limiter& limiter_;
  RunFronts fronts_;
  std::map<std::vector<std::pair<int, int>>, std::vector<Mix>> shape_mixes_;
  std::vector<Bytes> min_saved_;
  std::vector<Bytes> min_transient_;
  std::vector<OptionIdx> fastest_;  // per run: its fastest option (FastestMix), -1 when none is
  bool fastest_prunes_ = false;
  std::vector<TimeNs> least_work_;  // per run: the least forward + backward of one of its layers
  TimeNs time_cap_ns_ = 0;          // CandidateLimits::time_cap_ns
};

}  // namespace

std::vector<LayerRun> FindRuns(const Problem& problem) {
  std::vector<LayerRun> runs;
  for (LayerIdx l = 0; l < problem.num_layers(); ++l) {
    if (!runs.empty() && SameCosts(problem.layers[runs.back().begin], problem.layers[l])) {
      runs.back().end = l + 1;
    } else {
      runs.push_back({l, l + 1});
    }
  }
  return runs;
}

namespace {

// The rows of PeakMemoryRows; with a limiter, they stop (incomplete) when it stops: on long
// interleaved pipelines they take O(ops x rows kept x chunks), seconds at the largest sizes.
std::vector<std::vector<MemoryRow>> MemoryRowsOf(const Schedule& schedule, Limiter* limiter) {
  const Pipeline& p = schedule.pipeline();
  std::vector<std::vector<MemoryRow>> rows(p.ranks);
  auto covers = [&](const MemoryRow& a, const MemoryRow& b) {
    if (a.transient_chunk != b.transient_chunk) return false;
    for (int c = 0; c < p.chunks; ++c) {
      if (b.in_flight[c] > a.in_flight[c] || b.held[c] > a.held[c]) return false;
    }
    return true;
  };
  for (RankIdx r = 0; r < p.ranks; ++r) {
    // Keep the rows no other row with the same transient chunk covers, as they come (holding every
    // row of a rank would take ops x chunks counts), then in a fixed order.
    std::vector<MemoryRow>& kept = rows[r];
    MemoryRow row{std::vector<int>(p.chunks, 0), std::vector<int>(p.chunks, 0), 0};
    for (const Op& op : schedule.ops_of(r)) {
      if (limiter != nullptr && limiter->Stopped()) return rows;
      row.transient_chunk = p.ChunkOf(op.stage);  // while the op runs (a backward's own activations still held)
      if (std::none_of(kept.begin(), kept.end(), [&](const MemoryRow& k) { return covers(k, row); })) {
        kept.erase(std::remove_if(kept.begin(), kept.end(), [&](const MemoryRow& k) { return covers(row, k); }),
                   kept.end());
        kept.push_back(row);
      }
      const MemoryEffect effect = schedule.EffectOf(op.kind);
      row.in_flight[row.transient_chunk] += effect.saved;
      row.held[row.transient_chunk] += effect.held;
    }
    std::sort(kept.begin(), kept.end(), [](const MemoryRow& a, const MemoryRow& b) {
      return std::tie(a.transient_chunk, a.in_flight, a.held) > std::tie(b.transient_chunk, b.in_flight, b.held);
    });
  }
  return rows;
}

// Runs split where the space treats neighbouring layers differently.
std::vector<LayerRun> SplitRuns(const std::vector<LayerRun>& runs, const StageSpace& space) {
  auto same = [&](LayerIdx a, LayerIdx b) {
    for (const std::vector<std::uint16_t>& family : space.families) {
      if (family[a] != family[b]) return false;
    }
    if (!space.block_option.empty() && space.block_option[a] != space.block_option[b]) return false;
    return space.needs_one_of.empty() || space.needs_one_of[a] == space.needs_one_of[b];
  };
  std::vector<LayerRun> split;
  for (const LayerRun& run : runs) {
    split.push_back({run.begin, run.begin + 1});
    for (LayerIdx l = run.begin + 1; l < run.end; ++l) {
      if (same(l - 1, l)) {
        split.back().end = l + 1;
      } else {
        split.push_back({l, l + 1});
      }
    }
  }
  return split;
}

}  // namespace

std::vector<std::vector<MemoryRow>> PeakMemoryRows(const Schedule& schedule) { return MemoryRowsOf(schedule, nullptr); }

OptionIdx StageSpace::FirstAllowed(LayerIdx l) const {
  if (families.empty()) return 0;
  const std::uint16_t mask = families.front()[l];
  for (OptionIdx o = 0; o < kMaxOptionsPerLayer; ++o) {
    if (mask >> o & 1u) return o;
  }
  return 0;
}

bool StageSpace::Contains(const Plan& plan) const {
  for (StageIdx s = 0; s < plan.num_stages(); ++s) {
    if (!needs_one_of.empty() &&
        std::none_of(needs_one_of.begin() + plan.begin(s), needs_one_of.begin() + plan.end(s), [](bool b) { return b; })) {
      return false;
    }
    if (block >= 0) continue;  // checked below
    if (families.empty()) continue;
    const bool one = std::any_of(families.begin(), families.end(), [&](const std::vector<std::uint16_t>& family) {
      for (LayerIdx l = plan.begin(s); l < plan.end(s); ++l) {
        if (!(family[l] >> plan.option[l] & 1u)) return false;
      }
      return true;
    });
    if (!one) return false;
  }
  if (!order.empty()) {
    for (StageIdx s = 0; s < plan.num_stages(); ++s) {
      int last = -1;
      for (LayerIdx l = plan.begin(s); l < plan.end(s); ++l) {
        const int rank = order[l][plan.option[l]];
        if (rank < 0) continue;
        if (rank < last) return false;
        last = rank;
      }
    }
  }
  if (block >= 0) {
    Plan fixed = plan;
    AssignFixed(fixed);
    return fixed.option == plan.option;
  }
  return true;
}

void StageSpace::AssignFixed(Plan& plan) const {
  for (StageIdx s = 0; s < plan.num_stages(); ++s) {
    int left = block;
    for (LayerIdx l = plan.begin(s); l < plan.end(s); ++l) {
      const bool blocked = block >= 0 && block_option[l] >= 0 && left > 0;
      if (blocked) --left;
      plan.option[l] = blocked ? block_option[l] : FirstAllowed(l);
    }
  }
}

Candidates GenerateCandidates(const Problem& problem, const Schedule& schedule, const CandidateLimits& limits) {
  static const StageSpace kUnrestricted;
  const StageSpace& space = limits.space != nullptr ? *limits.space : kUnrestricted;
  Candidates out;
  out.runs = FindRuns(problem);
  if (!space.unrestricted()) out.runs = SplitRuns(out.runs, space);
  Limiter limiter(limits);
  out.memory_rows = MemoryRowsOf(schedule, &limiter);
  out.memory_exact = problem.pipeline.chunks == 1;
  out.per_stage.resize(problem.pipeline.stages());
  Generator generator(problem, space, out, limiter, limits.time_cap_ns);
  for (StageIdx s = 0; s < problem.pipeline.stages(); ++s) {
    if (limiter.Stopped()) break;
    const RankIdx r = problem.pipeline.RankOf(s);
    generator.Stage({s, problem.pipeline.ChunkOf(s), &out.memory_rows[r], problem.memory_bytes - problem.reserved_bytes});
    // A fixed order, shortest blocks first: branch and bound splits candidate index ranges.
    std::stable_sort(out.per_stage[s].begin(), out.per_stage[s].end(), [](const Candidate& a, const Candidate& b) {
      return std::tie(a.length, a.start_min, a.start_max, a.cost.backward_ns, a.cost.forward_ns, a.cost.saved_bytes,
                      a.cost.transient_bytes, a.cost.forward_comm_ns, a.cost.backward_comm_ns) <
             std::tie(b.length, b.start_min, b.start_max, b.cost.backward_ns, b.cost.forward_ns, b.cost.saved_bytes,
                      b.cost.transient_bytes, b.cost.forward_comm_ns, b.cost.backward_comm_ns);
    });
  }
  out.stop = limiter.stop();
  out.stop_reason = limiter.reason();
  return out;
}

void AssignOptions(const Candidate& candidate, LayerIdx start, Plan& plan) {
  LayerIdx l = start;
  for (const RunPart& part : candidate.parts) {
    for (std::size_t o = 0; o < part.option_count.size(); ++o) {
      for (int i = 0; i < part.option_count[o]; ++i) plan.option[l++] = static_cast<OptionIdx>(o);
    }
  }
}

Bytes RankPeakMemory(const Problem& problem, const Candidates& candidates, RankIdx r,
                     const std::vector<const Candidate*>& stage_candidates) {
  const Pipeline& p = problem.pipeline;
  Bytes peak = 0;
  for (const MemoryRow& row : candidates.memory_rows[r]) {
    Bytes m = problem.reserved_bytes;
    for (int c = 0; c < p.chunks; ++c) {
      const Candidate* cand = stage_candidates[p.StageAt(r, c)];
      m += cand->static_bytes + row.ChunkBytes(c, cand->cost);
    }
    peak = std::max(peak, m);
  }
  return peak;
}

}  // namespace bmpipe
