#include "bmpipe/io/launcher_plan.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <functional>
#include <map>

#include <fmt/format.h>

#include "bmpipe/baselines/common.h"
#include "bmpipe/core/json_cursor.h"
#include "bmpipe/io/export.h"
#include "bmpipe/problem/recompute.h"

namespace bmpipe {
namespace {

[[noreturn]] void Fail(const std::string& message) { throw internal::CursorFailure{message}; }

// ---------------------------------------------------------------------------------------------
// Arguments: shell words, then flags.

struct Word {
  std::string text;
  int line = 1;
};

// Splits `text` into words as a POSIX shell does for a command line: blanks and newlines separate,
// '#' at the start of a word comments out the rest of the line, backslash-newline continues the
// line, backslash quotes the next character, '...' is literal, "..." keeps \" \\ \$ \` escapes.
std::vector<Word> ShellWords(const std::string& text) {
  std::vector<Word> words;
  std::size_t i = 0;
  int line = 1;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      ++i;
      continue;
    }
    if (c == '\\' && i + 1 < text.size() && text[i + 1] == '\n') {
      i += 2;
      ++line;
      continue;
    }
    if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
      continue;
    }
    Word word{"", line};
    while (i < text.size()) {
      const char d = text[i];
      if (d == ' ' || d == '\t' || d == '\r' || d == '\n') break;
      if (d == '\\') {
        if (i + 1 < text.size() && text[i + 1] == '\n') {
          ++line;
        } else if (i + 1 < text.size()) {
          word.text += text[i + 1];
        }
        i += 2;
      } else if (d == '\'' || d == '"') {
        const std::size_t open = i++;
        while (i < text.size() && text[i] != d) {
          if (text[i] == '\n') ++line;
          if (d == '"' && text[i] == '\\' && i + 1 < text.size() && std::string_view("\"\\$`").find(text[i + 1]) != std::string_view::npos) {
            ++i;
          }
          word.text += text[i++];
        }
        if (i >= text.size()) {
          Fail(fmt::format("line {}: the quote {} opened here is not closed; close it", word.line, text[open]));
        }
        ++i;
      } else {
        word.text += d;
        ++i;
      }
    }
    words.push_back(word);
  }
  return words;
}

enum class Arity { kNone, kOne, kMany };

struct Flag {
  std::string name;  // "--num-layers", or the part before ':' of a subcommand word
  std::vector<std::string> values;
};

struct Flags {
  std::map<std::string, Flag> given;  // the flags read (the last of a repeated flag, as argparse)
  std::vector<std::string> ignored;   // the flags and words not read, in order of appearance

  const Flag* Get(const std::string& name) const {
    auto it = given.find(name);
    return it == given.end() ? nullptr : &it->second;
  }
};

// Reads `--flag value`, `--flag=value`, `--flag v1 v2 ...` (kMany: up to the next flag or
// subcommand word) and `section:choice` subcommand words for the flags in `known`; everything
// else is collected in `ignored` (an unknown flag with the words after it).
Flags ReadFlags(const std::vector<Word>& words, const std::map<std::string, Arity>& known) {
  Flags flags;
  auto is_flag = [](const std::string& w) { return w.size() > 2 && w.compare(0, 2, "--") == 0; };
  auto ends_values = [&](const std::string& w) { return is_flag(w) || w.find(':') != std::string::npos; };
  auto ignore = [&](const std::string& w) {
    if (std::find(flags.ignored.begin(), flags.ignored.end(), w) == flags.ignored.end()) flags.ignored.push_back(w);
  };
  for (std::size_t i = 0; i < words.size(); ++i) {
    const Word& w = words[i];
    if (!is_flag(w.text)) {
      const std::size_t colon = w.text.find(':');
      if (colon != std::string::npos && known.count(w.text.substr(0, colon)) != 0) {
        flags.given[w.text.substr(0, colon)] = Flag{w.text.substr(0, colon), {w.text.substr(colon + 1)}};
      } else {
        ignore(w.text);
      }
      continue;
    }
    const std::size_t eq = w.text.find('=');
    const std::string name = w.text.substr(0, eq);
    auto it = known.find(name);
    if (it == known.end()) {
      ignore(name);
      while (eq == std::string::npos && i + 1 < words.size() && !ends_values(words[i + 1].text)) ++i;
      continue;
    }
    Flag flag{name, {}};
    if (eq != std::string::npos) flag.values.push_back(w.text.substr(eq + 1));
    switch (it->second) {
      case Arity::kNone:
        if (!flag.values.empty()) Fail(fmt::format("line {}: {} takes no value; give {} alone", w.line, w.text, name));
        break;
      case Arity::kOne:
        if (flag.values.empty()) {
          if (i + 1 >= words.size() || is_flag(words[i + 1].text)) {
            Fail(fmt::format("line {}: {} needs a value; give {} VALUE", w.line, name, name));
          }
          flag.values.push_back(words[++i].text);
        }
        break;
      case Arity::kMany:
        while (i + 1 < words.size() && !ends_values(words[i + 1].text)) flag.values.push_back(words[++i].text);
        break;
    }
    flags.given[name] = flag;
  }
  return flags;
}

std::int64_t IntegerValue(const Flag& flag, std::int64_t min, std::int64_t max) {
  const std::string& v = flag.values.front();
  std::int64_t x = 0;
  bool digits = !v.empty() && v.size() <= 18;
  for (char c : v) {
    digits = digits && std::isdigit(static_cast<unsigned char>(c));
    if (digits) x = x * 10 + (c - '0');
  }
  if (!digits || x < min || x > max) {
    Fail(fmt::format("{} {}: give a whole number from {} to {}", flag.name, v, min, max));
  }
  return x;
}

// The flags bmpipe reads as they are absent: an error naming both values when a flag (or its
// default, `absent`) differs from the problem's run.
void CheckValue(const Flags& flags, const std::string& name, std::int64_t absent, std::int64_t want,
                const std::string& key, std::int64_t max) {
  const Flag* flag = flags.Get(name);
  const std::int64_t given = flag ? IntegerValue(*flag, 0, max) : absent;
  if (given != want) {
    Fail(fmt::format("{} {}{}: the problem's run has {} = {}; this configuration is not that run (give {} {}, or the "
                     "problem of this configuration)",
                     name, given, flag ? "" : " (not given: Megatron's default)", key, want, name, want));
  }
}

void CheckSwitch(const Flags& flags, const std::string& name, bool want, const std::string& key) {
  const bool given = flags.Get(name) != nullptr;
  if (given != want) {
    Fail(fmt::format("{} is {}: the problem's run has {} = {}; this configuration is not that run ({} {}, or give the "
                     "problem of this configuration)",
                     name, given ? "given" : "not given", key, want ? "true" : "false", want ? "give" : "remove", name));
  }
}

std::string IgnoredNote(const std::vector<std::string>& ignored, const std::string& what) {
  return fmt::format("not read ({}): {}", what, fmt::join(ignored, " "));
}

// ---------------------------------------------------------------------------------------------
// Stages as counts of decoder layers, and where the embedding and the head go.

struct StageSpec {
  bool embedding = false, head = false;
  int decoders = 0;
};

