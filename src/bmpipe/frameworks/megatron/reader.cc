// Reading Megatron-LM arguments back as the plan they describe (megatron.h, ReadMegatron).
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <functional>
#include <map>

#include <fmt/format.h>

#include "bmpipe/core/json_cursor.h"
#include "bmpipe/core/text.h"
#include "bmpipe/frameworks/launcher_args.h"
#include "bmpipe/frameworks/megatron/args.h"
#include "bmpipe/frameworks/megatron/megatron.h"
#include "bmpipe/frameworks/stages.h"
#include "bmpipe/problem/layer_roles.h"

namespace bmpipe {

const std::map<std::string, Arity>& MegatronFlags() {
  static const std::map<std::string, Arity> flags = {
      {"--pipeline-model-parallel-size", Arity::kOne},
      {"--num-layers", Arity::kOne},
      {"--pipeline-model-parallel-layout", Arity::kOne},
      {"--num-virtual-stages-per-pipeline-rank", Arity::kOne},
      {"--num-layers-per-virtual-pipeline-stage", Arity::kOne},
      {"--decoder-first-pipeline-num-layers", Arity::kOne},
      {"--decoder-last-pipeline-num-layers", Arity::kOne},
      {"--account-for-embedding-in-pipeline-split", Arity::kNone},
      {"--account-for-loss-in-pipeline-split", Arity::kNone},
      {"--recompute-granularity", Arity::kOne},
      {"--recompute-method", Arity::kOne},
      {"--recompute-num-layers", Arity::kOne},
      {"--recompute-modules", Arity::kMany},
      {"--recompute-activations", Arity::kNone},
      {"--mtp-num-layers", Arity::kOne},
      {"--tensor-model-parallel-size", Arity::kOne},
      {"--micro-batch-size", Arity::kOne},
      {"--global-batch-size", Arity::kOne},
      {"--seq-length", Arity::kOne},
      {"--sequence-parallel", Arity::kNone},
      {"--use-distributed-optimizer", Arity::kNone},
      {"--overlap-grad-reduce", Arity::kNone},
      {"--overlap-param-gather", Arity::kNone},
      {"--context-parallel-size", Arity::kOne},
      {"--expert-model-parallel-size", Arity::kOne},
      {"--expert-tensor-parallel-size", Arity::kOne},
      {"--fp8-format", Arity::kOne},
      {"--fp8-recipe", Arity::kOne},
      {"--fp8-param-gather", Arity::kNone},
      {"--fp4-format", Arity::kOne},
      {"--fp4-recipe", Arity::kOne},
      {"--fp4-param-gather", Arity::kNone},
      {"--disable-parameter-transpose-cache", Arity::kNone},
      {"--use-megatron-fsdp", Arity::kNone},
      {"--use-custom-fsdp", Arity::kNone},
      {"--data-parallel-sharding-strategy", Arity::kOne},
      {"--use-precision-aware-optimizer", Arity::kNone},
      {"--main-grads-dtype", Arity::kOne},
      {"--exp-avg-dtype", Arity::kOne},
      {"--exp-avg-sq-dtype", Arity::kOne},
      {"--optimizer-cpu-offload", Arity::kNone},
      {"--tp-comm-overlap", Arity::kNone},
      {"--cpu-offloading", Arity::kNone},
      {"--fine-grained-activation-offloading", Arity::kNone},
      {"--offload-modules", Arity::kMany},
      {"--activation-offload-fraction", Arity::kOne},
      {"--delta-offload-bytes-across-pp-ranks", Arity::kOne},
      {"--min-offloaded-tensor-size", Arity::kOne},
      {"--num-experts", Arity::kOne},
      {"--moe-router-topk", Arity::kOne},
      {"--moe-ffn-hidden-size", Arity::kOne},
      {"--moe-shared-expert-intermediate-size", Arity::kOne},
      {"--moe-layer-freq", Arity::kOne},
      {"--moe-expert-capacity-factor", Arity::kOne},
      {"--moe-token-dispatcher-type", Arity::kOne},
      {"--moe-flex-dispatcher-backend", Arity::kOne},
      {"--cuda-graph-impl", Arity::kOne},
      {"--cuda-graph-scope", Arity::kMany},
      {"--overlap-moe-expert-parallel-comm", Arity::kNone},
  };
  return flags;
}

namespace {

// Megatron-LM's --moe-layer-freq (moe_freq_type): N, one MoE layer in every N (layer i is MoE
// when i mod N == 0), or a Python list expression of 1 (MoE) and 0 (dense) per decoder layer made
// of [..] lists of digits, '+' (concatenation), '*' (repetition) and parentheses, the characters
// Megatron-LM's pattern check lets through. One entry per decoder layer.
// Parentheses a --moe-layer-freq pattern may nest (Megatron's own patterns use one level).
constexpr int kMaxPatternDepth = 64;

std::vector<int> MoeLayerPattern(const Flag& flag, int layers) {
  const std::string& v = flag.values.front();
  const std::string what = fmt::format("{} \"{}\"", flag.name, Abbreviated(v));
  if (v.find('[') == std::string::npos) {
    const int every = static_cast<int>(IntegerValue(flag, 1, kMaxLayers));
    std::vector<int> pattern(layers);
    for (int i = 0; i < layers; ++i) pattern[i] = i % every == 0 ? 1 : 0;
    return pattern;
  }
  std::size_t at = 0;
  const std::size_t most = static_cast<std::size_t>(kMaxLayers);
  auto bad = [&](const std::string& why) -> std::vector<int> {
    FailConfiguration(fmt::format("{}: {} at character {}; write the pattern as Megatron-LM takes it, e.g. \"[0]*3+[1]*58\"", what,
                     why, at + 1));
  };
  auto number = [&]() {
    std::size_t n = 0, start = at;
    while (at < v.size() && std::isdigit(static_cast<unsigned char>(v[at])) && at - start < 7) n = n * 10 + (v[at++] - '0');
    if (at == start) bad("a number is missing");
    return n;
  };
  std::function<std::vector<int>()> sum;
  int depth = 0;  // parentheses open: bounded, so no input can exhaust the stack
  auto atom = [&]() -> std::vector<int> {
    std::vector<int> list;
    if (at < v.size() && v[at] == '(') {
      if (++depth > kMaxPatternDepth) bad(fmt::format("parentheses nest more than {} deep", kMaxPatternDepth));
      ++at;
      list = sum();
      --depth;
      if (at >= v.size() || v[at] != ')') return bad("')' is missing");
      ++at;
    } else if (at < v.size() && v[at] == '[') {
      ++at;
      while (at < v.size() && v[at] != ']') {
        const std::size_t x = number();
        if (x > 1) return bad("an entry other than 0 or 1");
        if (list.size() >= most) return bad("the pattern is longer than any model");
        list.push_back(static_cast<int>(x));
        if (at < v.size() && v[at] == ',') ++at;
      }
      if (at >= v.size()) return bad("']' is missing");
      ++at;
    } else {
      return bad("a list or '(' is expected");
    }
    while (at < v.size() && v[at] == '*') {
      ++at;
      const std::size_t n = number();
      if (list.size() * n > most) return bad("the pattern is longer than any model");
      std::vector<int> repeated;
      for (std::size_t k = 0; k < n; ++k) repeated.insert(repeated.end(), list.begin(), list.end());
      list = std::move(repeated);
    }
    return list;
  };
  sum = [&]() {
    std::vector<int> list = atom();
    while (at < v.size() && v[at] == '+') {
      ++at;
      const std::vector<int> more = atom();
      if (list.size() + more.size() > most) return bad("the pattern is longer than any model");
      list.insert(list.end(), more.begin(), more.end());
    }
    return list;
  };
  std::vector<int> pattern = sum();
  if (at != v.size()) bad("unexpected character");
  if (static_cast<int>(pattern.size()) != layers) {
    FailConfiguration(fmt::format("{}: the pattern has {} entries, but the model has {} decoder layers (Megatron needs one per layer)",
                     what, pattern.size(), layers));
  }
  return pattern;
}

// Megatron's layout string as stages of layer characters: commas dropped, `(...)*N` unrolled
// once (no nesting), then `x*N`, then split at '|' (megatron/core/transformer/
// pipeline_parallel_layer_layout.py, parse_str_to_list).
std::vector<std::string> ExpandLayout(const std::string& layout) {
  const std::string flag = fmt::format("--pipeline-model-parallel-layout \"{}\"", Abbreviated(layout));
  // Far beyond any layout of the problem sizes bmpipe reads.
  const std::size_t max_chars = 2 * static_cast<std::size_t>(kMaxLayers + kMaxStages);
  auto count_at = [&](const std::string& s, std::size_t& i) {
    std::size_t n = 0;
    const std::size_t start = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])) && i - start < 9) n = n * 10 + (s[i++] - '0');
    if (n > max_chars) FailConfiguration(fmt::format("{}: the count {} is more than any layout of this problem holds", flag, n));
    return n;
  };
  auto append = [&](std::string& out, const std::string& piece, std::size_t times) {
    if (out.size() + piece.size() * times > max_chars) {
      FailConfiguration(fmt::format("{}: it expands to more than {} characters; no layout of this problem is that long", flag, max_chars));
    }
    for (std::size_t k = 0; k < times; ++k) out += piece;
  };
  // Written out (commas between the layers allowed), twice the expanded length at most.
  if (layout.size() > 2 * max_chars) {
    FailConfiguration(fmt::format("{}: it is longer than {} characters; no layout of this problem is that long", flag,
                                  2 * max_chars));
  }
  std::string s;
  for (char c : layout) {
    if (c != ',') s += c;
  }
  std::string grouped;
  for (std::size_t i = 0; i < s.size();) {
    if (s[i] == ')') FailConfiguration(fmt::format("{}: ')' without '('", flag));
    if (s[i] != '(') {
      grouped += s[i++];
      continue;
    }
    const std::size_t close = s.find(')', i);
    const std::string group = close == std::string::npos ? "" : s.substr(i + 1, close - i - 1);
    if (close == std::string::npos || group.empty() || group.find('(') != std::string::npos || close + 2 >= s.size() ||
        s[close + 1] != '*' || !std::isdigit(static_cast<unsigned char>(s[close + 2]))) {
      FailConfiguration(fmt::format("{}: a group must read (...)*N with at least one character inside and no nested parentheses; "
                       "write the repeated stages as, e.g., (tt|)*3",
                       flag));
    }
    std::size_t at = close + 2;
    append(grouped, group, count_at(s, at));
    i = at;
  }
  std::string flat;
  for (std::size_t i = 0; i < grouped.size();) {
    if (i + 2 < grouped.size() && grouped[i + 1] == '*' && std::isdigit(static_cast<unsigned char>(grouped[i + 2]))) {
      std::size_t at = i + 2;
      append(flat, std::string(1, grouped[i]), count_at(grouped, at));
      i = at;
    } else if (grouped[i] == '*') {
      FailConfiguration(fmt::format("{}: '*' must follow one character or a (group) and come before a count, as in t*4", flag));
    } else {
      flat += grouped[i++];
    }
  }
  std::vector<std::string> stages(1);
  for (char c : flat) {
    if (c == '|') {
      stages.emplace_back();
      continue;
    }
    if (c != 'E' && c != 't' && c != 'L' && c != 'm') {
      FailConfiguration(fmt::format("{}: stage {} has '{}', which is not a layer; Megatron's layout characters are E (embedding), t "
                       "(decoder layer), L (loss and head), m (MTP), with '|' between stages",
                       flag, stages.size() - 1, c));
    }
    stages.back() += c;
  }
  return stages;
}

