// Reading a MindFormers configuration's pipeline lists back into a plan (the inverse of the
// mindformers export): model.model_config.offset, recompute_config.{recompute, select_recompute,
// select_comm_recompute}, parallel_config.{pipeline_stage, micro_batch_num},
// model.model_config.{num_layers, pp_interleave_num}. A full MindFormers YAML has many more keys
// (optimizer, runner, context...); they do not describe the plan and are not read.
#include <fmt/format.h>

#include "bmpipe/baselines/common.h"
#include "bmpipe/core/json_cursor.h"
#include "bmpipe/io/export.h"

namespace bmpipe {
namespace {

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

}  // namespace

Result<Plan> ReadMindFormersPlan(const Json& doc, const Problem& problem, const std::string& source) {
  return ReadDocument<Plan>(source, [&] { return ReadTree(doc, problem); });
}

}  // namespace bmpipe