// The plan of `stages` (chunk-major) with every layer at NoneOption. Fails when a stage would
// hold no layer of the problem, or the decoder layers do not add up.
Plan PlanOfStages(const Problem& problem, const std::vector<StageSpec>& stages, const std::string& what) {
  const ModelShape shape = ShapeOf(problem);
  int decoders = 0;
  for (const StageSpec& s : stages) decoders += s.decoders;
  if (decoders != shape.body()) {
    Fail(fmt::format("{} places {} decoder layers, but the problem has {}", what, decoders, shape.body()));
  }
  Plan plan;
  plan.option = NoneOptions(problem);
  plan.stage_begin.push_back(0);
  LayerIdx at = 0;
  const Pipeline& p = problem.pipeline;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const LayerIdx begin = at;
    if (stages[s].embedding) at = shape.body_begin;
    at += stages[s].decoders;
    if (stages[s].head) at = problem.num_layers();
    if (at == begin) {
      Fail(fmt::format("{}: stage {} (rank {}, chunk {}) holds no layer of the problem; bmpipe's stages hold at least "
                       "one (move a layer onto it)",
                       what, s, p.RankOf(static_cast<StageIdx>(s)), p.ChunkOf(static_cast<StageIdx>(s))));
    }
    plan.stage_begin.push_back(at);
  }
  return plan;
}

// Sets layer `l` of `plan` to its option whose meaning is `want`; `setting` names the
// configuration in the message when the layer has none.
void SetLayerOption(const Problem& problem, Plan& plan, LayerIdx l, Recompute want, const std::string& setting) {
  const Layer& layer = problem.layers[l];
  const OptionIdx o = FindRecompute(layer, want);
  if (o < 0) {
    std::vector<std::string> names;
    for (const LayerOption& option : layer.options) names.push_back(option.name);
    Fail(fmt::format("{} recomputes '{}' on layer {} ({}), which has no option meaning that (its options: {}); add an "
                     "option '{}' to the problem's layers, or change the setting",
                     setting, RecomputeName(want), l, layer.name, fmt::join(names, ", "), RecomputeName(want)));
  }
  plan.option[l] = o;
}

// ---------------------------------------------------------------------------------------------
// Megatron-LM

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
      {"--fp8-param-gather", Arity::kNone},
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