std::vector<StageSpec> MegatronLayoutStages(const Flag& flag, const Pipeline& p) {
  const std::vector<std::string> stages = ExpandLayout(flag.values.front());
  const std::string what = fmt::format("--pipeline-model-parallel-layout \"{}\"", Abbreviated(flag.values.front()));
  const int count = static_cast<int>(stages.size());
  if (count != p.stages()) {
    FailConfiguration(fmt::format("{}: it has {} stages, but the problem has {} ({} ranks x {} virtual stages); give {} stages "
                     "separated by '|', chunk-major",
                     what, count, p.stages(), p.ranks, p.chunks, p.stages()));
  }
  std::vector<StageSpec> specs(stages.size());
  std::string flat;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    for (char c : stages[s]) {
      specs[s].embedding = specs[s].embedding || c == 'E';
      specs[s].head = specs[s].head || c == 'L';
      specs[s].decoders += c == 't';
    }
    flat += stages[s];
  }
  if (std::count(flat.begin(), flat.end(), 'E') != 1 || !specs.front().embedding || stages.front().front() != 'E') {
    FailConfiguration(fmt::format("{}: the embedding E must come once, first, on stage 0", what));
  }
  if (std::count(flat.begin(), flat.end(), 'L') != 1 || !specs.back().head || stages.back().back() != 'L') {
    FailConfiguration(fmt::format("{}: the loss L must come once, last, on the last stage", what));
  }
  // The multi-token-prediction modules run in the problem's head layer: on the loss's stage.
  const std::string& last = stages.back();
  const std::size_t on_last = static_cast<std::size_t>(std::count(last.begin(), last.end(), 'm'));
  if (static_cast<std::size_t>(std::count(flat.begin(), flat.end(), 'm')) != on_last ||
      (on_last > 0 && last.find_first_not_of('m', last.find('m')) != last.size() - 1)) {
    FailConfiguration(fmt::format("{}: bmpipe's problems run the multi-token-prediction modules in the head layer, so each "
                                  "'m' comes on the last stage, just before L (as in ...|t*4mL)",
                                  what));
  }
  return specs;
}

