#include "bmpipe/io/export.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "bmpipe/baselines/common.h"
#include "bmpipe/core/json_cursor.h"
#include "bmpipe/core/text.h"
#include "bmpipe/io/export_common.h"
#include "bmpipe/schedule/schedule.h"
#include "bmpipe/sim/simulator.h"

namespace bmpipe {
namespace {

// What a layer's option means to the frameworks. MindFormers: FULL, BOTH (select and
// select_comm), SLCT, COMM. Megatron: full, or selective with modules.
enum class Kind { kNone, kSelect, kComm, kBoth, kFull, kOther };

Kind KindOf(const std::string& option) {
  if (option == "none") return Kind::kNone;
  if (option == "full") return Kind::kFull;
  if (option == "selective" || option == "select") return Kind::kSelect;
  if (option == "select_comm" || option == "norm") return Kind::kComm;
  if (option == "both" || option == "selective+norm" || option == "norm+selective") return Kind::kBoth;
  return Kind::kOther;
}

// Megatron's --recompute-modules for an option (selective granularity), empty if none fits.
std::vector<std::string> MegatronModules(const std::string& option) {
  std::vector<std::string> modules;
  std::string part;
  std::stringstream ss(option);
  while (std::getline(ss, part, '+')) {
    // MindFormers' names: select = core attention, select_comm = the norms (and the
    // communication around them), both = the two.
    if (part == "selective" || part == "select") modules.push_back("core_attn");
    else if (part == "norm" || part == "select_comm") modules.push_back("layernorm");
    else if (part == "both") modules.insert(modules.end(), {"core_attn", "layernorm"});
    else if (part == "mlp") modules.push_back("mlp");
    else if (part != "none") return {};
  }
  return modules;
}

Result<std::string> Megatron(const Problem& problem, const Plan& plan) {
  const ModelShape shape = ShapeOf(problem);
  const Pipeline& p = problem.pipeline;
  const std::vector<StageLayers> stages = Stages(plan, shape);
  std::string layout;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    std::string stage = stages[s].embedding ? "E" : "";
    const std::size_t k = stages[s].body.size();
    stage += k == 0 ? "" : (k == 1 ? "t" : fmt::format("t*{}", k));
    if (stages[s].head) stage += "L";
    layout += (s == 0 ? "" : "|") + stage;
  }
  std::string out = Header(problem, plan, "#");
  out += fmt::format("--num-layers {}\n--pipeline-model-parallel-size {}\n--pipeline-model-parallel-layout \"{}\"\n",
                     shape.body(), p.ranks, layout);
  if (p.chunks > 1) out += fmt::format("# the layout implies {} virtual stages per rank (do not also pass a VPP flag)\n", p.chunks);
  // The first/last-stage flags, when the middle stages are equal.
  if (p.chunks == 1 && p.ranks >= 2) {
    bool equal = true;
    for (int s = 2; s + 1 < p.ranks; ++s) equal = equal && stages[s].body.size() == stages[1].body.size();
    if (equal && stages.front().embedding && stages.back().head) {
      out += fmt::format("# or, equivalently: --decoder-first-pipeline-num-layers {} --decoder-last-pipeline-num-layers {}\n",
                         stages.front().body.size(), stages.back().body.size());
    }
  }
  // Recomputation: what the plan wants per stage, and the closest global setting that recomputes
  // at least as much everywhere.
  std::map<std::string, std::vector<int>> ids;  // decoder layers by the option the plan gives them
  std::set<std::string> modules;
  bool needs_full = false;
  std::size_t most = 0;
  out += "# recomputation the plan wants, per stage (decoder layers by option):\n";
  for (std::size_t s = 0; s < stages.size(); ++s) {
    std::map<std::string, int> count;
    std::size_t recomputed = 0;
    for (LayerIdx l : stages[s].body) {
      const std::string name = OptionName(problem, plan, l);
      ++count[name];
      if (plan.option[l] == NoneOption(problem.layers[l])) continue;
      ++recomputed;
      ids[name].push_back(l - shape.body_begin);
      const std::vector<std::string> m = MegatronModules(name);
      if (m.empty()) {
        needs_full = true;
      } else {
        modules.insert(m.begin(), m.end());
      }
    }
    most = std::max(most, recomputed);
    std::string mix;
    for (const auto& [name, c] : count) mix += fmt::format("{}{} x{}", mix.empty() ? "" : ", ", name, c);
    out += fmt::format("#   stage {} (rank {}, chunk {}): {}\n", s, p.RankOf(static_cast<StageIdx>(s)),
                       p.ChunkOf(static_cast<StageIdx>(s)), mix.empty() ? "no decoder layers" : mix);
  }
  Plan global = plan;
  std::string flags;
  if (needs_full) {
    // Full recomputation of the first `most` decoder layers of every chunk.
    flags = fmt::format("--recompute-granularity full --recompute-method block --recompute-num-layers {}", most);
    for (std::size_t s = 0; s < stages.size(); ++s) {
      for (std::size_t i = 0; i < stages[s].body.size(); ++i) {
        const LayerIdx l = stages[s].body[i];
        global.option[l] = i < most ? FullOption(problem.layers[l]) : NoneOption(problem.layers[l]);
      }
    }
  } else if (!modules.empty()) {
    std::string list;
    for (const std::string& m : modules) list += " " + m;
    flags = "--recompute-granularity selective --recompute-modules" + list;
    // Every decoder layer recomputes the union of modules; the option of the plan that covers most
    // of them is the nearest per-layer equivalent.
    OptionIdx widest = -1;
    for (LayerIdx l = shape.body_begin; l < shape.body_end; ++l) {
      if (plan.option[l] != NoneOption(problem.layers[l]) &&
          (widest < 0 || problem.layers[l].options[plan.option[l]].saved_bytes < problem.layers[l].options[widest].saved_bytes)) {
        widest = plan.option[l];
      }
    }
    for (LayerIdx l = shape.body_begin; l < shape.body_end; ++l) global.option[l] = widest;
  }
  if (flags.empty()) {
    out += "# no recomputation\n";
  } else {
    const SimResult want = SimulatePlan(problem, plan).value();
    const SimResult have = SimulatePlan(problem, global).value();
    out += "# Megatron takes one global setting; the closest that recomputes at least what the plan does on every stage:\n";
    out += flags + "\n";
    out += fmt::format("# with it the simulated iteration is {} instead of the plan's {} ({:+.1f} %){}\n",
                       FormatDuration(have.iteration_ns), FormatDuration(want.iteration_ns),
                       100.0 * (static_cast<double>(have.iteration_ns) / static_cast<double>(want.iteration_ns) - 1),
                       have.fits ? "" : "; and it does NOT fit in memory");
    out += "# a Megatron patched for per-layer recomputation (e.g. AMD-AGI/Primus recompute_layer_ids) takes the plan itself:\n";
    for (const auto& [name, layers] : ids) {
      const std::vector<std::string> m = MegatronModules(name);
      std::string what = "full";
      if (!m.empty()) {
        what = "selective:";
        for (const std::string& x : m) what += " " + x;
      }
      out += fmt::format("#   option '{}' ({}): decoder layers {}\n", name, what, List(layers));
    }
  }
  return out;
}

// MindFormers counts per stage (chunk-major) of FULL, BOTH, SLCT, COMM.
struct MfCounts {
  int full = 0, both = 0, select = 0, comm = 0;
};

Result<std::string> MindFormers(const Problem& problem, const Plan& plan) {
  const ModelShape shape = ShapeOf(problem);
  const Pipeline& p = problem.pipeline;
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
  return out;
}

std::string Csv(const Problem& problem) {
  const Schedule schedule = BuildSchedule(problem.pipeline);
  std::string out;
  for (const std::vector<Op>& ops : schedule.rank_ops) {
    std::string row;
    for (const Op& op : ops) {
      row += fmt::format("{}{}{}{}", row.empty() ? "" : ",", op.stage, op.kind == OpKind::kForward ? 'F' : 'B', op.micro_batch);
    }
    out += row + "\n";
  }
  return out;
}

}  // namespace

std::vector<std::string> ExportFormatNames() { return {"megatron", "mindformers", "deepspeed", "torchtitan", "csv"}; }

Result<ExportFormat> ParseExportFormat(const std::string& name) {
  const std::vector<std::string> names = ExportFormatNames();
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<ExportFormat>(i);
  }
  return InvalidInput(fmt::format("unknown export format '{}'{}; formats: {}", name, DidYouMean(name, names),
                                  fmt::join(names, ", ")));
}

Result<std::string> ExportPlan(const Problem& problem, const Plan& plan, ExportFormat format) {
  Status valid = ValidatePlan(problem, plan);
  if (!valid.ok()) return valid.error();
  switch (format) {
    case ExportFormat::kMegatron:
      return Megatron(problem, plan);
    case ExportFormat::kMindFormers:
      return MindFormers(problem, plan);
    case ExportFormat::kDeepSpeed:
      return ExportDeepSpeed(problem, plan);
    case ExportFormat::kTorchTitan:
      return ExportTorchTitan(problem, plan);
    case ExportFormat::kCsv:
      return Csv(problem);
  }
  return InternalError("unknown export format");
}

}  // namespace bmpipe