// Megatron-LM's --moe-layer-freq (moe_freq_type): N, one MoE layer in every N (layer i is MoE
// when i mod N == 0), or a Python list expression of 1 (MoE) and 0 (dense) per decoder layer made
// of [..] lists of digits, '+' (concatenation), '*' (repetition) and parentheses, the characters
// Megatron-LM's pattern check lets through. One entry per decoder layer.
std::vector<int> MoeLayerPattern(const Flag& flag, int layers) {
  const std::string& v = flag.values.front();
  const std::string what = fmt::format("{} \"{}\"", flag.name, v);
  if (v.find('[') == std::string::npos) {
    const int every = static_cast<int>(IntegerValue(flag, 1, kMaxLayers));
    std::vector<int> pattern(layers);
    for (int i = 0; i < layers; ++i) pattern[i] = i % every == 0 ? 1 : 0;
    return pattern;
  }
  std::size_t at = 0;
  const std::size_t most = static_cast<std::size_t>(kMaxLayers);
  auto bad = [&](const std::string& why) -> std::vector<int> {
    Fail(fmt::format("{}: {} at character {}; write the pattern as Megatron-LM takes it, e.g. \"[0]*3+[1]*58\"", what,
                     why, at + 1));
  };
  auto number = [&]() {
    std::size_t n = 0, start = at;
    while (at < v.size() && std::isdigit(static_cast<unsigned char>(v[at])) && at - start < 7) n = n * 10 + (v[at++] - '0');
    if (at == start) bad("a number is missing");
    return n;
  };
  std::function<std::vector<int>()> sum;
  auto atom = [&]() -> std::vector<int> {
    std::vector<int> list;
    if (at < v.size() && v[at] == '(') {
      ++at;
      list = sum();
      if (at >= v.size() || v[at] != ')') return bad("')' is missing");
      ++at;
    } else if (at < v.size() && v[at] == '[') {
      ++at;
      while (at < v.size() && v[at] != ']') {
        const std::size_t x = number();
        if (x > 1) return bad("an entry other than 0 or 1");
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
    Fail(fmt::format("{}: the pattern has {} entries, but the model has {} decoder layers (Megatron needs one per layer)",
                     what, pattern.size(), layers));
  }
  return pattern;
}

// Megatron's layout string as stages of layer characters: commas dropped, `(...)*N` unrolled
// once (no nesting), then `x*N`, then split at '|' (megatron/core/transformer/
// pipeline_parallel_layer_layout.py, parse_str_to_list).
std::vector<std::string> ExpandLayout(const std::string& layout) {
  const std::string flag = fmt::format("--pipeline-model-parallel-layout \"{}\"", layout);
  // Far beyond any layout of the problem sizes bmpipe reads.
  const std::size_t max_chars = 2 * static_cast<std::size_t>(kMaxLayers + kMaxStages);
  auto count_at = [&](const std::string& s, std::size_t& i) {
    std::size_t n = 0;
    const std::size_t start = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])) && i - start < 9) n = n * 10 + (s[i++] - '0');
    if (n > max_chars) Fail(fmt::format("{}: the count {} is more than any layout of this problem holds", flag, n));
    return n;
  };
  auto append = [&](std::string& out, const std::string& piece, std::size_t times) {
    if (out.size() + piece.size() * times > max_chars) {
      Fail(fmt::format("{}: it expands to more than {} characters; no layout of this problem is that long", flag, max_chars));
    }
    for (std::size_t k = 0; k < times; ++k) out += piece;
  };
  std::string s;
  for (char c : layout) {
    if (c != ',') s += c;
  }
  std::string grouped;
  for (std::size_t i = 0; i < s.size();) {
    if (s[i] == ')') Fail(fmt::format("{}: ')' without '('", flag));
    if (s[i] != '(') {
      grouped += s[i++];
      continue;
    }
    const std::size_t close = s.find(')', i);
    const std::string group = close == std::string::npos ? "" : s.substr(i + 1, close - i - 1);
    if (close == std::string::npos || group.empty() || group.find('(') != std::string::npos || close + 2 >= s.size() ||
        s[close + 1] != '*' || !std::isdigit(static_cast<unsigned char>(s[close + 2]))) {
      Fail(fmt::format("{}: a group must read (...)*N with at least one character inside and no nested parentheses; "
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
      Fail(fmt::format("{}: '*' must follow one character or a (group) and come before a count, as in t*4", flag));
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
    if (c == 'm') {
      Fail(fmt::format("{}: stage {} has 'm', a multi-token prediction layer, which bmpipe's problems do not model; "
                       "plan without MTP",
                       flag, stages.size() - 1));
    }
    if (c != 'E' && c != 't' && c != 'L') {
      Fail(fmt::format("{}: stage {} has '{}', which is not a layer; Megatron's layout characters are E (embedding), t "
                       "(decoder layer), L (loss and head), m (MTP), with '|' between stages",
                       flag, stages.size() - 1, c));
    }
    stages.back() += c;
  }
  return stages;
}

std::vector<StageSpec> MegatronLayoutStages(const Flag& flag, const Pipeline& p) {
  const std::vector<std::string> stages = ExpandLayout(flag.values.front());
  const std::string what = fmt::format("--pipeline-model-parallel-layout \"{}\"", flag.values.front());
  const int count = static_cast<int>(stages.size());
  if (count != p.stages()) {
    Fail(fmt::format("{}: it has {} stages, but the problem has {} ({} ranks x {} virtual stages); give {} stages "
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
    Fail(fmt::format("{}: the embedding E must come once, first, on stage 0", what));
  }
  if (std::count(flat.begin(), flat.end(), 'L') != 1 || !specs.back().head || stages.back().back() != 'L') {
    Fail(fmt::format("{}: the loss L must come once, last, on the last stage", what));
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
    Fail("--decoder-first/last-pipeline-num-layers and --account-for-embedding/loss-in-pipeline-split are given "
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
      Fail(fmt::format("--num-layers {} minus the first and last stages' layers leaves {} for {} middle stages, which "
                       "Megatron needs to divide evenly; change --decoder-first/last-pipeline-num-layers",
                       layers, left, ranks_left));
    }
    std::fill(per_rank.begin(), per_rank.end(), ranks_left > 0 ? left / ranks_left : 0);
    if (first) per_rank.front() = n_first;
    if (last) per_rank.back() = n_last;
  } else {
    const int n = layers + account_embedding + account_loss;
    if (n % p.ranks != 0) {
      Fail(fmt::format("--num-layers {}{} does not divide among --pipeline-model-parallel-size {}, which Megatron needs "
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
      Fail(fmt::format("rank {} gets {} decoder layers, which do not divide into {} virtual stages as Megatron needs; "
                       "give --pipeline-model-parallel-layout",
                       r, per_rank[r], chunks));
    }
    for (int v = 0; v < chunks; ++v) specs[v * p.ranks + r].decoders = per_rank[r] / chunks;
  }
  if (account_embedding && --specs.front().decoders < 0) Fail("the first stage has no layer for the embedding to replace");
  if (account_loss && --specs.back().decoders < 0) Fail("the last stage has no layer for the loss to replace");
  specs.front().embedding = true;
  specs.back().head = true;
  return specs;
}

// The virtual stages the flags give (1 when none), as Megatron derives them.
int MegatronChunks(const Flags& flags, int layers, int ranks) {
  const Flag* layout = flags.Get("--pipeline-model-parallel-layout");
  const Flag* per_rank = flags.Get("--num-virtual-stages-per-pipeline-rank");
  const Flag* per_stage = flags.Get("--num-layers-per-virtual-pipeline-stage");
  if ((layout != nullptr) + (per_rank != nullptr) + (per_stage != nullptr) > 1) {
    Fail("give at most one of --pipeline-model-parallel-layout, --num-virtual-stages-per-pipeline-rank and "
         "--num-layers-per-virtual-pipeline-stage (Megatron refuses more)");
  }
  if (layout) {
    const int stages = static_cast<int>(ExpandLayout(layout->values.front()).size());
    if (stages % ranks != 0) {
      Fail(fmt::format("--pipeline-model-parallel-layout \"{}\": its {} stages do not divide among "
                       "--pipeline-model-parallel-size {}; Megatron needs ranks x virtual stages of them",
                       layout->values.front(), stages, ranks));
    }
    return stages / ranks;
  }
  if (per_rank) return static_cast<int>(IntegerValue(*per_rank, 1, kMaxStages));
  if (per_stage) {
    if (flags.Get("--decoder-first-pipeline-num-layers") || flags.Get("--decoder-last-pipeline-num-layers")) {
      Fail("--num-layers-per-virtual-pipeline-stage with --decoder-first/last-pipeline-num-layers: Megatron needs "
           "--num-virtual-stages-per-pipeline-rank for an uneven split; give that instead");
    }
    const int n = static_cast<int>(IntegerValue(*per_stage, 1, kMaxLayers));
    const int total = layers + (flags.Get("--account-for-embedding-in-pipeline-split") != nullptr) +
                      (flags.Get("--account-for-loss-in-pipeline-split") != nullptr);
    if (total % ranks != 0 || (total / ranks) % n != 0) {
      Fail(fmt::format("--num-layers-per-virtual-pipeline-stage {}: the {} layers per rank do not divide into stages of "
                       "{} (Megatron needs them to)",
                       n, static_cast<double>(total) / ranks, n));
    }
    return total / ranks / n;
  }
  return 1;
}

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
      Fail("--recompute-granularity full needs --recompute-method block|uniform and --recompute-num-layers N (Megatron "
           "refuses it without them)");
    }
    const std::string how = method->values.front();
    const int n = static_cast<int>(IntegerValue(*count, 0, kMaxLayers));
    const std::string setting = fmt::format("--recompute-granularity full --recompute-method {} --recompute-num-layers {}", how, n);
    if (how == "uniform" && n != 1) {
      Fail(fmt::format("{}: uniform checkpoints groups of {} decoder layers as one unit, which bmpipe's per-layer "
                       "options do not model; give --recompute-num-layers 1 (every layer) or --recompute-method block",
                       setting, n));
    }
    if (how != "uniform" && how != "block") {
      Fail(fmt::format("--recompute-method {}: give block or uniform", how));
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
  if (kind != "selective") Fail(fmt::format("--recompute-granularity {}: give full or selective", kind));
  if (method) {
    Fail(fmt::format("--recompute-method {} with selective recomputation: Megatron refuses it; remove --recompute-method",
                     method->values.front()));
  }
  if (count) {
    Fail(fmt::format("--recompute-num-layers {} with selective recomputation: Megatron refuses it (selective applies to "
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
      Fail(fmt::format("--recompute-modules {}: recomputing '{}' is not modeled by bmpipe's options (core_attn, mlp, "
                       "moe, layernorm and mla_up_proj are); remove it",
                       fmt::join(names, " "), m));
    } else {
      Fail(fmt::format("--recompute-modules {}: '{}' is not a Megatron module; Megatron's are core_attn, mlp, layernorm, "
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
  CheckSwitch(flags, "--overlap-grad-reduce", t.overlap_grad_reduce, "training.overlap_grad_reduce");
  CheckValue(flags, "--context-parallel-size", 1, t.context_parallel, "training.context_parallel", kMaxRanks);
  CheckValue(flags, "--expert-model-parallel-size", 1, t.expert_parallel, "training.expert_parallel", 1 << 16);
  CheckValue(flags, "--expert-tensor-parallel-size", t.tensor_parallel,
             t.expert_tensor_parallel > 0 ? t.expert_tensor_parallel : t.tensor_parallel,
             "training.expert_tensor_parallel (0: tensor_parallel)", kMaxRanks);
  CheckSwitch(flags, "--fp8-format", t.precision == "fp8", "training.precision = fp8");
  CheckSwitch(flags, "--fp8-param-gather", t.fp8_params, "training.fp8_params");
  CheckSwitch(flags, "--disable-parameter-transpose-cache", t.no_fp8_transpose_cache,
              "training.no_fp8_transpose_cache");
  CheckSwitch(flags, "--tp-comm-overlap", t.tp_comm_overlap, "training.tp_comm_overlap");
  CheckSwitch(flags, "--optimizer-cpu-offload", t.offload_optimizer, "training.offload_optimizer");
  if (flags.Get("--cpu-offloading")) {
    Fail("--cpu-offloading: Megatron offloads the activations of whole layers and refuses it with pipeline parallelism "
         "or recomputation, which bmpipe's per-layer offload options do not describe; remove --cpu-offloading");
  }
  // ZeRO: the distributed optimizer is stage 1; Megatron-FSDP's sharding strategy names the stage.
  int stage = flags.Get("--use-distributed-optimizer") ? 1 : 0;
  if (flags.Get("--use-megatron-fsdp") || flags.Get("--use-custom-fsdp")) {
    const Flag* strategy = flags.Get("--data-parallel-sharding-strategy");
    const std::string name = strategy ? strategy->values.front() : "no_shard";  // Megatron-LM's default
    const std::map<std::string, int> stages = {{"no_shard", 0}, {"optim", 1}, {"optim_grads", 2}, {"optim_grads_params", 3}};
    auto it = stages.find(name);
    if (it == stages.end()) {
      Fail(fmt::format("--data-parallel-sharding-strategy {}: give no_shard, optim, optim_grads or optim_grads_params",
                       name));
    }
    stage = std::max(stage, it->second);
  }
  const int want_stage = ZeroStage(t);
  if (stage != want_stage) {
    Fail(fmt::format("the flags give ZeRO stage {} (--use-distributed-optimizer: 1; --use-megatron-fsdp with "
                     "--data-parallel-sharding-strategy optim_grads: 2, optim_grads_params: 3), but the problem's run has "
                     "training.zero_stage = {}; this configuration is not that run",
                     stage, want_stage));
  }
  // State dtypes: Megatron refuses them without the precision-aware optimizer.
  auto dtype = [&](const std::string& name) {
    const Flag* f = flags.Get(name);
    const std::string v = f ? f->values.front() : "fp32";
    if (v != "fp32" && v != "bf16") Fail(fmt::format("{} {}: bmpipe models fp32 and bf16 state; give one of them", name, v));
    if (v != "fp32" && !flags.Get("--use-precision-aware-optimizer")) {
      Fail(fmt::format("{} {} without --use-precision-aware-optimizer: Megatron refuses it; add "
                       "--use-precision-aware-optimizer",
                       name, v));
    }
    return v;
  };
  const std::string grads = dtype("--main-grads-dtype"), avg = dtype("--exp-avg-dtype"), avg_sq = dtype("--exp-avg-sq-dtype");
  if (grads != t.grad_dtype) {
    Fail(fmt::format("--main-grads-dtype {}: the problem's run has training.grad_dtype = {}; this configuration is not "
                     "that run",
                     grads, t.grad_dtype));
  }
  if (avg != t.optimizer_dtype || avg_sq != t.optimizer_dtype) {
    Fail(fmt::format("--exp-avg-dtype {} --exp-avg-sq-dtype {}: the problem's run has training.optimizer_dtype = {} for "
                     "both moments; this configuration is not that run",
                     avg, avg_sq, t.optimizer_dtype));
  }
}

// The MoE flags against the problem's `training.moe` (absent: a dense model).
void CheckMegatronMoe(const Flags& flags, const MoeInfo& moe, int layers) {
  const std::int64_t big = std::int64_t{1} << 24;
  CheckValue(flags, "--num-experts", 0, moe.experts, "training.moe.experts", big);
  if (!moe.enabled()) return;
  CheckValue(flags, "--moe-router-topk", 2, moe.top_k, "training.moe.top_k", big);
  if (flags.Get("--moe-ffn-hidden-size")) {
    CheckValue(flags, "--moe-ffn-hidden-size", 0, moe.expert_ffn, "training.moe.expert_ffn", big);
  }
  CheckValue(flags, "--moe-shared-expert-intermediate-size", 0, moe.shared_expert_ffn, "training.moe.shared_expert_ffn",
             big);
  std::vector<int> pattern(layers, 1);
  if (const Flag* freq = flags.Get("--moe-layer-freq")) pattern = MoeLayerPattern(*freq, layers);
  std::vector<int> dense;
  for (int i = 0; i < layers; ++i) {
    if (pattern[i] == 0) dense.push_back(i);
  }
  if (dense != moe.dense_layers) {
    Fail(fmt::format("--moe-layer-freq{}: dense decoder layers [{}], but the problem's run has training.moe.dense_layers "
                     "[{}]; this configuration is not that run",
                     flags.Get("--moe-layer-freq") ? "" : " (not given: every layer MoE)", fmt::join(dense, ", "),
                     fmt::join(moe.dense_layers, ", ")));
  }
  double factor = 0;  // dropless
  if (const Flag* f = flags.Get("--moe-expert-capacity-factor")) {
    const std::string& v = f->values.front();
    char* end = nullptr;
    factor = std::strtod(v.c_str(), &end);
    if (v.empty() || end != v.c_str() + v.size()) Fail(fmt::format("--moe-expert-capacity-factor {}: give a number", v));
    if (factor < 0) factor = 0;  // Megatron: negative means none
  }
  if (factor != moe.capacity_factor) {
    Fail(fmt::format("--moe-expert-capacity-factor {:g}{}: the problem's run has training.moe.capacity_factor = {:g} "
                     "(0: dropless); this configuration is not that run",
                     factor, flags.Get("--moe-expert-capacity-factor") ? "" : " (not given: dropless)",
                     moe.capacity_factor));
  }
  // Megatron's default dispatcher is allgather, which bmpipe does not cost: the flag is required.
  const Flag* dispatcher = flags.Get("--moe-token-dispatcher-type");
  const std::string type = dispatcher ? dispatcher->values.front() : std::string("allgather");
  if (type != moe.dispatcher) {
    Fail(fmt::format("--moe-token-dispatcher-type {}{}: the problem's run has training.moe.dispatcher = {}; this "
                     "configuration is not that run",
                     type, dispatcher ? "" : " (not given: Megatron's default)", moe.dispatcher));
  }
  const bool overlap = flags.Get("--overlap-moe-expert-parallel-comm") != nullptr;
  if (overlap != moe.comm_overlap) {
    Fail(fmt::format("--overlap-moe-expert-parallel-comm {}: the problem's run has training.moe.comm_overlap = {}; "
                     "this configuration is not that run",
                     overlap ? "given" : "not given", moe.comm_overlap ? "true" : "false"));
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
    Fail(fmt::format("--cuda-graph-impl {} --cuda-graph-scope {}: bmpipe costs CUDA graphs of the MoE router and "
                     "the dispatch preprocessing only (--cuda-graph-impl transformer_engine --cuda-graph-scope "
                     "moe_router moe_preprocess, training.moe.cuda_graphs); this configuration is not that run",
                     impl_name, scope ? fmt::format("{}", fmt::join(scope->values, " ")) : "(not given: full)"));
  }
  if (graphs != moe.cuda_graphs) {
    Fail(fmt::format("--cuda-graph-impl {}: the problem's run has training.moe.cuda_graphs = {}; this configuration "
                     "is not that run",
                     impl ? impl_name : "(not given: none)", moe.cuda_graphs ? "true" : "false"));
  }
}

Plan ReadMegatron(const std::string& text, const Problem& problem, std::vector<std::string>& notes) {
  const Flags flags = ReadFlags(ShellWords(text), MegatronFlags());
  const Pipeline& p = problem.pipeline;
  const ModelShape shape = ShapeOf(problem);
  CheckValue(flags, "--pipeline-model-parallel-size", 1, p.ranks, "pipeline.ranks", kMaxRanks);
  int layers = shape.body();
  if (const Flag* n = flags.Get("--num-layers")) {
    layers = static_cast<int>(IntegerValue(*n, 1, kMaxLayers));
    if (layers != shape.body()) {
      Fail(fmt::format("--num-layers {}: the problem has {} decoder layers (between its first and last layer); give "
                       "--num-layers {}",
                       layers, shape.body(), shape.body()));
    }
  } else {
    notes.push_back(fmt::format("--num-layers is not given; taken as the problem's {} decoder layers", shape.body()));
  }
  if (const Flag* mtp = flags.Get("--mtp-num-layers"); mtp && IntegerValue(*mtp, 0, kMaxLayers) > 0) {
    Fail(fmt::format("--mtp-num-layers {}: multi-token prediction layers are not modeled by bmpipe's problems; plan "
                     "without MTP",
                     mtp->values.front()));
  }
  const int chunks = MegatronChunks(flags, layers, p.ranks);
  if (chunks != p.chunks) {
    Fail(fmt::format("the configuration has {} virtual stages per rank{}, but the problem has pipeline.chunks {}; give "
                     "a configuration with {}",
                     chunks, flags.Get("--pipeline-model-parallel-layout") ? " (the layout's stages / the pipeline size)" : "",
                     p.chunks, p.chunks));
  }
  const ScheduleKind schedule = chunks > 1 ? ScheduleKind::kInterleavedOneFOneB : ScheduleKind::kOneFOneB;
  if (p.schedule != schedule) {
    Fail(fmt::format("Megatron runs {} with these flags, but the problem's schedule is {}; give the problem with "
                     "schedule {}",
                     ScheduleName(schedule), ScheduleName(p.schedule), ScheduleName(schedule)));
  }
  std::vector<StageSpec> specs;
  if (const Flag* layout = flags.Get("--pipeline-model-parallel-layout")) {
    for (const char* other : {"--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers",
                              "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"}) {
      if (flags.Get(other)) Fail(fmt::format("--pipeline-model-parallel-layout with {}: Megatron refuses both; give one", other));
    }
    specs = MegatronLayoutStages(*layout, p);
  } else {
    specs = MegatronSplitStages(flags, layers, p);
  }
  Plan plan = PlanOfStages(problem, specs, "the configuration");
  MegatronRecompute(flags, problem, plan);
  if (problem.training) {
    CheckMegatronTraining(flags, *problem.training);
    CheckMegatronMoe(flags, problem.training->moe, layers);
  } else {
    notes.push_back("the problem has no `training` section: the parallel and batch flags are not checked");
  }
  std::vector<std::string> ignored = flags.ignored;
  if (flags.Get("--overlap-param-gather")) ignored.push_back("--overlap-param-gather");
  if (!ignored.empty()) notes.push_back(IgnoredNote(ignored, "they do not change the pipeline plan"));
  return plan;
}

// ---------------------------------------------------------------------------------------------
// torchtitan arguments

const std::map<std::string, Arity>& TorchTitanFlags() {
  static const std::map<std::string, Arity> flags = {
      {"--parallelism.pipeline_parallel_degree", Arity::kOne},
      {"--parallelism.pipeline_parallel_schedule", Arity::kOne},
      {"--parallelism.pipeline_parallel_schedule_csv", Arity::kOne},
      {"--parallelism.module_fqns_per_model_part", Arity::kMany},
      {"--parallelism.pipeline_parallel_microbatch_size", Arity::kOne},
      {"--parallelism.tensor_parallel_degree", Arity::kOne},
      {"--parallelism.data_parallel_shard_degree", Arity::kOne},
      {"--training.local_batch_size", Arity::kOne},
      {"--training.global_batch_size", Arity::kOne},
      {"--training.seq_len", Arity::kOne},
      {"--parallelism.data_parallel_replicate_degree", Arity::kOne},
      {"--parallelism.enable_sequence_parallel", Arity::kNone},
      {"--parallelism.no-enable-sequence-parallel", Arity::kNone},
      {"--training.disable_cuda_graphs", Arity::kNone},
      {"--parallelism.context_parallel_degree", Arity::kOne},
      {"--parallelism.expert_parallel_degree", Arity::kOne},
      {"--parallelism.fsdp_reshard_after_forward", Arity::kOne},
      {"activation_checkpoint", Arity::kOne},
  };
  return flags;
}

Plan ReadTorchTitan(const std::string& text, const Problem& problem, std::vector<std::string>& notes) {
  const Flags flags = ReadFlags(ShellWords(text), TorchTitanFlags());
  const Pipeline& p = problem.pipeline;
  const ModelShape shape = ShapeOf(problem);
  const std::int64_t big = std::int64_t{1} << 24;
  auto value = [&](const std::string& name, std::int64_t absent, std::int64_t min, std::int64_t max) {
    const Flag* f = flags.Get(name);
    return f ? IntegerValue(*f, min, max) : absent;
  };
  auto check = [&](const std::string& name, std::int64_t given, std::int64_t want, const std::string& key) {
    if (given != want) {
      Fail(fmt::format("{} {}: the problem's run has {} = {}; this configuration is not that run (give {} {}, or the "
                       "problem of this configuration)",
                       name, given, key, want, name, want));
    }
  };
  check("--parallelism.pipeline_parallel_degree", value("--parallelism.pipeline_parallel_degree", 1, 1, kMaxRanks),
        p.ranks, "pipeline.ranks");
  const Flag* schedule = flags.Get("--parallelism.pipeline_parallel_schedule");
  const std::string name = schedule ? schedule->values.front() : "1F1B";
  const std::optional<ScheduleKind> kind = ScheduleFromTorchClass(name);
  if (!kind) {
    Fail(fmt::format("--parallelism.pipeline_parallel_schedule {}: bmpipe simulates {}; give one of those", name,
                     TorchScheduleClasses()));
  }
  if (*kind != p.schedule) {
    Fail(fmt::format("--parallelism.pipeline_parallel_schedule {}: the problem's schedule is {}; give the matching "
                     "schedule or the problem of this configuration",
                     name, ScheduleName(p.schedule)));
  }
  const Flag* parts = flags.Get("--parallelism.module_fqns_per_model_part");
  if (!parts || parts->values.empty()) {
    Fail("--parallelism.module_fqns_per_model_part is not given: without it torchtitan splits the model itself; give "
         "the modules of each stage (bmpipe export --to torchtitan writes them)");
  }
  if (static_cast<int>(parts->values.size()) != p.stages()) {
    Fail(fmt::format("--parallelism.module_fqns_per_model_part has {} stages, but the problem has {} ({} ranks x {} "
                     "virtual stages); give one argument per stage",
                     parts->values.size(), p.stages(), p.ranks, p.chunks));
  }
  std::vector<StageSpec> specs(parts->values.size());
  int next = 0;
  for (std::size_t s = 0; s < specs.size(); ++s) {
    const std::string& part = parts->values[s];
    std::size_t start = 0;
    bool norm = false;
    while (start <= part.size()) {
      std::size_t end = part.find(',', start);
      if (end == std::string::npos) end = part.size();
      const std::string fqn = part.substr(start, end - start);
      start = end + 1;
      const std::string where = fmt::format("--parallelism.module_fqns_per_model_part: stage {} ('{}')", s, part);
      if (fqn == "tok_embeddings") {
        if (s != 0) Fail(where + ": tok_embeddings must be on stage 0");
        specs[s].embedding = true;
      } else if (fqn == "norm" || fqn == "lm_head") {
        if (s + 1 != specs.size()) Fail(fmt::format("{}: {} must be on the last stage", where, fqn));
        if (fqn == "norm") norm = true;
        else specs[s].head = true;
      } else if (fqn.compare(0, 7, "layers.") == 0 && fqn.size() > 7 && fqn.size() < 14 &&
                 std::all_of(fqn.begin() + 7, fqn.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
        const int i = std::stoi(fqn.substr(7));
        if (i != next) {
          Fail(fmt::format("{}: {} comes where layers.{} belongs; list layers.0 to layers.{} in order, each once", where,
                           fqn, next, shape.body() - 1));
        }
        ++next;
        ++specs[s].decoders;
      } else {
        Fail(fmt::format("{}: '{}' is not a module bmpipe maps to the problem's layers (tok_embeddings, layers.<i>, "
                         "norm, lm_head)",
                         where, fqn));
      }
    }
    if (s + 1 == specs.size() && (!norm || !specs[s].head)) {
      Fail(fmt::format("--parallelism.module_fqns_per_model_part: the last stage ('{}') needs norm and lm_head", part));
    }
  }
  if (!specs.front().embedding) Fail("--parallelism.module_fqns_per_model_part: stage 0 needs tok_embeddings");
  Plan plan = PlanOfStages(problem, specs, "--parallelism.module_fqns_per_model_part");

  const std::int64_t microbatch = value("--parallelism.pipeline_parallel_microbatch_size", 1, 1, big);
  const Flag* local = flags.Get("--training.local_batch_size");
  if (!local) Fail("--training.local_batch_size is not given; give the micro-batches x the microbatch size");
  const std::int64_t local_size = IntegerValue(*local, 1, big);
  if (local_size % microbatch != 0 || local_size / microbatch != p.micro_batches) {
    Fail(fmt::format("--training.local_batch_size {} / --parallelism.pipeline_parallel_microbatch_size {} is torchtitan's "
                     "microbatch count, but the problem has {} micro-batches; give --training.local_batch_size {}",
                     local_size, microbatch, p.micro_batches, microbatch * p.micro_batches));
  }
  if (problem.training) {
    const TrainingInfo& t = *problem.training;
    check("--parallelism.pipeline_parallel_microbatch_size", microbatch, t.micro_batch_size, "training.micro_batch_size");
    for (const auto& [flag, want, key] : std::vector<std::tuple<std::string, std::int64_t, std::string>>{
             {"--training.global_batch_size", t.global_batch_size, "training.global_batch_size"},
             {"--training.seq_len", t.seq_length, "training.seq_length"},
             {"--parallelism.tensor_parallel_degree", t.tensor_parallel, "training.tensor_parallel"}}) {
      if (flags.Get(flag)) check(flag, value(flag, 0, -1, big), want, key);
    }
    check("--parallelism.context_parallel_degree", value("--parallelism.context_parallel_degree", 1, 1, kMaxRanks),
          t.context_parallel, "training.context_parallel");
    check("--parallelism.expert_parallel_degree", value("--parallelism.expert_parallel_degree", 1, 1, kMaxRanks),
          t.expert_parallel, "training.expert_parallel");
    // Data parallel: replicated for ZeRO 0, else sharded with FSDP, whose parameters stay
    // gathered from the forward to the backward (ZeRO 1, 2) or are resharded (ZeRO 3).
    const std::int64_t replicate = value("--parallelism.data_parallel_replicate_degree", 1, 1, big);
    const std::int64_t shard = value("--parallelism.data_parallel_shard_degree", -1, -1, big);
    const int stage = ZeroStage(t);
    if (t.data_parallel > 1) {
      if (stage == 0) {
        check("--parallelism.data_parallel_replicate_degree", replicate, t.data_parallel,
              "training.data_parallel (replicated: training.zero_stage = 0)");
        check("--parallelism.data_parallel_shard_degree", shard, 1, "training.zero_stage = 0 (no sharding)");
      } else {
        check("--parallelism.data_parallel_replicate_degree", replicate, 1, "training.zero_stage >= 1 (sharded)");
        if (shard != -1) {
          check("--parallelism.data_parallel_shard_degree", shard, t.data_parallel,
                "training.data_parallel (sharded: training.zero_stage >= 1)");
        }
        const Flag* policy = flags.Get("--parallelism.fsdp_reshard_after_forward");
        const std::string rule = policy ? policy->values.front() : "default";
        if (rule != "default" && rule != "always" && rule != "never") {
          Fail(fmt::format("--parallelism.fsdp_reshard_after_forward {}: give default, always or never", rule));
        }
        // torchtitan's default: no resharding with pipeline parallelism, else resharding.
        const bool reshard = rule == "always" || (rule == "default" && p.ranks == 1);
        if (reshard != (stage == 3)) {
          Fail(fmt::format("--parallelism.fsdp_reshard_after_forward {}{}: FSDP then {} the parameters after the "
                           "forward, which is ZeRO {}, but the problem's run has training.zero_stage = {}; give "
                           "--parallelism.fsdp_reshard_after_forward {}",
                           rule, policy ? "" : " (not given: torchtitan's default)", reshard ? "reshards" : "keeps",
                           reshard ? "3" : "1 or 2", stage, stage == 3 ? "always" : "never"));
        }
      }
    }
  } else {
    notes.push_back("the problem has no `training` section: the parallel and batch arguments are not checked");
  }
  const Flag* ac = flags.Get("activation_checkpoint");
  const std::string mode = ac ? ac->values.front() : "selective";  // torchtitan's default
  if (mode == "full") {
    for (LayerIdx l = shape.body_begin; l < shape.body_end; ++l) {
      SetLayerOption(problem, plan, l, Recompute{kRecomputeLayer}, "activation_checkpoint:full");
    }
  } else if (mode != "none") {
    Fail(fmt::format("activation_checkpoint:{}{}: torchtitan's {} checkpointing is none of bmpipe's recomputation options; "
                     "give activation_checkpoint:none or activation_checkpoint:full",
                     mode, ac ? "" : " (not given: torchtitan's default)", mode));
  }
  if (!flags.ignored.empty()) notes.push_back(IgnoredNote(flags.ignored, "they do not change the pipeline plan"));
  return plan;
}

// ---------------------------------------------------------------------------------------------
// Python literals (the DeepSpeed module)

// Reads the top-level `NAME = <literal>` assignments of a Python module as a JSON object: ints,
// floats, strings, True/False/None, lists, tuples and dicts with string keys, across lines inside
// brackets, with '#' comments. Nothing is executed; other statements (imports, classes, functions,
// assignments of expressions) are skipped, and a name assigned an expression is recorded in
// `computed` so that reading it says so.
class PythonLiterals {
 public:
  explicit PythonLiterals(const std::string& text) : text_(text) {}

  Json Read(std::vector<std::string>& computed) {
    Json out = Json::object();
    std::size_t line_start = 0;
    while (line_start < text_.size()) {
      pos_ = line_start;
      std::string name;
      while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) {
        name += text_[pos_++];
      }
      SkipBlanks();
      const bool assignment = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) && pos_ < text_.size() &&
                              text_[pos_] == '=' && (pos_ + 1 >= text_.size() || text_[pos_ + 1] != '=');
      std::size_t next = text_.find('\n', line_start);
      next = next == std::string::npos ? text_.size() : next + 1;
      if (assignment) {
        ++pos_;
        if (std::optional<Json> value = Value(0); value && AtLineEnd()) {
          out[name] = std::move(*value);
          computed.erase(std::remove(computed.begin(), computed.end(), name), computed.end());
          next = pos_;
        } else {
          out.erase(name);
          computed.push_back(name);
        }
      }
      line_start = next;
    }
    return out;
  }

 private:
  void SkipBlanks() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }
  // Inside brackets: blanks, newlines, comments and backslash-newlines.
  void SkipSpace() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else if (c == '\\' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '\n') {
        pos_ += 2;
      } else {
        break;
      }
    }
  }
  bool AtLineEnd() {
    SkipBlanks();
    if (pos_ < text_.size() && text_[pos_] == '#') {
      while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
    }
    if (pos_ < text_.size() && text_[pos_] == '\r') ++pos_;
    if (pos_ >= text_.size()) return true;
    if (text_[pos_] != '\n') return false;
    ++pos_;
    return true;
  }

  std::optional<Json> Value(int depth) {
    if (depth > kMaxDocumentDepth) return std::nullopt;
    depth > 0 ? SkipSpace() : SkipBlanks();
    if (pos_ >= text_.size()) return std::nullopt;
    const char c = text_[pos_];
    if (c == '[' || c == '(') return Sequence(c == '[' ? ']' : ')', depth);
    if (c == '{') return Dict(depth);
    if (c == '"' || c == '\'') return String();
    if (c == '-' || c == '+' || std::isdigit(static_cast<unsigned char>(c))) return Number();
    for (const auto& [word, value] : {std::pair<const char*, Json>{"True", true}, {"False", false}, {"None", nullptr}}) {
      const std::size_t n = std::char_traits<char>::length(word);
      if (text_.compare(pos_, n, word) == 0 &&
          (pos_ + n >= text_.size() || !(std::isalnum(static_cast<unsigned char>(text_[pos_ + n])) || text_[pos_ + n] == '_'))) {
        pos_ += n;
        return value;
      }
    }
    return std::nullopt;
  }

  std::optional<Json> Sequence(char close, int depth) {
    ++pos_;
    Json out = Json::array();
    while (true) {
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == close) {
        ++pos_;
        return out;
      }
      std::optional<Json> item = Value(depth + 1);
      if (!item) return std::nullopt;
      out.push_back(std::move(*item));
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
      } else if (pos_ >= text_.size() || text_[pos_] != close) {
        return std::nullopt;
      }
    }
  }

  std::optional<Json> Dict(int depth) {
    ++pos_;
    Json out = Json::object();
    while (true) {
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == '}') {
        ++pos_;
        return out;
      }
      std::optional<Json> key = Value(depth + 1);
      if (!key || !key->is_string()) return std::nullopt;
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != ':') return std::nullopt;
      ++pos_;
      std::optional<Json> item = Value(depth + 1);
      if (!item) return std::nullopt;
      out[key->get<std::string>()] = std::move(*item);
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
      } else if (pos_ >= text_.size() || text_[pos_] != '}') {
        return std::nullopt;
      }
    }
  }

  std::optional<Json> String() {
    const char quote = text_[pos_++];
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != quote && text_[pos_] != '\n') {
      if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) {
        const char e = text_[pos_ + 1];
        out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
        pos_ += 2;
      } else {
        out += text_[pos_++];
      }
    }
    if (pos_ >= text_.size() || text_[pos_] != quote) return std::nullopt;
    ++pos_;
    return out;
  }

  std::optional<Json> Number() {
    const std::size_t start = pos_;
    if (text_[pos_] == '-' || text_[pos_] == '+') ++pos_;
    std::string digits;
    bool real = false;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (std::isdigit(static_cast<unsigned char>(c))) {
        digits += c;
      } else if (c == '.' || c == 'e' || c == 'E' || ((c == '-' || c == '+') && !digits.empty() && (digits.back() == 'e' || digits.back() == 'E'))) {
        real = true;
        digits += c;
      } else if (c != '_') {
        break;
      }
      ++pos_;
    }
    if (digits.empty() || !std::isdigit(static_cast<unsigned char>(digits.front()))) return std::nullopt;
    const bool negative = text_[start] == '-';
    if (real) {
      const Json parsed = Json::parse(digits, nullptr, false);
      if (parsed.is_discarded()) return std::nullopt;
      return negative ? Json(-parsed.get<double>()) : parsed;
    }
    if (digits.size() > 18) return std::nullopt;
    const std::int64_t value = std::stoll(digits);
    return Json(negative ? -value : value);
  }

  const std::string& text_;
  std::size_t pos_ = 0;
};