// Megatron's split without a layout (megatron/core/transformer/transformer_block.py,
// get_num_layers_to_build, and megatron/training/arguments.py).
std::vector<StageSpec> MegatronSplitStages(const Flags& flags, int layers, const Pipeline& p) {
  const Flag* first = flags.Get("--decoder-first-pipeline-num-layers");
  const Flag* last = flags.Get("--decoder-last-pipeline-num-layers");
  const bool account_embedding = flags.Get("--account-for-embedding-in-pipeline-split") != nullptr;
  const bool account_loss = flags.Get("--account-for-loss-in-pipeline-split") != nullptr;
  const int chunks = p.chunks;
  if ((first || last) && (account_embedding || account_loss)) {
    FailConfiguration("--decoder-first/last-pipeline-num-layers and --account-for-embedding/loss-in-pipeline-split are given "
         "together, which Megatron refuses; give one or the other");
  }
  std::vector<int> per_rank(p.ranks);
  if (first || last) {
    int left = layers, ranks_left = p.ranks;
    const int n_first = first ? static_cast<int>(IntegerValue(*first, 0, layers)) : 0;
    const int n_last = last ? static_cast<int>(IntegerValue(*last, 0, layers)) : 0;
    if (first) left -= n_first, --ranks_left;
    if (last) left -= n_last, --ranks_left;
    if (left < 0 || (ranks_left > 0 && left % ranks_left != 0)) {
      FailConfiguration(fmt::format("--num-layers {} minus the first and last stages' layers leaves {} for {} middle stages, which "
                       "Megatron needs to divide evenly; change --decoder-first/last-pipeline-num-layers",
                       layers, left, ranks_left));
    }
    std::fill(per_rank.begin(), per_rank.end(), ranks_left > 0 ? left / ranks_left : 0);
    if (first) per_rank.front() = n_first;
    if (last) per_rank.back() = n_last;
  } else {
    const int n = layers + account_embedding + account_loss;
    if (n % p.ranks != 0) {
      FailConfiguration(fmt::format("--num-layers {}{} does not divide among --pipeline-model-parallel-size {}, which Megatron needs "
                       "for its even split; give --pipeline-model-parallel-layout or "
                       "--decoder-first/last-pipeline-num-layers",
                       layers, account_embedding || account_loss ? " (with the embedding and loss counted as layers)" : "",
                       p.ranks));
    }
    std::fill(per_rank.begin(), per_rank.end(), n / p.ranks);
  }
  std::vector<StageSpec> specs(p.stages());
  for (int r = 0; r < p.ranks; ++r) {
    if (per_rank[r] % chunks != 0) {
      FailConfiguration(fmt::format("rank {} gets {} decoder layers, which do not divide into {} virtual stages as Megatron needs; "
                       "give --pipeline-model-parallel-layout",
                       r, per_rank[r], chunks));
    }
    for (int v = 0; v < chunks; ++v) specs[v * p.ranks + r].decoders = per_rank[r] / chunks;
  }
  if (account_embedding && --specs.front().decoders < 0) FailConfiguration("the first stage has no layer for the embedding to replace");
  if (account_loss && --specs.back().decoders < 0) FailConfiguration("the last stage has no layer for the loss to replace");
  specs.front().embedding = true;
  specs.back().head = true;
  return specs;
}

}  // namespace

