// The plan Megatron-LM's flags give a configuration as a user launches it (megatron.h,
// MegatronDefaultPlan): the splits of megatron/core/transformer/transformer_block.py. The decoder
// layers divided equally over the p*v stages; or with --account-for-embedding-in-pipeline-split /
// --account-for-loss-in-pipeline-split the embedding and the loss counted as one layer each; or
// (without interleaving) --decoder-first-pipeline-num-layers and --decoder-last-pipeline-num-layers
// fixing the first and last stage with equal middle stages. Recomputation: none, selective (every
// layer), or full with method uniform and --recompute-num-layers 1 (every layer keeps only its input).
#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "bmpipe/frameworks/megatron/megatron.h"
#include "bmpipe/problem/layer_roles.h"

namespace bmpipe {
namespace {

struct Split {
  std::string flags;
  std::vector<int> decoders;  // per stage
  bool uniform = true;        // equal stages, up to the embedding or loss counted as a layer
};

// Calls fn on every split in order, one at a time (there are about layers^2 / (p - 2) uneven ones);
// stops when fn returns false.
template <typename Fn>
void ForEachSplit(int layers, int p, int v, const Fn& fn) {
  const int stages = p * v;
  auto uniform = [&](int total, int minus_first, int minus_last, const std::string& flags) {
    if (total % stages != 0) return true;
    const int k = total / stages;
    Split s{flags, std::vector<int>(stages, k), true};
    s.decoders.front() -= minus_first;
    s.decoders.back() -= minus_last;
    return fn(s);
  };
  if (!uniform(layers, 0, 0, "even split") ||
      !uniform(layers + 1, 1, 0, "--account-for-embedding-in-pipeline-split") ||
      !uniform(layers + 1, 0, 1, "--account-for-loss-in-pipeline-split") ||
      !uniform(layers + 2, 1, 1, "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split")) {
    return;
  }
  // Uneven first and last stages are not available with interleaving (Megatron-LM #1303).
  if (v == 1 && p >= 2) {
    for (int first = 1; first < layers; ++first) {
      const int rest = layers - first;  // last + the middle stages
      // The middle stages take equal shares (none when p = 2): last runs over the values that
      // leave a multiple of p - 2, in increasing order.
      const int step = p == 2 ? rest : p - 2;
      for (int last = p == 2 ? rest : (rest % step == 0 ? step : rest % step); last <= rest; last += step) {
        const int middle = rest - last;
        if (p > 2 && middle <= 0) break;
        Split s{fmt::format("--decoder-first-pipeline-num-layers {} --decoder-last-pipeline-num-layers {}", first, last),
                std::vector<int>(stages, p == 2 ? 0 : middle / (p - 2)), false};
        s.decoders.front() = first;
        s.decoders.back() = last;
        if (!fn(s)) return;
      }
    }
  }
}

// The plan of `split` (decoder layers per stage), every layer at its NoneOption; nullopt when a
// stage would be empty or negative.
std::optional<Plan> PlanOfSplit(const Problem& problem, const ModelShape& shape, const Split& split) {
  const int stages = problem.pipeline.stages();
  if (std::any_of(split.decoders.begin(), split.decoders.end(), [](int k) { return k < 0; })) return std::nullopt;
  std::vector<LayerIdx> end(stages);
  LayerIdx at = shape.body_begin;
  for (StageIdx s = 0; s < stages; ++s) {
    at += split.decoders[s];
    end[s] = s + 1 == stages ? problem.num_layers() : at;
    const LayerIdx begin = s == 0 ? 0 : end[s - 1];
    if (end[s] <= begin) return std::nullopt;
  }
  return PlanWithEnds(problem, end);
}

// Sets the first `count` body layers of each stage to `option_of` (when the layer has one).
Plan WithRecompute(const Problem& problem, const ModelShape& shape, Plan plan, int count,
                   OptionIdx (*option_of)(const Layer&)) {
  for (StageIdx s = 0; s < plan.num_stages(); ++s) {
    int done = 0;
    for (LayerIdx l = plan.begin(s); l < plan.end(s) && done < count; ++l) {
      if (l < shape.body_begin || l >= shape.body_end) continue;
      const OptionIdx o = option_of(problem.layers[l]);
      if (o >= 0) plan.option[l] = o;
      ++done;
    }
  }
  return plan;
}

std::string CannotSplit(const ModelShape& shape, const Pipeline& pipeline) {
  return fmt::format("Megatron cannot split {} decoder layers over {} stages{}", shape.body(), pipeline.stages(),
                     pipeline.chunks > 1 ? " with interleaving" : "");
}

}  // namespace

std::optional<GlobalRecompute> ParseGlobalRecompute(const std::string& name) {
  if (name == "none") return GlobalRecompute::kNone;
  if (name == "selective") return GlobalRecompute::kSelective;
  if (name == "full") return GlobalRecompute::kFull;
  return std::nullopt;
}

Result<MegatronLaunch> MegatronDefaultPlan(const Problem& problem, GlobalRecompute recompute, int block_layers) {
  const Pipeline& pipeline = problem.pipeline;
  const ModelShape shape = ShapeOf(problem);
  std::optional<Plan> best;
  std::string flags;
  int best_most = 0;
  // The uniform rules in the order a user reaches for them; the first that applies wins. Uneven
  // first and last stages only when none does, with the fewest layers on the fullest stage.
  ForEachSplit(shape.body(), pipeline.ranks, pipeline.chunks, [&](const Split& split) {
    const bool uniform = split.uniform;
    const int most = *std::max_element(split.decoders.begin(), split.decoders.end());
    if (best && (uniform || most >= best_most)) return true;
    const std::optional<Plan> plan = PlanOfSplit(problem, shape, split);
    if (!plan) return true;
    best = plan;
    flags = split.flags;
    best_most = most;
    return !uniform;
  });
  if (!best) {
    // No flag rule splits the layers: a --pipeline-model-parallel-layout (Megatron-Core 0.13 and
    // later) spreads them as evenly as a user writes one, the layers left over going one each to the
    // second stage on, so the first, which holds the embedding, and the last, the head, take fewer.
    const int stages = pipeline.stages();
    Split even{"", std::vector<int>(stages, shape.body() / stages), false};
    int extra = shape.body() % stages;
    for (int s = 1; s < stages && extra > 0; ++s, --extra) ++even.decoders[s];
    best = PlanOfSplit(problem, shape, even);
    if (!best) return InvalidInput(CannotSplit(shape, pipeline) + "; change --pp or --vpp");
    flags = fmt::format("--pipeline-model-parallel-layout \"{}\"", MegatronLayout(problem, *best));
  }
  switch (recompute) {
    case GlobalRecompute::kNone: {
      // The layers' least-recomputing option: none, unless the problem offers only other parts
      // (a run of Megatron's --recompute-modules).
      const Layer& decoder = problem.layers[shape.body_begin];
      const LayerOption& option = decoder.options[NoneOption(decoder)];
      flags += MeansRecompute(option, Recompute{}) ? ", no recomputation"
                                                   : ", every decoder layer recomputes " + option.name;
      break;
    }
    case GlobalRecompute::kSelective:
      if (SelectiveOption(problem.layers[shape.body_begin]) < 0) {
        return InvalidInput("the decoder layers have no selective recomputation option");
      }
      best = WithRecompute(problem, shape, *best, problem.num_layers(), SelectiveOption);
      flags += ", --recompute-granularity selective";
      break;
    case GlobalRecompute::kFull:
      best = WithRecompute(problem, shape, *best, block_layers > 0 ? block_layers : problem.num_layers(), FullOption);
      flags += block_layers > 0
                   ? fmt::format(", --recompute-granularity full --recompute-method block --recompute-num-layers {}",
                                 block_layers)
                   : ", --recompute-granularity full --recompute-method uniform --recompute-num-layers 1";
      break;
  }
  return MegatronLaunch{*best, flags};
}

}  // namespace bmpipe