Plan ReadDeepSpeed(const std::string& text, const Problem& problem, std::vector<std::string>& notes) {
  std::vector<std::string> computed;
  const Json doc = PythonLiterals(text).Read(computed);
  JsonCursor root(doc, "");
  auto required = [&](const char* name, const char* what) {
    if (std::find(computed.begin(), computed.end(), name) != computed.end()) {
      Fail(fmt::format("{} is assigned an expression; bmpipe reads literal values only (nothing is executed): write "
                       "{} as a literal",
                       name, what));
    }
    return root.Required(name, what);
  };
  const Pipeline& p = problem.pipeline;
  if (p.chunks > 1 || p.schedule != ScheduleKind::kOneFOneB) {
    Fail(fmt::format("DeepSpeed's pipeline engine runs 1F1B without virtual stages, but the problem's schedule is {} "
                     "with pipeline.chunks {}; give the problem of this run",
                     ScheduleName(p.schedule), p.chunks));
  }
  JsonCursor stages = required("num_stages", "the pipeline stages");
  if (stages.Integer(1, kMaxRanks, "") != p.ranks) stages.Fail(fmt::format("the problem has {} pipeline ranks", p.ranks));
  JsonCursor parts = required("parts", "the first layer of each stage, and the layer count at the end");
  const std::vector<JsonCursor> bounds = parts.Elements();
  if (static_cast<int>(bounds.size()) != p.ranks + 1) {
    parts.Fail(fmt::format("needs {} entries: the first layer of each of the {} stages, then {} (the layers)", p.ranks + 1,
                           p.ranks, problem.num_layers()));
  }
  const std::string layers_fix = fmt::format("the problem has {} layers", problem.num_layers());
  Plan plan;
  plan.option = NoneOptions(problem);
  for (std::size_t s = 0; s < bounds.size(); ++s) {
    const LayerIdx at = static_cast<LayerIdx>(bounds[s].Integer(0, problem.num_layers(), layers_fix));
    if ((s == 0 && at != 0) || (s + 1 == bounds.size() && at != problem.num_layers()) ||
        (s > 0 && at <= plan.stage_begin.back())) {
      bounds[s].Fail(fmt::format("parts must start at 0, rise strictly (every stage holds a layer) and end at {}, the "
                                 "problem's layers",
                                 problem.num_layers()));
    }
    plan.stage_begin.push_back(at);
  }
  std::int64_t interval = 0;  // PipelineModule's default
  if (auto i = root.Optional("activation_checkpoint_interval")) interval = i->Integer(0, kMaxLayers, "");
  JsonCursor config = required("ds_config", "the DeepSpeed configuration dict");
  if (auto pipe = config.Optional("pipeline")) {
    // The engine applies the configuration's interval when it is > 0 (engine.py).
    if (auto i = pipe->Optional("activation_checkpoint_interval")) interval = std::max(interval, i->Integer(0, kMaxLayers, ""));
  }
  if (interval > 1) {
    Fail(fmt::format("activation_checkpoint_interval {}: DeepSpeed then checkpoints blocks of {} layers as one unit, "
                     "which bmpipe's per-layer options do not model; give 0 or 1",
                     interval, interval));
  }
  // At interval 1 the module's _is_checkpointable checkpoints the listed layers whole.
  if (interval == 1) {
    JsonCursor listed = required("checkpoint_layers", "the layers DeepSpeed checkpoints");
    LayerIdx previous = -1;
    for (const JsonCursor& item : listed.Elements(true)) {
      const LayerIdx l = static_cast<LayerIdx>(item.Integer(0, problem.num_layers() - 1, layers_fix));
      if (l <= previous) item.Fail("list the checkpointed layers in increasing order, each once");
      previous = l;
      SetLayerOption(problem, plan, l, Recompute{kRecomputeLayer}, "checkpoint_layers");
    }
  }
  JsonCursor steps = config.Required("gradient_accumulation_steps", "the micro-batches of one iteration");
  if (steps.Integer(1, kMaxMicroBatches, "") != p.micro_batches) {
    steps.Fail(fmt::format("the pipeline engine runs this many micro-batches; the problem has {}", p.micro_batches));
  }
  if (problem.training) {
    const TrainingInfo& t = *problem.training;
    const std::int64_t big = std::int64_t{1} << 24;
    if (auto m = config.Optional("train_micro_batch_size_per_gpu"); m && m->Integer(1, big, "") != t.micro_batch_size) {
      m->Fail(fmt::format("the problem's run has training.micro_batch_size = {}; this configuration is not that run",
                          t.micro_batch_size));
    }
    if (auto b = config.Optional("train_batch_size"); b && b->Integer(1, big, "") != t.global_batch_size) {
      b->Fail(fmt::format("the problem's run has training.global_batch_size = {}; this configuration is not that run",
                          t.global_batch_size));
    }
    std::int64_t stage = 0;
    bool offload = false;
    std::optional<JsonCursor> zero = config.Optional("zero_optimization");
    if (zero) {
      if (auto s = zero->Optional("stage")) stage = s->Integer(0, 3, "");
      if (auto o = zero->Optional("offload_optimizer")) {
        if (auto device = o->Optional("device")) {
          const std::string d = device->String();
          if (d != "cpu" && d != "none") device->Fail("bmpipe models the optimizer offloaded to cpu, or none");
          offload = d == "cpu";
        }
      }
    }
    const int want_stage = ZeroStage(t);
    if (stage != want_stage) {
      (zero ? *zero : config)
          .FailAt(fmt::format("ZeRO stage {}, but the problem's run has training.zero_stage = {}; this configuration is "
                              "not that run",
                              stage, want_stage));
    }
    if (offload != t.offload_optimizer) {
      (zero ? *zero : config)
          .FailAt(fmt::format("the optimizer is {}offloaded, but the problem's run has training.offload_optimizer = {}; "
                              "this configuration is not that run",
                              offload ? "" : "not ", t.offload_optimizer ? "true" : "false"));
    }
    // Gradients accumulate in data_types.grad_accum_dtype, by default the model's (bf16).
    std::string grads = "bf16";
    std::optional<JsonCursor> types = config.Optional("data_types");
    if (types) {
      if (auto g = types->Optional("grad_accum_dtype")) {
        // DeepSpeed's DtypeEnum spellings.
        const std::string d = g->String();
        if (d == "fp32" || d == "float32" || d == "float" || d == "torch.float32") grads = "fp32";
        else if (d == "bf16" || d == "bfloat16" || d == "torch.bfloat16") grads = "bf16";
        else g->Fail("bmpipe models fp32 and bf16 gradients (DeepSpeed: fp32, float32, bf16, bfloat16)");
      }
    }
    if (grads != t.grad_dtype) {
      (types ? *types : config)
          .FailAt(fmt::format("gradients accumulate in {}{}, but the problem's run has training.grad_dtype = {}; this "
                              "configuration is not that run",
                              grads, types ? "" : " (no data_types.grad_accum_dtype: the model's dtype)", t.grad_dtype));
    }
  } else {
    notes.push_back("the problem has no `training` section: the batch sizes and ZeRO stage are not checked");
  }
  return plan;
}