int MegatronChunks(const Flags& flags, int layers, int ranks) {
  const Flag* layout = flags.Get("--pipeline-model-parallel-layout");
  const Flag* per_rank = flags.Get("--num-virtual-stages-per-pipeline-rank");
  const Flag* per_stage = flags.Get("--num-layers-per-virtual-pipeline-stage");
  if ((layout != nullptr) + (per_rank != nullptr) + (per_stage != nullptr) > 1) {
    FailConfiguration("give at most one of --pipeline-model-parallel-layout, --num-virtual-stages-per-pipeline-rank and "
         "--num-layers-per-virtual-pipeline-stage (Megatron refuses more)");
  }
  if (layout) {
    const int stages = static_cast<int>(ExpandLayout(layout->values.front()).size());
    if (stages % ranks != 0) {
      FailConfiguration(fmt::format("--pipeline-model-parallel-layout \"{}\": its {} stages do not divide among "
                       "--pipeline-model-parallel-size {}; Megatron needs ranks x virtual stages of them",
                       Abbreviated(layout->values.front()), stages, ranks));
    }
    return stages / ranks;
  }
  if (per_rank) return static_cast<int>(IntegerValue(*per_rank, 1, kMaxStages));
  if (per_stage) {
    if (flags.Get("--decoder-first-pipeline-num-layers") || flags.Get("--decoder-last-pipeline-num-layers")) {
      FailConfiguration("--num-layers-per-virtual-pipeline-stage with --decoder-first/last-pipeline-num-layers: Megatron needs "
           "--num-virtual-stages-per-pipeline-rank for an uneven split; give that instead");
    }
    const int n = static_cast<int>(IntegerValue(*per_stage, 1, kMaxLayers));
    const int total = layers + (flags.Get("--account-for-embedding-in-pipeline-split") != nullptr) +
                      (flags.Get("--account-for-loss-in-pipeline-split") != nullptr);
    if (total % ranks != 0 || (total / ranks) % n != 0) {
      FailConfiguration(fmt::format("--num-layers-per-virtual-pipeline-stage {}: the {} layers per rank do not divide into stages of "
                       "{} (Megatron needs them to)",
                       n, static_cast<double>(total) / ranks, n));
    }
    return total / ranks / n;
  }
  return 1;
}

int MegatronZeroStage(const Flags& flags) {
  int stage = flags.Get("--use-distributed-optimizer") ? 1 : 0;
  if (flags.Get("--use-megatron-fsdp") || flags.Get("--use-custom-fsdp")) {
    const Flag* strategy = flags.Get("--data-parallel-sharding-strategy");
    const std::string name = strategy ? strategy->values.front() : "no_shard";  // Megatron-LM's default
    const std::map<std::string, int> stages = {{"no_shard", 0}, {"optim", 1}, {"optim_grads", 2}, {"optim_grads_params", 3}};
    auto it = stages.find(name);
    if (it == stages.end()) {
      FailConfiguration(fmt::format("--data-parallel-sharding-strategy {}: give no_shard, optim, optim_grads or optim_grads_params",
                       name));
    }
    stage = std::max(stage, it->second);
  }
  return stage;
}

std::string MegatronStateDtype(const Flags& flags, const std::string& name) {
  const Flag* f = flags.Get(name);
  const std::string v = f ? f->values.front() : "fp32";
  if (v != "fp32" && v != "bf16") FailConfiguration(fmt::format("{} {}: bmpipe models fp32 and bf16 state; give one of them", name, v));
  if (v != "fp32" && !flags.Get("--use-precision-aware-optimizer")) {
    FailConfiguration(fmt::format("{} {} without --use-precision-aware-optimizer: Megatron refuses it; add "
                     "--use-precision-aware-optimizer",
                     name, v));
  }
  return v;
}

double MegatronCapacityFactor(const Flags& flags) {
  const Flag* f = flags.Get("--moe-expert-capacity-factor");
  if (!f) return 0;  // dropless
  const std::string& v = f->values.front();
  char* end = nullptr;
  const double factor = std::strtod(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size() || !(factor == factor) || factor > 1e6) {
    FailConfiguration(fmt::format("--moe-expert-capacity-factor {}: give a number", v));
  }
  return factor < 0 ? 0 : factor;  // Megatron: negative means none
}

std::vector<std::string> MegatronOffloadModules(const Flags& flags) {
  if (!flags.Get("--fine-grained-activation-offloading")) return {};
  const Flag* modules = flags.Get("--offload-modules");
  if (!modules) {
    FailConfiguration("--fine-grained-activation-offloading without --offload-modules: megatron-core asserts that "
                      "offload_modules is not empty; name the modules (e.g. --offload-modules core_attn)");
  }
  return modules->values;
}

