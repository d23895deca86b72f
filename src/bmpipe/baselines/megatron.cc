// Megatron-LM's pipeline split and recomputation, as a user tuning its flags would set them.
//
// Split (megatron/core/transformer/transformer_block.py and the pipeline-layout options): the
// decoder layers are divided equally over the p*v stages; or with
// --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split the embedding
// and the loss count as one layer each; or (without interleaving) --decoder-first-pipeline-num-layers
// and --decoder-last-pipeline-num-layers fix the first and last stage and the middle stages are
// equal. Recomputation is global: none, selective (every layer), full with method uniform and
// --recompute-num-layers 1 (every layer keeps only its input), or full with method block and
// --recompute-num-layers N (the first N layers of every chunk). Every combination is simulated;
// the fastest that fits is Megatron's best.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "bmpipe/baselines/common.h"

namespace bmpipe {
namespace {

struct Split {
  std::string flags;
  std::vector<int> decoders;  // per stage
};

std::vector<Split> Splits(int layers, int p, int v) {
  const int stages = p * v;
  std::vector<Split> splits;
  auto uniform = [&](int total, int minus_first, int minus_last, const std::string& flags) {
    if (total % stages != 0) return;
    const int k = total / stages;
    Split s{flags, std::vector<int>(stages, k)};
    s.decoders.front() -= minus_first;
    s.decoders.back() -= minus_last;
    splits.push_back(s);
  };
  uniform(layers, 0, 0, "even split");
  uniform(layers + 1, 1, 0, "--account-for-embedding-in-pipeline-split");
  uniform(layers + 1, 0, 1, "--account-for-loss-in-pipeline-split");
  uniform(layers + 2, 1, 1, "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split");
  // Uneven first and last stages are not available with interleaving (Megatron-LM #1303).
  if (v == 1 && p >= 2) {
    for (int first = 1; first < layers; ++first) {
      for (int last = 1; first + last <= layers; ++last) {
        const int middle = layers - first - last;
        if (p == 2 ? middle != 0 : (middle <= 0 || middle % (p - 2) != 0)) continue;
        Split s{fmt::format("--decoder-first-pipeline-num-layers {} --decoder-last-pipeline-num-layers {}", first, last),
                std::vector<int>(stages, p == 2 ? 0 : middle / (p - 2))};
        s.decoders.front() = first;
        s.decoders.back() = last;
        splits.push_back(s);
      }
    }
  }
  return splits;
}

}  // namespace

BaselineResult RunMegatron(const Problem& problem) {
  BaselineResult result;
  const Pipeline& pipeline = problem.pipeline;
  const ModelShape shape = ShapeOf(problem);
  const int stages = pipeline.stages();
  PlanPicker picker(problem);
  std::set<std::vector<int>> seen;
  for (const Split& split : Splits(shape.body(), pipeline.ranks, pipeline.chunks)) {
    if (std::any_of(split.decoders.begin(), split.decoders.end(), [](int k) { return k < 0; })) continue;
    if (!seen.insert(split.decoders).second) continue;
    std::vector<LayerIdx> end(stages);
    LayerIdx at = shape.body_begin;
    bool empty_stage = false;
    for (StageIdx s = 0; s < stages; ++s) {
      at += split.decoders[s];
      end[s] = s + 1 == stages ? problem.num_layers() : at;
      const LayerIdx begin = s == 0 ? 0 : end[s - 1];
      empty_stage = empty_stage || end[s] <= begin;
    }
    if (empty_stage) continue;
    const Plan base = PlanWithEnds(problem, end);
    const int most = *std::max_element(split.decoders.begin(), split.decoders.end());
    // Sets `count` body layers of each stage (the first ones) to `option_of`.
    auto recompute = [&](int count, OptionIdx (*option_of)(const Layer&)) {
      Plan plan = base;
      for (StageIdx s = 0; s < stages; ++s) {
        int done = 0;
        for (LayerIdx l = plan.begin(s); l < plan.end(s) && done < count; ++l) {
          if (l < shape.body_begin || l >= shape.body_end) continue;
          const OptionIdx o = option_of(problem.layers[l]);
          if (o >= 0) plan.option[l] = o;
          ++done;
        }
      }
      return plan;
    };
    picker.Offer(base, split.flags + ", no recomputation");
    picker.Offer(recompute(most, SelectiveOption), split.flags + ", --recompute-granularity selective");
    picker.Offer(recompute(most, FullOption),
                 split.flags + ", --recompute-granularity full --recompute-method uniform --recompute-num-layers 1");
    for (int n = 1; n < most; ++n) {
      picker.Offer(recompute(n, FullOption),
                   split.flags + fmt::format(", --recompute-granularity full --recompute-method block "
                                             "--recompute-num-layers {}",
                                             n));
    }
  }
  if (seen.empty()) {
    return NotApplicable(fmt::format("Megatron cannot split {} decoder layers over {} stages{}", shape.body(), stages,
                                        pipeline.chunks > 1 ? " with interleaving" : ""));
  }
  picker.Fill(result);
  return result;
}

}  // namespace bmpipe