// ---------------------------------------------------------------------------------------------
// Detection

bool IsScheduleCsvRow(const std::string& line) {
  // Cells <stage><action><micro-batch>, e.g. 0F3, 2B1, 1SEND_F0, or empty (idle).
  std::size_t i = 0;
  bool any = false;
  while (i <= line.size()) {
    std::size_t end = line.find(',', i);
    if (end == std::string::npos) end = line.size();
    const std::string cell = line.substr(i, end - i);
    if (!cell.empty()) {
      std::size_t k = 0;
      while (k < cell.size() && std::isdigit(static_cast<unsigned char>(cell[k]))) ++k;
      const std::size_t letters = k;
      while (k < cell.size() && (std::isupper(static_cast<unsigned char>(cell[k])) || cell[k] == '_')) ++k;
      while (k < cell.size() && std::isdigit(static_cast<unsigned char>(cell[k]))) ++k;
      if (letters == 0 || k == letters || k != cell.size()) return false;
      any = true;
    }
    i = end + 1;
  }
  return any;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
    start = end + 1;
  }
  return lines;
}

bool StartsWith(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

}  // namespace

std::vector<std::string> PlanFormatNames() { return {"json", "mindformers", "megatron", "deepspeed", "torchtitan", "csv"}; }

std::string PlanFormatName(PlanFormat format) { return PlanFormatNames()[static_cast<std::size_t>(format)]; }