namespace {

void MegatronRecompute(const Flags& flags, const Problem& problem, Plan& plan) {
  const ModelShape shape = ShapeOf(problem);
  const Flag* granularity = flags.Get("--recompute-granularity");
  const Flag* method = flags.Get("--recompute-method");
  const Flag* count = flags.Get("--recompute-num-layers");
  std::string kind = granularity ? granularity->values.front() : "";
  if (kind.empty() && flags.Get("--recompute-activations")) kind = "selective";  // Megatron's older switch
  if (kind.empty()) return;
  if (kind == "full") {
    if (!method || !count) {
      FailConfiguration("--recompute-granularity full needs --recompute-method block|uniform and --recompute-num-layers N (Megatron "
           "refuses it without them)");
    }
    const std::string how = method->values.front();
    const int n = static_cast<int>(IntegerValue(*count, 0, kMaxLayers));
    const std::string setting = fmt::format("--recompute-granularity full --recompute-method {} --recompute-num-layers {}", how, n);
    if (how == "uniform" && n != 1) {
      FailConfiguration(fmt::format("{}: uniform checkpoints groups of {} decoder layers as one unit, which bmpipe's per-layer "
                       "options do not model; give --recompute-num-layers 1 (every layer) or --recompute-method block",
                       setting, n));
    }
    if (how != "uniform" && how != "block") {
      FailConfiguration(fmt::format("--recompute-method {}: give block or uniform", how));
    }
    // block: the first n decoder layers of each stage (a chunk is Megatron's transformer block).
    for (StageIdx s = 0; s < plan.num_stages(); ++s) {
      int i = 0;
      for (LayerIdx l = std::max(plan.begin(s), shape.body_begin); l < std::min(plan.end(s), shape.body_end); ++l, ++i) {
        if (how == "uniform" || i < n) SetLayerOption(problem, plan, l, Recompute{kRecomputeLayer}, setting);
      }
    }
    return;
  }
  if (kind != "selective") FailConfiguration(fmt::format("--recompute-granularity {}: give full or selective", kind));
  if (method) {
    FailConfiguration(fmt::format("--recompute-method {} with selective recomputation: Megatron refuses it; remove --recompute-method",
                     method->values.front()));
  }
  if (count) {
    FailConfiguration(fmt::format("--recompute-num-layers {} with selective recomputation: Megatron refuses it (selective applies to "
                     "every layer); remove --recompute-num-layers",
                     count->values.front()));
  }
  const Flag* modules = flags.Get("--recompute-modules");
  const std::vector<std::string> names = modules ? modules->values : std::vector<std::string>{"core_attn"};
  // Megatron's `mlp` recomputes the dense MLP and `moe` the MoE block: on each decoder layer
  // bmpipe's mlp when the module for the layer's kind is named.
  Recompute want;
  bool dense_mlp = false, moe_block = false;
  for (const std::string& m : names) {
    if (m == "core_attn") want.parts |= kRecomputeCoreAttention;
    else if (m == "mlp") dense_mlp = true;
    else if (m == "moe") moe_block = true;
    else if (m == "layernorm") want.parts |= kRecomputeNorms;
    else if (m == "mla_up_proj") want.parts |= kRecomputeMlaUpProjection;
    else if (m == "moe_act" || m == "shared_experts" || m == "gdn_norm_out" || m == "gdp_in_proj" || m == "gdp_qkv" ||
             m == "mhc") {
      FailConfiguration(fmt::format("--recompute-modules {}: recomputing '{}' is not modeled by bmpipe's options (core_attn, mlp, "
                       "moe, layernorm and mla_up_proj are); remove it",
                       fmt::join(names, " "), m));
    } else {
      FailConfiguration(fmt::format("--recompute-modules {}: '{}' is not a Megatron module; Megatron's are core_attn, mlp, layernorm, "
                       "moe, moe_act, shared_experts, mla_up_proj",
                       fmt::join(names, " "), m));
    }
  }
  const std::string setting = fmt::format("--recompute-granularity selective --recompute-modules {}", fmt::join(names, " "));
  const MoeInfo* moe = problem.training && problem.training->moe.enabled() ? &problem.training->moe : nullptr;
  for (LayerIdx l = shape.body_begin; l < shape.body_end; ++l) {
    const bool dense = !moe || std::binary_search(moe->dense_layers.begin(), moe->dense_layers.end(), l - shape.body_begin);
    const Recompute layer_want{want.parts | ((dense ? dense_mlp : moe_block) ? unsigned{kRecomputeMlp} : 0u)};
    if (!layer_want.none()) SetLayerOption(problem, plan, l, layer_want, setting);
  }
}

// Fine-grained activation offloading: the offload part joins every decoder layer's option, the
// modules those the problem's offload options move (training.offload_modules). What a plan cannot
// say is refused: a fraction below 1 or a delta across ranks (Megatron then keeps different
// layers of different micro-batches on the device), or another least tensor size.
void MegatronOffload(const Flags& flags, const Problem& problem, Plan& plan) {
  if (!flags.Get("--fine-grained-activation-offloading")) {
    for (const char* other : {"--offload-modules", "--activation-offload-fraction", "--delta-offload-bytes-across-pp-ranks",
                              "--min-offloaded-tensor-size"}) {
      if (flags.Get(other)) {
        FailConfiguration(fmt::format("{} without --fine-grained-activation-offloading: Megatron offloads nothing; add "
                                      "--fine-grained-activation-offloading or remove {}",
                                      other, other));
      }
    }
    return;
  }
  const std::vector<std::string> named = MegatronOffloadModules(flags);
  if (const Flag* f = flags.Get("--activation-offload-fraction")) {
    char* end = nullptr;
    const std::string& v = f->values.front();
    const double fraction = std::strtod(v.c_str(), &end);
    if (v.empty() || end != v.c_str() + v.size() || fraction != 1.0) {
      FailConfiguration(fmt::format("--activation-offload-fraction {}: Megatron then keeps the later offload groups of "
                                    "each micro-batch's chunk on the device by a share of their count, which bmpipe's "
                                    "per-layer options do not describe; give 1.0 or remove it",
                                    v));
    }
  }
  if (const Flag* d = flags.Get("--delta-offload-bytes-across-pp-ranks"); d && IntegerValue(*d, 0, std::int64_t{1} << 50) != 0) {
    FailConfiguration(fmt::format("--delta-offload-bytes-across-pp-ranks {}: Megatron then keeps the first "
                                  "micro-batches' groups on the later ranks, which bmpipe's per-layer options do not "
                                  "describe; give 0 or remove it",
                                  d->values.front()));
  }
  if (const Flag* m = flags.Get("--min-offloaded-tensor-size"); m && IntegerValue(*m, 0, std::int64_t{1} << 50) != 1048576) {
    FailConfiguration(fmt::format("--min-offloaded-tensor-size {}: bmpipe costs Megatron's default, 1048576 elements; "
                                  "give it or remove the flag",
                                  m->values.front()));
  }
  std::vector<std::string> want = named, have;
  if (problem.training) have = problem.training->offload_modules;
  std::sort(want.begin(), want.end());
  std::sort(have.begin(), have.end());
  if (want != have) {
    FailConfiguration(fmt::format("--offload-modules {}: the problem's offload options move the tensors of {} "
                                  "(training.offload_modules); plan with --offload activations --offload-modules {}",
                                  fmt::join(named, " "),
                                  have.empty() ? std::string("everything a layer keeps") : fmt::format("{}", fmt::join(have, ", ")),
                                  fmt::join(named, ",")));
  }
  const ModelShape shape = ShapeOf(problem);
  const std::string setting = fmt::format("--fine-grained-activation-offloading --offload-modules {}", fmt::join(named, " "));
  for (LayerIdx l = shape.body_begin; l < shape.body_end; ++l) {
    const Recompute current = ParseRecompute(problem.layers[l].options[plan.option[l]].name).value();
    if (current.full()) {
      FailConfiguration(fmt::format("{} with full recomputation: the checkpoint keeps each layer's input outside every "
                                    "offload region, so Megatron offloads nothing that bmpipe's offload options cost; "
                                    "drop one of them",
                                    setting));
    }
    SetLayerOption(problem, plan, l, Recompute{current.parts | kOffloadActivations}, setting);
  }
}

void CheckMegatronTraining(const Flags& flags, const TrainingInfo& t) {
  CheckValue(flags, "--tensor-model-parallel-size", 1, t.tensor_parallel, "training.tensor_parallel", kMaxRanks);
  const std::int64_t big = std::int64_t{1} << 24;
  if (flags.Get("--micro-batch-size")) {
    CheckValue(flags, "--micro-batch-size", 0, t.micro_batch_size, "training.micro_batch_size", big);
  }
  if (flags.Get("--global-batch-size")) {
    CheckValue(flags, "--global-batch-size", 0, t.global_batch_size, "training.global_batch_size", big);
  }
  if (flags.Get("--seq-length")) CheckValue(flags, "--seq-length", 0, t.seq_length, "training.seq_length", big);
  // Sequence parallelism over one tensor-parallel rank divides nothing (Megatron refuses the flag).
  CheckSwitch(flags, "--sequence-parallel", t.sequence_parallel && t.tensor_parallel > 1, "training.sequence_parallel");
  CheckSwitch(flags, "--use-distributed-optimizer", t.distributed_optimizer, "training.distributed_optimizer");
  // The data-parallel overlap: the gradient reduce, the parameter gather, or both (a problem's
  // training.overlap_grad_reduce says some of the sync is hidden).
  const bool overlap = flags.Get("--overlap-grad-reduce") || flags.Get("--overlap-param-gather");
  if (overlap != t.overlap_grad_reduce) {
    FailConfiguration(fmt::format("--overlap-grad-reduce and --overlap-param-gather are {}: the problem's run has "
                                  "training.overlap_grad_reduce = {}; this configuration is not that run ({} "
                                  "--overlap-grad-reduce, or give the problem of this configuration)",
                                  overlap ? "given" : "not given", t.overlap_grad_reduce ? "true" : "false",
                                  t.overlap_grad_reduce ? "give" : "remove"));
  }
  CheckValue(flags, "--context-parallel-size", 1, t.context_parallel, "training.context_parallel", kMaxRanks);
  CheckValue(flags, "--expert-model-parallel-size", 1, t.expert_parallel, "training.expert_parallel", 1 << 16);
  CheckValue(flags, "--expert-tensor-parallel-size", t.tensor_parallel,
             t.expert_tensor_parallel > 0 ? t.expert_tensor_parallel : t.tensor_parallel,
             "training.expert_tensor_parallel (0: tensor_parallel)", kMaxRanks);
  const bool fp4 = t.precision == "nvfp4";
  CheckSwitch(flags, "--fp8-format", t.precision != "bf16" && !fp4, "training.precision = " + t.precision);
  CheckSwitch(flags, "--fp4-format", fp4, "training.precision = nvfp4");
  if (const Flag* recipe = flags.Get("--fp4-recipe"); recipe && recipe->values.front() != "nvfp4") {
    FailConfiguration(fmt::format("--fp4-recipe {}: bmpipe costs Transformer Engine's NVFP4 block scaling only "
                                  "(--fp4-recipe nvfp4); a custom quantizer factory's GEMMs are not that run",
                                  recipe->values.front()));
  }
  // The recipe tells MXFP8 (block scaling) from FP8 with a scale per tensor (delayed, tensorwise).
  if (const Flag* recipe = flags.Get("--fp8-recipe"); recipe && t.precision != "bf16" && !fp4) {
    const bool mx = recipe->values.front() == "mxfp8";
    if (!mx && !t.fp8_recipe.empty() && t.precision == "fp8" && recipe->values.front() != t.fp8_recipe) {
      FailConfiguration(fmt::format("--fp8-recipe {}: the problem's run has training.fp8_recipe = {}; this "
                                    "configuration is not that run",
                                    recipe->values.front(), t.fp8_recipe));
    }
    if (mx != (t.precision == "mxfp8")) {
      FailConfiguration(fmt::format("--fp8-recipe {}: the problem's run has training.precision = {}; this "
                                    "configuration is not that run (--fp8-recipe {}, or give the problem of this "
                                    "configuration)",
                                    recipe->values.front(), t.precision, mx ? "delayed or tensorwise" : "mxfp8"));
    }
  }
  CheckSwitch(flags, "--fp8-param-gather", t.fp8_params && !fp4, "training.fp8_params");
  CheckSwitch(flags, "--fp4-param-gather", t.fp8_params && fp4, "training.fp8_params (with nvfp4)");
  CheckSwitch(flags, "--disable-parameter-transpose-cache", t.no_fp8_transpose_cache,
              "training.no_fp8_transpose_cache");
  CheckSwitch(flags, "--tp-comm-overlap", t.tp_comm_overlap, "training.tp_comm_overlap");
  CheckSwitch(flags, "--optimizer-cpu-offload", t.offload_optimizer, "training.offload_optimizer");
  if (flags.Get("--cpu-offloading")) {
    FailConfiguration("--cpu-offloading: Megatron offloads the activations of whole layers and refuses it with pipeline parallelism "
         "or recomputation, which bmpipe's per-layer offload options do not describe; remove --cpu-offloading");
  }
  const int stage = MegatronZeroStage(flags);
  const int want_stage = ZeroStage(t);
  if (stage != want_stage) {
    FailConfiguration(fmt::format("the flags give ZeRO stage {} (--use-distributed-optimizer: 1; --use-megatron-fsdp with "
                     "--data-parallel-sharding-strategy optim_grads: 2, optim_grads_params: 3), but the problem's run has "
                     "training.zero_stage = {}; this configuration is not that run",
                     stage, want_stage));
  }
  const std::string grads = MegatronStateDtype(flags, "--main-grads-dtype");
  const std::string avg = MegatronStateDtype(flags, "--exp-avg-dtype");
  const std::string avg_sq = MegatronStateDtype(flags, "--exp-avg-sq-dtype");
  if (grads != t.grad_dtype) {
    FailConfiguration(fmt::format("--main-grads-dtype {}: the problem's run has training.grad_dtype = {}; this configuration is not "
                     "that run",
                     grads, t.grad_dtype));
  }
  if (avg != t.optimizer_dtype || avg_sq != t.optimizer_dtype) {
    FailConfiguration(fmt::format("--exp-avg-dtype {} --exp-avg-sq-dtype {}: the problem's run has training.optimizer_dtype = {} for "
                     "both moments; this configuration is not that run",
                     avg, avg_sq, t.optimizer_dtype));
  }
}

// The MoE flags against the problem's `training.moe` (absent: a dense model).
// `pairs`: the problem's pipeline overlaps its pairs (combined 1F1B), which the flag turns on too.
void CheckMegatronMoe(const Flags& flags, const MoeInfo& moe, int layers, bool pairs) {
  const std::int64_t big = std::int64_t{1} << 24;
  CheckValue(flags, "--num-experts", 0, moe.experts, "training.moe.experts", big);
  if (!moe.enabled()) return;
  CheckValue(flags, "--moe-router-topk", 2, moe.top_k, "training.moe.top_k", big);
  if (flags.Get("--moe-ffn-hidden-size")) {
    CheckValue(flags, "--moe-ffn-hidden-size", 0, moe.expert_ffn, "training.moe.expert_ffn", big);
  }
  // The MoE architecture flags, when given, must be the problem's (left out, they are the model's:
  // an export says which architecture flags to merge).
  if (flags.Get("--moe-shared-expert-intermediate-size")) {
    CheckValue(flags, "--moe-shared-expert-intermediate-size", 0, moe.shared_expert_ffn,
               "training.moe.shared_expert_ffn", big);
  }
  std::vector<int> pattern(layers, 1);
  if (const Flag* freq = flags.Get("--moe-layer-freq")) pattern = MoeLayerPattern(*freq, layers);
  std::vector<int> dense;
  for (int i = 0; i < layers; ++i) {
    if (pattern[i] == 0) dense.push_back(i);
  }
  if (flags.Get("--moe-layer-freq") && dense != moe.dense_layers) {
    FailConfiguration(fmt::format("--moe-layer-freq{}: dense decoder layers [{}], but the problem's run has training.moe.dense_layers "
                     "[{}]; this configuration is not that run",
                     flags.Get("--moe-layer-freq") ? "" : " (not given: every layer MoE)", fmt::join(dense, ", "),
                     fmt::join(moe.dense_layers, ", ")));
  }
  const double factor = MegatronCapacityFactor(flags);
  if (factor != moe.capacity_factor) {
    FailConfiguration(fmt::format("--moe-expert-capacity-factor {:g}{}: the problem's run has training.moe.capacity_factor = {:g} "
                     "(0: dropless); this configuration is not that run",
                     factor, flags.Get("--moe-expert-capacity-factor") ? "" : " (not given: dropless)",
                     moe.capacity_factor));
  }
  // Megatron's default dispatcher is allgather, which bmpipe does not cost: the flag is required.
  const Flag* dispatcher = flags.Get("--moe-token-dispatcher-type");
  const std::string type = dispatcher ? dispatcher->values.front() : std::string("allgather");
  if (type != moe.dispatcher) {
    FailConfiguration(fmt::format("--moe-token-dispatcher-type {}{}: the problem's run has training.moe.dispatcher = {}; this "
                     "configuration is not that run",
                     type, dispatcher ? "" : " (not given: Megatron's default)", moe.dispatcher));
  }
  const bool overlap = flags.Get("--overlap-moe-expert-parallel-comm") != nullptr;
  if (overlap != (moe.comm_overlap || pairs)) {
    FailConfiguration(fmt::format("--overlap-moe-expert-parallel-comm {}: the problem's run has training.moe.comm_overlap = {} "
                     "and pipeline.overlap = {}; this configuration is not that run",
                     overlap ? "given" : "not given", moe.comm_overlap ? "true" : "false", pairs ? "true" : "false"));
  }
  // CUDA graphs of the router and the dispatch preprocessing, and nothing else graphed.
  const Flag* impl = flags.Get("--cuda-graph-impl");
  const Flag* scope = flags.Get("--cuda-graph-scope");
  const std::string impl_name = impl ? impl->values.front() : std::string("none");
  std::vector<std::string> scopes = scope ? scope->values : std::vector<std::string>{};
  std::sort(scopes.begin(), scopes.end());
  const bool graphs = impl_name != "none";
  const std::vector<std::string> moe_scopes = {"moe_preprocess", "moe_router"};
  if (graphs && (impl_name != "transformer_engine" || scopes != moe_scopes)) {
    FailConfiguration(fmt::format("--cuda-graph-impl {} --cuda-graph-scope {}: bmpipe costs CUDA graphs of the MoE router and "
                     "the dispatch preprocessing only (--cuda-graph-impl transformer_engine --cuda-graph-scope "
                     "moe_router moe_preprocess, training.moe.cuda_graphs); this configuration is not that run",
                     impl_name, scope ? fmt::format("{}", fmt::join(scope->values, " ")) : "(not given: full)"));
  }
  if (graphs != moe.cuda_graphs) {
    FailConfiguration(fmt::format("--cuda-graph-impl {}: the problem's run has training.moe.cuda_graphs = {}; this configuration "
                     "is not that run",
                     impl ? impl_name : "(not given: none)", moe.cuda_graphs ? "true" : "false"));
  }
}

Plan ReadMegatronPlan(const std::string& text, const Problem& problem, std::vector<std::string>& notes) {
  const Flags flags = ReadFlags(ShellWords(text), MegatronFlags());
  const Pipeline& p = problem.pipeline;
  const ModelShape shape = ShapeOf(problem);
  CheckValue(flags, "--pipeline-model-parallel-size", 1, p.ranks, "pipeline.ranks", kMaxRanks);
  int layers = shape.body();
  if (const Flag* n = flags.Get("--num-layers")) {
    layers = static_cast<int>(IntegerValue(*n, 1, kMaxLayers));
    if (layers != shape.body()) {
      FailConfiguration(fmt::format("--num-layers {}: the problem has {} decoder layers (between its first and last layer); give "
                       "--num-layers {}",
                       layers, shape.body(), shape.body()));
    }
  } else {
    notes.push_back(fmt::format("--num-layers is not given; taken as the problem's {} decoder layers", shape.body()));
  }
  // Multi-token prediction: the problem's head layer runs the modules (training.mtp_layers);
  // --mtp-num-layers, or the layout's 'm' when the flag is absent, says how many.
  const Flag* mtp_flag = flags.Get("--mtp-num-layers");
  int mtp = mtp_flag ? static_cast<int>(IntegerValue(*mtp_flag, 0, kMaxLayers)) : 0;
  if (const Flag* layout = flags.Get("--pipeline-model-parallel-layout")) {
    int in_layout = 0;
    for (const std::string& s : ExpandLayout(layout->values.front())) {
      in_layout += static_cast<int>(std::count(s.begin(), s.end(), 'm'));
    }
    if (mtp_flag && in_layout != mtp) {
      FailConfiguration(fmt::format("--pipeline-model-parallel-layout \"{}\" places {} 'm', but --mtp-num-layers is {}; "
                                    "Megatron needs one 'm' per module",
                                    Abbreviated(layout->values.front()), in_layout, mtp));
    }
    mtp = in_layout;
  }
  if (!problem.training && mtp > 0) {
    notes.push_back(fmt::format("{} multi-token-prediction modules taken as part of the head layer (the problem has no "
                                "`training` section to check them against)",
                                mtp));
  }
  if (problem.training && problem.training->mtp_layers != mtp) {
    FailConfiguration(fmt::format("the configuration runs {} multi-token-prediction modules (--mtp-num-layers, 'm' in "
                                  "the layout), but the problem's head runs {} (training.mtp_layers); give "
                                  "--mtp-num-layers {}{}",
                                  mtp, problem.training->mtp_layers, problem.training->mtp_layers,
                                  problem.training->mtp_layers > 0 ? " and as many 'm' before L in the layout" : ""));
  }
  const int chunks = MegatronChunks(flags, layers, p.ranks);
  if (chunks != p.chunks) {
    FailConfiguration(fmt::format("the configuration has {} virtual stages per rank{}, but the problem has pipeline.chunks {}; give "
                     "a configuration with {}",
                     chunks, flags.Get("--pipeline-model-parallel-layout") ? " (the layout's stages / the pipeline size)" : "",
                     p.chunks, p.chunks));
  }
  const ScheduleKind schedule = chunks > 1 ? ScheduleKind::kInterleavedOneFOneB : ScheduleKind::kOneFOneB;
  if (p.schedule != schedule) {
    FailConfiguration(fmt::format("Megatron runs {} with these flags, but the problem's schedule is {}; give the problem with "
                     "schedule {}",
                     ScheduleName(schedule), ScheduleName(p.schedule), ScheduleName(schedule)));
  }
  std::vector<StageSpec> specs;
  if (const Flag* layout = flags.Get("--pipeline-model-parallel-layout")) {
    for (const char* other : {"--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers",
                              "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"}) {
      if (flags.Get(other)) FailConfiguration(fmt::format("--pipeline-model-parallel-layout with {}: Megatron refuses both; give one", other));
    }
    specs = MegatronLayoutStages(*layout, p);
  } else {
    specs = MegatronSplitStages(flags, layers, p);
  }
  Plan plan = PlanOfStages(problem, specs, "the configuration");
  MegatronRecompute(flags, problem, plan);
  MegatronOffload(flags, problem, plan);
  if (problem.training) {
    CheckMegatronTraining(flags, *problem.training);
    CheckMegatronMoe(flags, problem.training->moe, layers, problem.pipeline.overlap);
  } else {
    notes.push_back("the problem has no `training` section: the parallel and batch flags are not checked");
  }
  const std::vector<std::string>& ignored = flags.ignored;
  if (!ignored.empty()) notes.push_back(IgnoredNote(ignored, "they do not change the pipeline plan"));
  return plan;
}

}  // namespace

Result<Plan> ReadMegatron(const std::string& text, const Problem& problem, const std::string& source,
                          std::vector<std::string>& notes) {
  return ReadDocument<Plan>(source, [&] { return ReadMegatronPlan(text, problem, notes); });
}

Result<bool> DetectMegatron(const PlanText& text) {
  for (const std::string& line : text.code) {
    if ((line.rfind("--", 0) == 0 && line.size() > 2 && std::isalpha(static_cast<unsigned char>(line[2]))) ||
        line.find(" --pipeline-model-parallel-size") != std::string::npos ||
        line.find(" --num-layers") != std::string::npos) {
      return true;
    }
  }
  return false;
}

}  // namespace bmpipe
