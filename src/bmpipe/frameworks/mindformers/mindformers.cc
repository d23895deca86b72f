// MindFormers: its per-stage recomputation settings and order, and its YAML lists written and
// read back (mindformers.h).
#include <algorithm>
#include <array>
#include <cstdint>

#include <fmt/format.h>

#include "bmpipe/core/json_cursor.h"
#include "bmpipe/core/text.h"
#include "bmpipe/frameworks/mindformers/mindformers.h"
#include "bmpipe/frameworks/settings.h"
#include "bmpipe/frameworks/stages.h"
#include "bmpipe/problem/layer_roles.h"
#include "bmpipe/sim/simulator.h"

namespace bmpipe {
namespace {

constexpr unsigned kMindFormersSelect = kRecomputeMlpActivation;
constexpr unsigned kMindFormersComm = kRecomputeNorms;

// MindFormers' order within a stage, from its first layer: full (0), select and comm together (1),
// one of them (2), none (3); -1 for an option it has no list for.
int MindFormersRank(const Layer& layer, OptionIdx o) {
  const Result<Recompute> r = ParseRecompute(layer.options[o].name);
  if (!r.ok()) return -1;
  if (r.value().none()) return 3;
  if (r.value().full()) return 0;
  if (r.value().parts == (kMindFormersSelect | kMindFormersComm)) return 1;
  if (r.value().parts == kMindFormersSelect || r.value().parts == kMindFormersComm) return 2;
  return -1;
}

// What a layer's option means to the frameworks. MindFormers: FULL, BOTH (select and
// select_comm), SLCT, COMM. Megatron: full, or selective with modules.
enum class Kind { kNone, kSelect, kComm, kBoth, kFull, kOther };

Kind KindOf(const std::string& option) {
  const Result<Recompute> r = ParseRecompute(option);
  if (!r.ok()) return Kind::kOther;
  if (r.value().none()) return Kind::kNone;
  if (r.value().full()) return Kind::kFull;
  switch (r.value().parts) {
    case kRecomputeMlpActivation:
      return Kind::kSelect;
    case kRecomputeNorms:
      return Kind::kComm;
    case kRecomputeMlpActivation | kRecomputeNorms:
      return Kind::kBoth;
    default:
      return Kind::kOther;
  }
}

// An int, a list of P, or a V x P list, as a V x P table. `all` is the value `true` stands for.
// Every entry is a layer count or offset, so it lies within +-`layers`.
std::vector<std::vector<int>> ReadTable(const JsonCursor& c, int ranks, int chunks, int all_value, bool allow_bool,
                                        int layers) {
  const std::string fix = fmt::format("the model has {} decoder layers", layers);
  std::vector<std::vector<int>> table(chunks, std::vector<int>(ranks, 0));
  const Json& j = c.json();
  if (j.is_boolean()) {
    if (!allow_bool) c.Fail("give an integer or a list of integers");
    for (auto& row : table) row.assign(ranks, j.get<bool>() ? all_value : 0);
    return table;
  }
  if (j.is_number_integer()) {
    for (auto& row : table) row.assign(ranks, static_cast<int>(c.Integer(-layers, layers, fix)));
    return table;
  }
  if (!j.is_array()) c.Fail("give a list of per-stage counts (or a list of lists, one per chunk)");
  std::vector<JsonCursor> rows = c.Elements();
  const bool nested = rows[0].json().is_array();
  if (!nested) {
    if (chunks != 1) c.Fail(fmt::format("with {} chunks per rank give {} lists of {} (one per chunk)", chunks, chunks, ranks));
    rows = {c};
  }
  if (static_cast<int>(rows.size()) != chunks) c.Fail(fmt::format("needs {} lists, one per chunk", chunks));
  for (int v = 0; v < chunks; ++v) {
    std::vector<JsonCursor> items = rows[v].Elements();
    if (static_cast<int>(items.size()) != ranks) {
      rows[v].Fail(fmt::format("needs {} entries, one per pipeline stage", ranks));
    }
    for (int r = 0; r < ranks; ++r) {
      if (!items[r].json().is_number_integer()) {
        items[r].Fail("give a layer count (pattern forms of the recompute lists name ops, not layer counts, and are not read)");
      }
      table[v][r] = static_cast<int>(items[r].Integer(-layers, layers, fix));
    }
  }
  return table;
}

// The option of `layer` that stands for a MindFormers kind, by its name.
Plan ReadTree(const Json& doc, const Problem& problem) {
  JsonCursor root(doc, "");
  const Pipeline& p = problem.pipeline;
  const ModelShape shape = ShapeOf(problem);
  const int layers = shape.body();
  JsonCursor parallel = root.Required("parallel_config", "pipeline_stage and micro_batch_num");
  const std::int64_t stages = parallel.Required("pipeline_stage", "pipeline stages").Integer(1, kMaxRanks, "");
  if (stages != p.ranks) {
    parallel.Required("pipeline_stage", "").Fail(fmt::format("the problem has {} pipeline ranks", p.ranks));
  }
  if (auto m = parallel.Optional("micro_batch_num")) {
    if (m->Integer(1, kMaxMicroBatches, "") != p.micro_batches) m->Fail(fmt::format("the problem has {} micro-batches", p.micro_batches));
  }
  JsonCursor config = root.Required("model", "model_config with offset").Required("model_config", "offset, num_layers");
  int chunks = 1;
  if (auto v = config.Optional("pp_interleave_num")) chunks = static_cast<int>(v->Integer(1, kMaxStages, ""));
  if (chunks != p.chunks) {
    config.FailAt(fmt::format("pp_interleave_num = {}, but the problem has {} chunks per rank", chunks, p.chunks));
  }
  if (auto n = config.Optional("num_layers")) {
    if (n->Integer(1, kMaxLayers, "") != layers) {
      n->Fail(fmt::format("the problem has {} decoder layers (between its first and last layer)", layers));
    }
  }
  std::vector<std::vector<int>> offset(chunks, std::vector<int>(p.ranks, 0));
  if (auto o = config.Optional("offset")) offset = ReadTable(*o, p.ranks, chunks, 0, false, layers);
  const int per = layers / (p.ranks * chunks);
  std::int64_t sum = 0;
  for (const auto& row : offset) {
    for (int x : row) sum += x;
  }
  if (sum != layers % (p.ranks * chunks)) {
    config.Required("offset", "").Fail(fmt::format("offsets sum to {}, but must sum to num_layers mod (stages x chunks) = {}",
                                                   sum, layers % (p.ranks * chunks)));
  }
  std::vector<std::vector<int>> full(chunks, std::vector<int>(p.ranks, 0)), select = full, comm = full;
  if (auto r = root.Optional("recompute_config")) {
    const int big = layers;
    if (auto x = r->Optional("recompute")) full = ReadTable(*x, p.ranks, chunks, big, true, layers);
    if (auto x = r->Optional("select_recompute")) select = ReadTable(*x, p.ranks, chunks, big, true, layers);
    if (auto x = r->Optional("select_comm_recompute")) comm = ReadTable(*x, p.ranks, chunks, big, true, layers);
  }
  Plan plan;
  plan.stage_begin.push_back(0);
  plan.option = NoneOptions(problem);
  LayerIdx at = shape.body_begin;
  for (int v = 0; v < chunks; ++v) {
    for (int r = 0; r < p.ranks; ++r) {
      const int count = per + offset[v][r];
      if (count < 1 || at + count > shape.body_end) {
        root.FailAt(fmt::format("chunk {} of stage {} would hold {} layers; every chunk needs at least one", v, r, count));
      }
      for (int i = 0; i < count; ++i) {
        const Layer& layer = problem.layers[at + i];
        // From the stage's first layer: full, then both selective kinds, then the one that is left.
        Recompute want;
        const char* list = "";
        if (i < full[v][r]) {
          want.parts = kRecomputeLayer;
          list = "recompute";
        } else if (i < select[v][r] && i < comm[v][r]) {
          want.parts = kRecomputeMlpActivation | kRecomputeNorms;
          list = "select_recompute and select_comm_recompute";
        } else if (i < select[v][r]) {
          want.parts = kRecomputeMlpActivation;
          list = "select_recompute";
        } else if (i < comm[v][r]) {
          want.parts = kRecomputeNorms;
          list = "select_comm_recompute";
        }
        if (want.none()) continue;
        const OptionIdx o = FindRecompute(layer, want);
        if (o < 0) {
          root.FailAt(fmt::format("{} asks for an option that recomputes {} on layer {} ({}), which it does not have",
                                  list, RecomputeName(want), at + i, layer.name));
        }
        plan.option[at + i] = o;
      }
      at += count;
      const bool last = v == chunks - 1 && r == p.ranks - 1;
      plan.stage_begin.push_back(last ? problem.num_layers() : at);
    }
  }
  Status valid = ValidatePlan(problem, plan);
  if (!valid.ok()) throw internal::CursorFailure{valid.error().message};
  return plan;
}

// MindFormers counts per stage (chunk-major) of FULL, BOTH, SLCT, COMM.
struct MfCounts {
  int full = 0, both = 0, select = 0, comm = 0;
};

}  // namespace

Status MindFormersSettings(const Problem& problem, const Target&, const SettingSink& offer, int) {
  // Full first, then select and comm together, then one of them: a stage has select-only layers
  // or comm-only layers, not both.
  const ModelShape shape = ShapeOf(problem);
  const int n = problem.num_layers();
  TargetSetting setting;
  for (const unsigned one : {kMindFormersSelect, kMindFormersComm}) {
    setting.space.families.push_back(BodyFamily(problem, shape, [&](Recompute r) {
      return r.none() || r.full() || r.parts == one || r.parts == (kMindFormersSelect | kMindFormersComm);
    }));
  }
  auto body = [&](LayerIdx l) { return l >= shape.body_begin && l < shape.body_end; };
  setting.space.needs_one_of.assign(n, false);
  setting.space.order.assign(n, {});
  for (LayerIdx l = 0; l < n; ++l) {
    for (OptionIdx o = 0; o < static_cast<OptionIdx>(problem.layers[l].options.size()); ++o) {
      setting.space.order[l].push_back(static_cast<std::int8_t>(body(l) ? MindFormersRank(problem.layers[l], o) : -1));
    }
  }
  for (LayerIdx l = shape.body_begin; l < shape.body_end; ++l) setting.space.needs_one_of[l] = true;
  offer(setting);
  return {};
}

std::optional<Plan> MindFormersCanonical(const Problem& problem, Plan plan) {
  // MindFormers' lists are counts per stage: it gives the stage's first layers full recomputation,
  // the next both selective kinds, then the one kind, then none. The plan it runs from this
  // plan's counts (the same plan when the stage's decoder layers are identical); nullopt when a
  // layer lacks the option its position asks for.
  const ModelShape shape = ShapeOf(problem);
  for (StageIdx s = 0; s < plan.num_stages(); ++s) {
    const LayerIdx begin = std::max(plan.begin(s), shape.body_begin), end = std::min(plan.end(s), shape.body_end);
    std::array<int, 4> count{};
    Recompute one{kMindFormersSelect};
    for (LayerIdx l = begin; l < end; ++l) {
      const OptionIdx o = plan.option[l];
      ++count[std::max(0, MindFormersRank(problem.layers[l], o))];
      const Recompute r = ParseRecompute(problem.layers[l].options[o].name).value();
      if (MindFormersRank(problem.layers[l], o) == 2) one = r;
    }
    const std::array<Recompute, 4> meaning = {Recompute{kRecomputeLayer}, Recompute{kMindFormersSelect | kMindFormersComm},
                                              one, Recompute{}};
    int rank = 0;
    for (LayerIdx l = begin; l < end; ++l) {
      while (count[rank] == 0) ++rank;
      --count[rank];
      const OptionIdx o = FindRecompute(problem.layers[l], meaning[rank]);
      if (o < 0) return std::nullopt;
      plan.option[l] = o;
    }
  }
  return plan;
}

Result<Plan> ReadMindFormersPlan(const Json& doc, const Problem& problem, const std::string& source) {
  return ReadDocument<Plan>(source, [&] { return ReadTree(doc, problem); });
}

bool IsMindFormersDocument(const Json& j) {
  return j.is_object() && !j.contains("stages") && (j.contains("parallel_config") || j.contains("recompute_config"));
}

Result<Plan> ReadMindFormers(const std::string& text, const Problem& problem, const std::string& source,
                             std::vector<std::string>&) {
  Result<Json> doc = ParseDocument(text, source);
  if (!doc.ok()) return doc.error();
  return ReadMindFormersPlan(doc.value(), problem, source);
}

Result<bool> DetectMindFormers(const PlanText& text) {
  const Result<Json> doc = ParseDocument(text.text, "");
  return doc.ok() && IsMindFormersDocument(doc.value());
}

Result<std::string> ExportMindFormers(const Problem& problem, const Plan& plan, TargetKind) {
  const ModelShape shape = ShapeOf(problem);
  const Pipeline& p = problem.pipeline;
  if (p.MicroBatchGroup() != p.ranks) {
    return InvalidInput(fmt::format("MindFormers runs its interleaving with groups of pipeline.ranks micro-batches; "
                                    "plan without micro_batch_group to export to MindFormers (this pipeline: groups "
                                    "of {})",
                                    p.MicroBatchGroup()));
  }
  const std::vector<StageLayers> stages = Stages(plan, shape);
  const int layers = shape.body();
  const int per = layers / (p.ranks * p.chunks);
  std::vector<int> offset;
  std::vector<MfCounts> counts;
  std::vector<std::string> approximated;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    if (stages[s].body.empty()) {
      return InvalidInput(fmt::format("stage {} holds no decoder layer; MindFormers gives every stage at least one "
                                      "(offset {} would be -{})",
                                      s, s, per));
    }
    offset.push_back(static_cast<int>(stages[s].body.size()) - per);
    MfCounts c;
    for (LayerIdx l : stages[s].body) {
      const std::string name = OptionName(problem, plan, l);
      switch (KindOf(name)) {
        case Kind::kNone: break;
        case Kind::kFull: ++c.full; break;
        case Kind::kBoth: ++c.both; break;
        case Kind::kSelect: ++c.select; break;
        case Kind::kComm: ++c.comm; break;
        case Kind::kOther:
          ++c.full;
          approximated.push_back(fmt::format("decoder layer {} ('{}')", l - shape.body_begin, name));
          break;
      }
    }
    counts.push_back(c);
  }
  // Lists of P, or V x P (chunk-major, as the stages).
  auto lists = [&](auto value) {
    std::vector<std::string> rows;
    for (int v = 0; v < p.chunks; ++v) {
      std::vector<int> row;
      for (int r = 0; r < p.ranks; ++r) row.push_back(value(v * p.ranks + r));
      rows.push_back(List(row));
    }
    return rows.size() == 1 ? rows[0] : fmt::format("[{}]", fmt::join(rows, ", "));
  };
  int sum = 0;
  for (int o : offset) sum += o;
  std::string out = Header(problem, plan, "#");
  out += fmt::format("# offsets sum to {} = num_layers mod (pipeline_stage x pp_interleave_num) = {} mod {}\n", sum,
                     layers, p.ranks * p.chunks);
  out += fmt::format("parallel_config:\n  pipeline_stage: {}\n  micro_batch_num: {}\n", p.ranks, p.micro_batches);
  if (p.chunks > 1) out += "parallel:\n  pipeline_config:\n    pipeline_interleave: true\n";
  out += fmt::format("model:\n  model_config:\n    num_layers: {}\n", layers);
  if (p.chunks > 1) out += fmt::format("    pp_interleave_num: {}\n", p.chunks);
  out += "    offset: " + lists([&](int s) { return offset[s]; }) + "\n";
  // Counts from each stage's first layer; full implies both selective kinds (MindFormers).
  out += "recompute_config:\n";
  out += "  recompute: " + lists([&](int s) { return counts[s].full; }) + "\n";
  out += "  select_recompute: " + lists([&](int s) { return counts[s].full + counts[s].both + counts[s].select; }) + "\n";
  out += "  select_comm_recompute: " + lists([&](int s) { return counts[s].full + counts[s].both + counts[s].comm; }) + "\n";
  for (const std::string& a : approximated) {
    out += "# " + a + " has no MindFormers list; exported as full recomputation (more than the plan)\n";
  }
  // MindFormers counts each list from a stage's first layer: what it runs from these lists.
  const Result<Json> doc = ParseDocument(out, "mindformers.yaml");
  const Result<Plan> runs = doc.ok() ? ReadMindFormersPlan(doc.value(), problem, "mindformers.yaml") : Result<Plan>(doc.error());
  if (!runs.ok()) return InternalError("the MindFormers export does not read back: " + runs.error().message);
  if (runs.value().option != plan.option) {
    const SimResult want = SimulatePlan(problem, plan).value();
    const SimResult have = SimulatePlan(problem, runs.value()).value();
    if (have.iteration_ns != want.iteration_ns || !have.fits) {
      out += fmt::format("# NOT the plan: MindFormers counts each list from a stage's first layer (full, then both, then "
                         "select or select_comm, then none), so with these lists it runs another recomputation: "
                         "simulated iteration {} instead of the plan's {} ({:+.1f} %){}. Plan with --target mindformers "
                         "for the best plan MindFormers runs as planned.\n",
                         FormatDuration(have.iteration_ns), FormatDuration(want.iteration_ns),
                         100.0 * (static_cast<double>(have.iteration_ns) / static_cast<double>(want.iteration_ns) - 1),
                         have.fits ? "" : ", and it does NOT fit in memory");
    }
  }
  return out;
}

}  // namespace bmpipe