Result<PlanFormat> ParsePlanFormat(const std::string& name) {
  const std::vector<std::string> names = PlanFormatNames();
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<PlanFormat>(i);
  }
  return InvalidInput(fmt::format("--plan-format {}: unknown format{}; formats: {}", name, DidYouMean(name, names),
                                  fmt::join(names, ", ")));
}

Result<PlanFormat> DetectPlanFormat(const std::string& text) {
  std::vector<std::string> code;  // the lines that are not blank or comments, trimmed on the left
  for (const std::string& line : Lines(text)) {
    const std::size_t first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line[first] != '#') code.push_back(line.substr(first));
  }
  if (code.empty()) return PlanFormat::kJson;  // the document reader says it is empty
  if (IsScheduleCsvRow(code.front())) return PlanFormat::kCsv;
  bool python = false, titan = false;
  for (const std::string& line : code) {
    if (StartsWith(line, "--parallelism.") || StartsWith(line, "--training.") || StartsWith(line, "activation_checkpoint:")) {
      titan = true;
    }
    python = python || StartsWith(line, "import ") || StartsWith(line, "from ") || StartsWith(line, "class ") ||
             StartsWith(line, "def ");
  }
  if (titan) return PlanFormat::kTorchTitan;
  if (python) {
    if (text.find("deepspeed") != std::string::npos || text.find("PipelineModule") != std::string::npos) {
      return PlanFormat::kDeepSpeed;
    }
    return InvalidInput("the file is a Python module that names neither DeepSpeed nor torchtitan; bmpipe reads the "
                        "module `export --to deepspeed` writes (give --plan-format deepspeed if it is one)");
  }
  for (const std::string& line : code) {
    if ((StartsWith(line, "--") && line.size() > 2 && std::isalpha(static_cast<unsigned char>(line[2]))) ||
        line.find(" --pipeline-model-parallel-size") != std::string::npos ||
        line.find(" --num-layers") != std::string::npos) {
      return PlanFormat::kMegatron;
    }
  }
  // A document: a MindFormers configuration has its pipeline lists and no stages.
  Result<Json> doc = ParseDocument(text, "");
  if (doc.ok()) {
    const Json& j = doc.value();
    if (j.is_object() && !j.contains("stages") && (j.contains("parallel_config") || j.contains("recompute_config"))) {
      return PlanFormat::kMindFormers;
    }
  }
  return PlanFormat::kJson;
}

