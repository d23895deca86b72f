#include "bmpipe/problem/sapp_reader.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "bmpipe/core/json_cursor.h"

namespace bmpipe {
namespace {

constexpr double kMB = 1e6;
// The tool's recompute types, in its order, with its default backward coefficients and the
// field names of its layer JSON.
struct TypeInfo {
  const char* name;
  double coef;
  const char* memory_field;
  const char* time_field;
  const char* coef_field;
};
constexpr TypeInfo kTypes[] = {
    {"none", 0.0, "memory_activation", "backward_time", "backward_coef"},
    {"select", 0.04, "memory_select_rec", "select_rec_time", "select_rec_coef"},
    {"select_comm", 0.125, "memory_select_comm", "select_comm_time", "select_comm_coef"},
    {"both", 0.165, "memory_both_comm_select", "both_comm_select_time", "both_comm_select_coef"},
    {"full", 0.5, "memory_recompute", "recompute_time", "recompute_coef"},
};
constexpr int kNumTypes = 5;

// A per-stage list (int, bool, list of P), one row per round.
std::vector<std::vector<int>> ReadRounds(const std::optional<JsonCursor>& c, int stages, int rounds,
                                         const std::vector<std::vector<int>>& layers, bool counts) {
  std::vector<std::vector<int>> out(rounds, std::vector<int>(stages, 0));
  if (!c) return out;
  const Json& j = c->json();
  if (j.is_boolean()) {
    if (!counts) c->Fail("give a list of per-stage offsets or 0");
    for (int r = 0; r < rounds; ++r) out[r] = j.get<bool>() ? layers[r] : std::vector<int>(stages, 0);
    return out;
  }
  if (j.is_number_integer()) {
    for (auto& row : out) row.assign(stages, static_cast<int>(c->Integer(-100000, 100000, "")));
    return out;
  }
  std::vector<JsonCursor> items = c->Elements();
  const bool nested = items[0].json().is_array();
  std::vector<JsonCursor> rows = nested ? items : std::vector<JsonCursor>(rounds, *c);
  if (static_cast<int>(rows.size()) != rounds) c->Fail(fmt::format("needs {} lists, one per dry-run round", rounds));
  for (int r = 0; r < rounds; ++r) {
    std::vector<JsonCursor> v = rows[r].Elements();
    if (static_cast<int>(v.size()) != stages) rows[r].Fail(fmt::format("needs {} entries, one per stage", stages));
    for (int s = 0; s < stages; ++s) out[r][s] = static_cast<int>(v[s].Integer(-100000, 100000, "give a layer count"));
  }
  return out;
}

// Least squares by Householder QR; false when the columns are (numerically) dependent.
bool LeastSquares(std::vector<std::vector<double>> a, std::vector<double> b, std::vector<double>& x) {
  const std::size_t m = a.size(), n = a[0].size();
  for (std::size_t k = 0; k < n; ++k) {
    double norm = 0;
    for (std::size_t i = k; i < m; ++i) norm += a[i][k] * a[i][k];
    norm = std::sqrt(norm);
    double scale = 0;
    for (std::size_t i = 0; i < m; ++i) scale = std::max(scale, std::abs(a[i][k]));
    if (norm <= 1e-9 * std::max(1.0, scale)) return false;
    const double alpha = a[k][k] > 0 ? -norm : norm;
    std::vector<double> v(m, 0);
    for (std::size_t i = k; i < m; ++i) v[i] = a[i][k];
    v[k] -= alpha;
    double vv = 0;
    for (std::size_t i = k; i < m; ++i) vv += v[i] * v[i];
    for (std::size_t j = k; j < n; ++j) {
      double dot = 0;
      for (std::size_t i = k; i < m; ++i) dot += v[i] * a[i][j];
      for (std::size_t i = k; i < m; ++i) a[i][j] -= 2 * dot / vv * v[i];
    }
    double dot = 0;
    for (std::size_t i = k; i < m; ++i) dot += v[i] * b[i];
    for (std::size_t i = k; i < m; ++i) b[i] -= 2 * dot / vv * v[i];
  }
  x.assign(n, 0);
  for (std::size_t k = n; k-- > 0;) {
    double s = b[k];
    for (std::size_t j = k + 1; j < n; ++j) s -= a[k][j] * x[j];
    x[k] = s / a[k][k];
  }
  return true;
}

struct Dryrun {
  int stages = 0, layers = 0;
  std::vector<std::vector<int>> n;              // [round][stage] layers
  std::vector<std::vector<std::vector<int>>> k;  // [round][stage][type] layers of each type
};

Dryrun ReadDryrun(const JsonCursor& root) {
  Dryrun d;
  JsonCursor pc = root.Required("pipeline_config", "pipeline_num, num_layer and offset of the dry run");
  pc.ExpectKeys({"pipeline_num", "num_layer", "offset"});
  d.stages = static_cast<int>(pc.Required("pipeline_num", "dry-run pipeline stages").Integer(3, 4096, "the decomposition needs at least 3 stages (head, body, tail)"));
  d.layers = static_cast<int>(pc.Required("num_layer", "decoder layers").Integer(1, kMaxLayers, ""));
  std::optional<JsonCursor> offset = pc.Optional("offset");
  int rounds = 1;
  if (offset && offset->json().is_array() && !offset->json().empty() && offset->json()[0].is_array()) {
    rounds = static_cast<int>(offset->json().size());
  }
  const std::vector<std::vector<int>> base(rounds, std::vector<int>(d.stages, d.layers / d.stages));
  d.n = ReadRounds(offset, d.stages, rounds, base, false);
  // Without offsets the even split is what does not add up: the message names the config.
  const JsonCursor& split = offset ? *offset : pc;
  for (int r = 0; r < rounds; ++r) {
    int total = 0;
    for (int s = 0; s < d.stages; ++s) {
      d.n[r][s] += d.layers / d.stages;
      if (d.n[r][s] < 1) split.FailAt(fmt::format("round {} gives stage {} {} layers", r, s, d.n[r][s]));
      total += d.n[r][s];
    }
    if (total != d.layers) {
      split.FailAt(fmt::format("round {}: the stages hold {} layers, num_layer is {}; offsets must sum to {}", r, total,
                                 d.layers, d.layers % d.stages));
    }
  }
  std::optional<JsonCursor> rc = root.Optional("recompute_config");
  if (rc) rc->ExpectKeys({"recompute", "select_recompute", "select_comm_recompute"});
  auto field = [&](const char* key) { return rc ? rc->Optional(key) : std::optional<JsonCursor>(); };
  const auto full = ReadRounds(field("recompute"), d.stages, rounds, d.n, true);
  const auto select = ReadRounds(field("select_recompute"), d.stages, rounds, d.n, true);
  const auto comm = ReadRounds(field("select_comm_recompute"), d.stages, rounds, d.n, true);
  d.k.assign(rounds, std::vector<std::vector<int>>(d.stages, std::vector<int>(kNumTypes, 0)));
  for (int r = 0; r < rounds; ++r) {
    for (int s = 0; s < d.stages; ++s) {
      // The tool's yaml -> internal mapping: full implies both selective kinds.
      std::vector<int>& k = d.k[r][s];
      k[4] = full[r][s];
      k[3] = std::max(std::min(select[r][s] - k[4], comm[r][s] - k[4]), 0);
      k[1] = std::max(select[r][s] - k[4] - k[3], 0);
      k[2] = std::max(comm[r][s] - k[4] - k[3], 0);
      k[0] = d.n[r][s] - k[1] - k[2] - k[3] - k[4];
      if (k[0] < 0) root.FailAt(fmt::format("round {} stage {}: recompute counts exceed its {} layers", r, s, d.n[r][s]));
    }
  }
  return d;
}

SappMemory Decompose(const JsonCursor& root) {
  const Dryrun d = ReadDryrun(root);
  JsonCursor mu = root.Required("memory_usage", "head_memory, tail_memory and body_memories (MB)");
  mu.ExpectKeys({"head_memory", "tail_memory", "body_memories"});
  const double head_peak = mu.Required("head_memory", "stage 0's dry-run peak, MB").Number();
  const double tail_peak = mu.Required("tail_memory", "the last stage's dry-run peak, MB").Number();
  JsonCursor bm = mu.Required("body_memories", "stage_id and memories");
  bm.ExpectKeys({"stage_id", "memories"});
  JsonCursor ids = bm.Required("stage_id", "the body stages measured");
  JsonCursor mems = bm.Required("memories", "their dry-run peaks, MB");
  const int rounds = static_cast<int>(d.n.size());
  std::vector<std::vector<JsonCursor>> id_rows, mem_rows;
  if (rounds == 1) {
    id_rows = {ids.Elements()};
    mem_rows = {mems.Elements()};
  } else {
    for (const JsonCursor& c : ids.Elements()) id_rows.push_back(c.Elements());
    for (const JsonCursor& c : mems.Elements()) mem_rows.push_back(c.Elements());
  }
  if (static_cast<int>(id_rows.size()) != rounds || mem_rows.size() != id_rows.size()) {
    bm.FailAt(fmt::format("needs one stage_id list and one memories list per dry-run round ({})", rounds));
  }
  struct Row {
    int round, stage;
    double peak;
  };
  std::vector<Row> rows;
  for (int r = 0; r < rounds; ++r) {
    if (id_rows[r].size() != mem_rows[r].size()) mems.Fail("needs one peak per stage_id");
    for (std::size_t i = 0; i < id_rows[r].size(); ++i) {
      const int s = static_cast<int>(id_rows[r][i].Integer(1, d.stages - 2, "body stages are 1..pipeline_num-2"));
      rows.push_back({r, s, mem_rows[r][i].Number()});
    }
  }
  // The types with a term: those some measured body stage uses.
  std::vector<int> used;
  for (int t = 0; t < kNumTypes; ++t) {
    for (const Row& row : rows) {
      if (d.k[row.round][row.stage][t] > 0) {
        used.push_back(t);
        break;
      }
    }
  }
  const int types = static_cast<int>(used.size());
  const int need = types + 1;  // p and the a_r
  if (static_cast<int>(rows.size()) < need) {
    bm.FailAt(fmt::format("{} body stages measured, but {} unknowns (parameters per layer and {} activation term{}) need "
                          "at least {} (and {} to also find the per-stage constant); the system is under-determined",
                          rows.size(), need, types, types == 1 ? "" : "s", need, need + 1));
  }
  bool varied = false;
  for (const Row& row : rows) varied = varied || d.n[row.round][row.stage] != d.n[rows[0].round][rows[0].stage];
  const bool with_constant = static_cast<int>(rows.size()) >= need + 1 && varied;
  std::vector<std::vector<double>> a;
  std::vector<double> b;
  for (const Row& row : rows) {
    std::vector<double> line;
    if (with_constant) line.push_back(1);
    line.push_back(d.n[row.round][row.stage]);
    for (int t : used) line.push_back(static_cast<double>(d.stages - row.stage) * d.k[row.round][row.stage][t]);
    a.push_back(line);
    b.push_back(row.peak);
  }
  std::vector<double> x;
  if (!LeastSquares(a, b, x)) {
    bm.FailAt("the measured stages do not determine the terms (their layer and recompute counts are linearly "
              "dependent); measure stages with different counts");
  }
  SappMemory m;
  std::size_t at = 0;
  m.constant = with_constant ? x[at++] : 0;
  m.parameter = x[at++];
  for (int t : used) {
    m.types.push_back(kTypes[t].name);
    m.activation.push_back(x[at++]);
  }
  // Head and tail from round 0's counts on stages 0 and P-1 (their in-flight counts P and 1).
  auto rest = [&](int s, double peak, const char* which) {
    double v = peak - d.n[0][s] * m.parameter;
    for (int t = 0; t < kNumTypes; ++t) {
      const int count = d.k[0][s][t];
      if (count == 0) continue;
      const auto it = std::find(used.begin(), used.end(), t);
      if (it == used.end()) {
        mu.FailAt(fmt::format("the {} stage uses recompute type {}, which no measured body stage uses", which, kTypes[t].name));
      }
      v -= static_cast<double>(d.stages - s) * count * m.activation[it - used.begin()];
    }
    return v;
  };
  m.head = rest(0, head_peak, "head");
  m.tail = rest(d.stages - 1, tail_peak, "tail");
  return m;
}

// The layers the tool describes, as a Problem for `target`.
struct Described {
  double constant_mb = 0;
  double head_forward = 0, head_static_mb = 0;  // static as the tool has it (including C)
  double tail_forward = 0, tail_static_mb = 0;
  int body_layers = 0;
  double body_forward = 0, body_parameter_mb = 0;
  std::vector<std::string> types;
  std::vector<double> activation_mb, backward;  // per type
};

Result<Problem> Build(const Described& d, const SappTarget& target, const std::string& name) {
  Problem p;
  p.name = name;
  p.pipeline.ranks = target.stages;
  p.pipeline.chunks = target.interleave;
  p.pipeline.micro_batches = target.micro_batches;
  p.pipeline.schedule = target.interleave > 1 ? ScheduleKind::kInterleavedOneFOneB : ScheduleKind::kOneFOneB;
  // The tool's milliseconds and megabytes as the problem's integers; the first value out of range
  // is the error.
  std::string out_of_range;
  auto ns = [&](double ms) {
    if (std::optional<TimeNs> t = CheckedNs(ms / 1e3)) return *t;
    if (out_of_range.empty()) {
      out_of_range = fmt::format("a time of {:g} ms: times must lie between 0 and {:g} ms", ms, kMaxInputSeconds * 1e3);
    }
    return TimeNs{0};
  };
  auto bytes = [&](double mb) {
    if (std::optional<Bytes> b = CheckedBytes(std::max(0.0, mb) * kMB)) return *b;
    if (out_of_range.empty()) {
      out_of_range = fmt::format("a memory of {:g} MB: memories must lie below {:g} MB", mb, kMaxInputBytes / kMB);
    }
    return Bytes{0};
  };
  p.memory_bytes = bytes(target.memory_mb);
  p.reserved_bytes = bytes(d.constant_mb);
  auto end_layer = [&](const char* n, double forward, double static_mb) {
    Layer l;
    l.name = n;
    l.static_bytes = bytes(static_mb - d.constant_mb);
    l.options.push_back({"none", ns(forward), ns(2 * forward), 0, 0, 0});
    return l;
  };
  p.layers.push_back(end_layer("head", d.head_forward, d.head_static_mb));
  Layer body;
  body.name = "decoder";
  body.static_bytes = bytes(d.body_parameter_mb);
  for (std::size_t t = 0; t < d.types.size(); ++t) {
    body.options.push_back({d.types[t], ns(d.body_forward), ns(2 * d.body_forward), ns(d.backward[t] - 2 * d.body_forward),
                            bytes(d.activation_mb[t]), 0});
  }
  for (int i = 0; i < d.body_layers; ++i) p.layers.push_back(body);
  p.layers.push_back(end_layer("tail", d.tail_forward, d.tail_static_mb));
  for (std::size_t i = 1; i < p.layers.size(); ++i) p.layers[i].entry = i == p.layers.size() - 1 ? 2 : 1;
  if (!out_of_range.empty()) return InvalidInput(fmt::format("{}: {}", name, out_of_range));
  Status ok = ValidateProblem(p);
  if (!ok.ok()) return ok.error();
  return p;
}

Described FromInit(const JsonCursor& root) {
  root.ExpectKeys({"pipeline_config", "recompute_config", "time_config", "profiling_config", "memory_usage"});
  if (!root.Has("time_config")) {
    if (root.Has("profiling_config")) {
      root.Required("profiling_config", "").FailAt(
          "bmpipe does not read MindSpore profiler traces; add time_config {head, body, tail} with the forward times "
          "(ms) the profile gives");
    }
    root.Required("time_config", "head, body and tail forward times (ms)");
  }
  JsonCursor tc = root.Required("time_config", "head, body and tail forward times (ms)");
  tc.ExpectKeys({"head", "body", "tail"});
  const SappMemory m = Decompose(root);
  Described d;
  d.constant_mb = m.constant;
  d.head_forward = tc.Required("head", "the embedding's forward time, ms").Number();
  d.body_forward = tc.Required("body", "one decoder layer's forward time, ms").Number();
  d.tail_forward = tc.Required("tail", "the head's forward time, ms").Number();
  d.head_static_mb = m.head;
  d.tail_static_mb = m.tail;
  d.body_layers = static_cast<int>(root.Required("pipeline_config", "").Required("num_layer", "").Integer(1, kMaxLayers, ""));
  d.body_parameter_mb = m.parameter;
  d.types = m.types;
  d.activation_mb = m.activation;
  for (const std::string& t : m.types) {
    for (const TypeInfo& info : kTypes) {
      if (t == info.name) d.backward.push_back((1 + info.coef) * 2 * d.body_forward);
    }
  }
  return d;
}

Described FromLayerJson(const JsonCursor& root) {
  root.ExpectKeys({"name", "stage_const_mem", "layers_description"});
  Described d;
  d.constant_mb = root.Required("stage_const_mem", "the per-stage constant memory, MB").Number();
  bool head = false, tail = false, body = false;
  for (const JsonCursor& l : root.Required("layers_description", "HEAD, BODY and TAIL entries").Elements()) {
    std::vector<std::string_view> keys = {"name", "type", "model_name", "time", "nb_layer", "memory_parameter", "forward_time"};
    for (const TypeInfo& t : kTypes) {
      keys.push_back(t.memory_field);
      keys.push_back(t.time_field);
      keys.push_back(t.coef_field);
    }
    std::vector<std::string> known;
    for (auto k : keys) known.emplace_back(k);
    for (const auto& [key, value] : l.json().items()) {
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        l.FailAt(fmt::format("unknown key '{}'{}", key, DidYouMean(key, known)));
      }
    }
    const std::string type = l.Required("type", "HEAD, BODY or TAIL").String();
    const double forward = l.Has("forward_time") ? l.Required("forward_time", "").Number() : l.Required("time", "forward time, ms").Number();
    const double memory = l.Required("memory_parameter", "MB").Number();
    if (type == "HEAD" || type == "TAIL") {
      (type == "HEAD" ? d.head_forward : d.tail_forward) = forward;
      (type == "HEAD" ? d.head_static_mb : d.tail_static_mb) = memory;
      (type == "HEAD" ? head : tail) = true;
    } else if (type == "BODY") {
      if (body) l.FailAt("a second BODY entry: the tool's heterogeneous-body support does not work, and bmpipe reads one");
      body = true;
      d.body_forward = forward;
      d.body_parameter_mb = memory;
      d.body_layers = static_cast<int>(l.Required("nb_layer", "decoder layers").Integer(1, kMaxLayers, ""));
      for (const TypeInfo& t : kTypes) {
        if (!l.Has(t.memory_field)) continue;
        const double activation = l.Required(t.memory_field, "").Number();
        if (activation <= 0) continue;  // the tool considers a type only when its activation is positive
        d.types.push_back(t.name);
        d.activation_mb.push_back(activation);
        double coef = t.coef;
        if (l.Has(t.coef_field)) coef = l.Required(t.coef_field, "").Number();
        d.backward.push_back(l.Has(t.time_field) ? l.Required(t.time_field, "").Number() : (1 + coef) * 2 * forward);
      }
      if (d.types.empty()) l.FailAt("no recompute type has a positive activation");
    } else {
      l.Required("type", "").Fail("use HEAD, BODY or TAIL");
    }
  }
  if (!head || !tail || !body) root.FailAt("layers_description needs a HEAD, a BODY and a TAIL entry");
  return d;
}

}  // namespace

Result<SappMemory> DecomposeSappMemory(const Json& init_yaml, const std::string& source) {
  return ReadDocument<SappMemory>(source, [&] { return Decompose(JsonCursor(init_yaml, "")); });
}

Result<Problem> LoadSappProblem(const std::string& path, const SappTarget& target) {
  Result<Json> doc = LoadDocument(path);
  if (!doc.ok()) return doc.error();
  Result<Described> d = ReadDocument<Described>(path, [&] {
    JsonCursor root(doc.value(), "");
    return root.Has("layers_description") ? FromLayerJson(root) : FromInit(root);
  });
  if (!d.ok()) return d.error();
  return Build(d.value(), target, "MindFormers pipeline-balance tool input " + path);
}

}  // namespace bmpipe