Result<Plan> ReadLauncherPlan(const std::string& text, PlanFormat format, const Problem& problem,
                              const std::string& source, std::vector<std::string>* notes) {
  if (Status valid = CheckDocumentText(text, source); !valid.ok()) return valid.error();
  std::vector<std::string> unused;
  std::vector<std::string>& out = notes ? *notes : unused;
  switch (format) {
    case PlanFormat::kJson:
    case PlanFormat::kMindFormers: {
      Result<Json> doc = ParseDocument(text, source);
      if (!doc.ok()) return doc.error();
      if (format == PlanFormat::kMindFormers) return ReadMindFormersPlan(doc.value(), problem, source);
      Result<PlanDocument> plan = ReadPlan(doc.value(), problem, source);
      if (!plan.ok()) return plan.error();
      return plan.value().plan;
    }
    case PlanFormat::kMegatron:
      return ReadDocument<Plan>(source, [&] { return ReadMegatron(text, problem, out); });
    case PlanFormat::kDeepSpeed:
      return ReadDocument<Plan>(source, [&] { return ReadDeepSpeed(text, problem, out); });
    case PlanFormat::kTorchTitan:
      return ReadDocument<Plan>(source, [&] { return ReadTorchTitan(text, problem, out); });
    case PlanFormat::kCsv:
      return InvalidInput(fmt::format("{}: a pipeline schedule CSV fixes the order of the ops, not the stages or the "
                                      "recomputation; give the plan (plan JSON) or the launcher configuration that "
                                      "names this CSV (e.g. the torchtitan arguments)",
                                      source));
  }
  return InternalError("unknown plan format");
}

Result<LoadedPlan> LoadAnyPlan(const std::string& path, std::optional<PlanFormat> format, const Problem& problem) {
  Result<std::string> text = LoadText(path);
  if (!text.ok()) return text.error();
  LoadedPlan loaded;
  if (format) {
    loaded.format = *format;
  } else {
    if (Status valid = CheckDocumentText(text.value(), path); !valid.ok()) return valid.error();
    Result<PlanFormat> detected = DetectPlanFormat(text.value());
    if (!detected.ok()) return InvalidInput(path + ": " + detected.error().message);
    loaded.format = detected.value();
  }
  if (loaded.format == PlanFormat::kJson) {
    // As LoadPlan reads it, with the solver the file names.
    Result<Json> doc = ParseDocument(text.value(), path);
    if (!doc.ok()) return doc.error();
    Result<PlanDocument> plan = ReadPlan(doc.value(), problem, path);
    if (!plan.ok()) return plan.error();
    loaded.document = plan.value();
    return loaded;
  }
  Result<Plan> plan = ReadLauncherPlan(text.value(), loaded.format, problem, path, &loaded.notes);
  if (!plan.ok()) return plan.error();
  loaded.document.plan = plan.value();
  return loaded;
}

}  // namespace bmpipe
