#include "bmpipe/report/search_report.h"

#include <map>

#include <fmt/format.h>

#include "bmpipe/core/text.h"
#include "bmpipe/cost/problem_builder.h"
#include "bmpipe/io/plan_json.h"
#include "bmpipe/sim/simulator.h"

namespace bmpipe {
namespace {

std::string PlanVerdict(const PlannerResult& r) {
  return r.status == ModelStatus::kOptimal ? "optimal" : fmt::format("gap {:.1f} %", 100 * r.gap);
}

std::string Rate(double tokens_per_s) {
  return tokens_per_s >= 1e6 ? fmt::format("{:.3f} M", tokens_per_s / 1e6) : fmt::format("{:.1f} k", tokens_per_s / 1e3);
}

int CountOptimal(const SearchResult& result) {
  int n = 0;
  for (const ConfigOutcome& out : result.configs) {
    n += out.verdict == Verdict::kPlanned && out.planner.status == ModelStatus::kOptimal ? 1 : 0;
  }
  return n;
}

// One dimension of the configuration space: its name and each configuration's value.
struct Dimension {
  const char* name;
  int (*value)(const SearchConfig&);
  std::string (*label)(int);  // the value as the table prints it
};

std::string Number(int v) { return std::to_string(v); }
std::string YesNo(int v) { return v ? "yes" : "no"; }
std::string PrecisionLabel(int v) { return std::string(PrecisionName(static_cast<Precision>(v))); }
std::string ScheduleLabel(int v) {
  const ScheduleKind kind = static_cast<ScheduleKind>(v);
  return kind == ScheduleKind::kOneFOneB ? "1f1b/interleaved" : std::string(ScheduleName(kind));
}

const Dimension kDimensions[] = {
    {"tp", [](const SearchConfig& c) { return c.tp; }, Number},
    {"cp", [](const SearchConfig& c) { return c.cp; }, Number},
    {"pp", [](const SearchConfig& c) { return c.pp; }, Number},
    {"ep", [](const SearchConfig& c) { return c.ep; }, Number},
    {"etp", [](const SearchConfig& c) { return c.etp; }, Number},
    {"vpp", [](const SearchConfig& c) { return c.vpp; }, Number},
    {"mbs", [](const SearchConfig& c) { return c.mbs; }, Number},
    {"sp", [](const SearchConfig& c) { return static_cast<int>(c.sequence_parallel); }, YesNo},
    {"zero", [](const SearchConfig& c) { return c.zero; }, Number},
    {"prec", [](const SearchConfig& c) { return static_cast<int>(c.precision); }, PrecisionLabel},
    {"sched", [](const SearchConfig& c) { return static_cast<int>(c.schedule); }, ScheduleLabel},
    {"overlap", [](const SearchConfig& c) { return static_cast<int>(c.overlap); }, YesNo},
};

// The ranking's rows: each ranked configuration but the ties (TiedByVirtualStages), which are
// listed on the row they tie with.
struct RankingRow {
  int config;             // index into SearchResult::configs
  std::vector<int> ties;  // likewise
};
std::vector<RankingRow> RankingRows(const SearchResult& result) {
  std::vector<RankingRow> rows;
  for (int i : result.ranking) {
    const auto row = std::find_if(rows.begin(), rows.end(), [&](const RankingRow& r) {
      return TiedByVirtualStages(result.configs[r.config], result.configs[i]);
    });
    if (row == rows.end()) {
      rows.push_back({i, {}});
    } else {
      row->ties.push_back(i);
    }
  }
  return rows;
}

// Why no configuration with another value of a dimension won, when none has a plan: how many
// each step set aside, and for those the bounds left open (screened only, or not reached), the
// least lower bound and the best quick plan.
std::string WhyNone(const std::vector<const ConfigOutcome*>& configs, double best_ns) {
  int count[kVerdicts] = {};
  TimeNs least_bound = -1, best_screen = 0;
  for (const ConfigOutcome* c : configs) {
    ++count[static_cast<int>(c->verdict)];
    if (c->verdict == Verdict::kScreened || c->verdict == Verdict::kNotPlanned) {
      if (least_bound < 0 || c->time_bound_ns < least_bound) least_bound = c->time_bound_ns;
      if (c->screen_ns > 0 && (best_screen == 0 || c->screen_ns < best_screen)) best_screen = c->screen_ns;
    }
  }
  std::vector<std::string> parts;
  for (int v = 0; v < kVerdicts; ++v) {
    if (count[v] > 0) parts.push_back(fmt::format("{} {}", count[v], VerdictName(static_cast<Verdict>(v))));
  }
  std::string out = fmt::format("no plan: {}", fmt::join(parts, ", "));
  auto relative = [&](TimeNs t) { return fmt::format("{} ({:+.1f} %)", FormatDuration(t), 100 * (static_cast<double>(t) / best_ns - 1)); };
  if (least_bound >= 0) out += "; open: lower bound " + relative(least_bound);
  if (best_screen > 0) out += ", best quick plan " + relative(best_screen);
  return out;
}

// For each dimension with more than one value, the best configuration with each value other than
// the winner's and how much slower it is; each value without a plan on a line of its own, with why.
std::string FormatAlternatives(const SearchResult& result) {
  if (result.ranking.empty()) return "";
  const ConfigOutcome& best = result.configs[result.ranking[0]];
  const double best_ns = static_cast<double>(best.planner.iteration_ns);
  std::string out;
  for (const Dimension& d : kDimensions) {
    std::map<int, std::vector<const ConfigOutcome*>> by_value;
    for (const ConfigOutcome& c : result.configs) by_value[d.value(c.config)].push_back(&c);
    if (by_value.size() < 2) continue;
    const int won = d.value(best.config);
    out += fmt::format("  {:<4} {} won", d.name, d.label(won));
    std::string without;
    for (const auto& [value, configs] : by_value) {
      if (value == won) continue;
      const ConfigOutcome* fastest = nullptr;
      for (const ConfigOutcome* c : configs) {
        if (HasPlan(*c) && (!fastest || c->planner.iteration_ns < fastest->planner.iteration_ns)) fastest = c;
      }
      if (!fastest) {
        // Each value its own reason, after the values with a plan.
        without += fmt::format("\n         {} {}: {}", d.name, d.label(value), WhyNone(configs, best_ns));
        continue;
      }
      const double t = static_cast<double>(fastest->planner.iteration_ns);
      out += fmt::format("\n         {} {}: {} ({:+.1f} %) at best, {}", d.name, d.label(value),
                         FormatDuration(fastest->planner.iteration_ns), 100 * (t / best_ns - 1),
                         DescribeConfig(fastest->config));
    }
    out += without + "\n";
  }
  if (out.empty()) return "";
  return "\nWhy not: the best plan with each other value of one dimension, against the best (" +
         FormatDuration(best.planner.iteration_ns) + ")\n" + out;
}

}  // namespace

std::string FormatSearch(const std::vector<std::pair<std::string, std::string>>& header, const SearchOptions& options,
                         const SearchResult& result) {
  std::string out = "bmpipe search\n";
  auto line = [&](const std::string& label, const std::string& value) {
    out += fmt::format("  {:<10} {}\n", label, value);
  };
  for (const auto& [label, value] : header) line(label, value);
  line("searched", fmt::format("{} valid configurations of {} combinations ({} rejected by the setup rules{})",
                               result.configs.size(), result.combinations, result.invalid,
                               result.target_refused > 0
                                   ? fmt::format(", {} that the target's framework cannot run", result.target_refused)
                                   : ""));
  if (!options.exhaustive) {
    line("pruned", fmt::format("{} dominated (another configuration with the same pipeline is no costlier in any "
                               "term), {} cannot fit (memory lower bound), {} by the time lower bound",
                               result.Count(Verdict::kDominated), result.Count(Verdict::kMemoryBound),
                               result.Count(Verdict::kTimeBound)));
  }
  if (!options.exhaustive) {
    line("screened", fmt::format("{} with a quick plan (one recomputation option on every layer, stages cut at equal "
                                 "shares of compute; simulated), in order of their time bound; {} not planned further",
                                 result.screened, result.Count(Verdict::kScreened)));
  }
  const int planned = result.Count(Verdict::kPlanned) + result.Count(Verdict::kNoFit);
  line("planned", fmt::format("{} with the exact planner ({} proven optimal, {} no plan fits)", planned,
                              CountOptimal(result), result.Count(Verdict::kNoFit)));
  line("took", fmt::format("{:.1f} s on {} thread{}: bounds {:.1f} s, screening {:.1f} s, planning {:.1f} s",
                           result.seconds, result.threads, result.threads == 1 ? "" : "s", result.bound_seconds,
                           result.screen_seconds, result.plan_seconds));
  if (result.interrupted) {
    line("stopped", fmt::format("interrupted (Ctrl-C): {} configurations were not planned, so the ranking may miss "
                                "better ones", result.Count(Verdict::kNotPlanned)));
  } else if (result.budget_exhausted) {
    line("budget", fmt::format("the time budget ({:g} s) ran out: {} configurations were not planned, so the ranking "
                               "may miss better ones and depends on this machine's speed",
                               options.time_budget_s, result.Count(Verdict::kNotPlanned)));
  }
  if (result.ranking.empty()) {
    line("best", "no configuration has a plan that fits in memory");
    return out;
  }
  const ConfigOutcome& best = result.configs[result.ranking[0]];
  const ConfigOutcome& fastest = result.configs[result.fastest];
  if (result.bound_ns > 0) {
    line("best", fmt::format("{} per iteration; no configuration can be faster than {} (the least lower bound over "
                             "every configuration not ruled out), a gap of {:.1f} %",
                             FormatDuration(fastest.planner.iteration_ns),
                             FormatDuration(static_cast<TimeNs>(result.bound_ns)), 100 * result.gap));
  } else {
    line("best", fmt::format("{} per iteration; no lower bound over the space: the search ended before it had "
                             "bounded every configuration",
                             FormatDuration(fastest.planner.iteration_ns)));
  }
  if (&best != &fastest) {
    line("chosen", fmt::format("#1 is {:.2f} % slower than the fastest ({}, {:.1f} % of memory) but uses less memory "
                               "({:.1f} %): configurations within {:g} % of the fastest rank by memory, as the "
                               "cost model cannot tell their times apart",
                               100 * (static_cast<double>(best.planner.iteration_ns) /
                                          static_cast<double>(fastest.planner.iteration_ns) -
                                      1),
                               DescribeConfig(fastest.config), 100 * fastest.peak_memory_fraction,
                               100 * best.peak_memory_fraction, 100 * kTimeTie));
  }

  out += fmt::format("\n{:>3} {:>3} {:>3} {:>4} {:>5} {:>4} {:>3} {:>4} {:>4} {:>5}  {:<3} {:>4} {:<4} {:>10} {:>10} {:>6} "
                     "{:>6} {:>7}  {}\n",
                     "#", "tp", "cp", "pp", "dp", "ep", "etp", "vpp", "mbs", "m", "sp", "zero", "prec", "iteration",
                     "tokens/s", "MFU", "bubble", "memory", "plan");
  const std::vector<RankingRow> rows = RankingRows(result);
  for (std::size_t n = 0; n < rows.size(); ++n) {
    const ConfigOutcome& c = result.configs[rows[n].config];
    std::vector<int> vpps;
    for (int t : rows[n].ties) vpps.push_back(result.configs[t].config.vpp);
    std::sort(vpps.begin(), vpps.end());
    const std::string also = vpps.empty() ? "" : fmt::format("; vpp {} within the gap", fmt::join(vpps, ", "));
    out += fmt::format(
        "{:>3} {:>3} {:>3} {:>4} {:>5} {:>4} {:>3} {:>4} {:>4} {:>5}  {:<3} {:>4} {:<4} {:>10} {:>10} {:>5.1f}% {:>6.3f} "
        "{:>6.1f}%  {}\n",
        n + 1, c.config.tp, c.config.cp, c.config.pp, c.config.dp, c.config.ep, c.config.etp, c.config.vpp,
        c.config.mbs, c.micro_batches, c.config.sequence_parallel ? "yes" : "no", c.config.zero,
        PrecisionName(c.config.precision), FormatDuration(c.planner.iteration_ns), Rate(c.tokens_per_s), 100 * c.mfu,
        c.bubble, 100 * c.peak_memory_fraction,
        (c.config.schedule == ScheduleKind::kOneFOneB ? "" : fmt::format("{}, ", ScheduleName(c.config.schedule))) +
            (c.config.overlap ? "overlapped pairs, " : "") + PlanVerdict(c.planner) + also);
  }
  out += "\n  m: micro-batches per iteration; ep, etp: expert and expert tensor parallelism (MoE layers); zero: the\n"
         "  ZeRO stage over the data- and context-parallel ranks (1: the distributed optimizer, 2: and gradients, 3:\n"
         "  and parameters); prec: the GEMMs' precision; MFU: model FLOPs without recomputation, attention counted as\n"
         "  the kernel runs it (" +
         std::string(options.mfu_attention == AttentionFlops::kCausal ? "causal" : "full") +
         "), / (iteration time x devices x the bf16 dense peak); memory: the\n"
         "  fullest rank's peak over the device memory; plan: what the planner proved for that configuration (after\n"
         "  the schedule, when it is not 1F1B or, with vpp > 1, interleaved 1F1B).\n";
  out += FormatAlternatives(result);
  return out;
}

namespace {

// A configuration's settings as the JSON names them.
Json ConfigJson(const ConfigOutcome& c) {
  Json j;
  j["tp"] = c.config.tp;
  j["pp"] = c.config.pp;
  j["dp"] = c.config.dp;
  j["vpp"] = c.config.vpp;
  j["micro_batch_size"] = c.config.mbs;
  j["micro_batches"] = c.micro_batches;
  j["cp"] = c.config.cp;
  j["ep"] = c.config.ep;
  j["etp"] = c.config.etp;
  j["sequence_parallel"] = c.config.sequence_parallel;
  j["distributed_optimizer"] = c.config.zero >= 1;
  j["zero"] = c.config.zero;
  j["precision"] = std::string(PrecisionName(c.config.precision));
  if (c.config.schedule != ScheduleKind::kOneFOneB) j["schedule"] = std::string(ScheduleName(c.config.schedule));
  if (c.config.overlap) j["overlap_pairs"] = true;
  if (!c.setting.empty()) j["recompute_setting"] = c.setting;
  return j;
}

}  // namespace

Json SearchToJson(const SearchOptions& options, const SearchResult& result) {
  Json doc;
  doc["target"] = std::string(TargetOf(options.target).name);
  doc["devices"] = options.devices;
  doc["global_batch_size"] = options.base.global_batch_size;
  doc["seq"] = options.base.seq;
  Json stats;
  stats["combinations"] = result.combinations;
  stats["invalid"] = result.invalid;
  stats["target_refused"] = result.target_refused;
  stats["valid"] = result.configs.size();
  for (Verdict v : {Verdict::kDominated, Verdict::kMemoryBound, Verdict::kTimeBound, Verdict::kScreened,
                    Verdict::kNoFit, Verdict::kPlanned, Verdict::kNotPlanned}) {
    stats[std::string(VerdictName(v))] = result.Count(v);
  }
  stats["proven_optimal"] = CountOptimal(result);
  stats["threads"] = result.threads;
  stats["seconds"] = result.seconds;
  stats["budget_exhausted"] = result.budget_exhausted;
  if (result.interrupted) stats["interrupted"] = true;
  doc["statistics"] = stats;
  doc["lower_bound_s"] = ToSeconds(result.bound_ns);
  doc["gap"] = result.gap;
  doc["model_flops_per_iteration"] = result.model_flops;
  doc["mfu_attention"] = options.mfu_attention == AttentionFlops::kCausal ? "causal" : "full";
  Json ranking = Json::array();
  for (const RankingRow& row : RankingRows(result)) {
    const ConfigOutcome& c = result.configs[row.config];
    Json j = ConfigJson(c);
    // The configurations tied with it (the same but for the virtual stages, within the gaps).
    if (!row.ties.empty()) {
      Json ties = Json::array();
      for (int t : row.ties) {
        const ConfigOutcome& tie = result.configs[t];
        Json k = ConfigJson(tie);
        k["iteration_time_s"] = ToSeconds(tie.planner.iteration_ns);
        k["status"] = std::string(ModelStatusName(tie.planner.status));
        ties.push_back(k);
      }
      j["ties"] = ties;
    }
    j["iteration_time_s"] = ToSeconds(c.planner.iteration_ns);
    j["tokens_per_s"] = c.tokens_per_s;
    j["mfu"] = c.mfu;
    j["bubble"] = c.bubble;
    j["peak_memory_fraction"] = c.peak_memory_fraction;
    j["mean_memory_fraction"] = c.mean_memory_fraction;
    j["status"] = std::string(ModelStatusName(c.planner.status));
    j["lower_bound_s"] = ToSeconds(c.planner.bound_ns);
    j["stage_begin"] = c.planner.plan.stage_begin;
    j["option"] = c.planner.plan.option;
    ranking.push_back(j);
  }
  doc["ranking"] = ranking;
  if (result.fastest >= 0) {
    // The fastest, when the ranking puts one within kTimeTie of it with less memory first.
    Json fastest = ConfigJson(result.configs[result.fastest]);
    fastest["iteration_time_s"] = ToSeconds(result.configs[result.fastest].planner.iteration_ns);
    fastest["peak_memory_fraction"] = result.configs[result.fastest].peak_memory_fraction;
    doc["fastest"] = fastest;
  }
  // Every configuration (hundreds of thousands on a large space) is written as text by
  // SearchJsonText, one at a time: here only its place.
  doc["configurations"] = nullptr;
  return doc;
}

std::string SearchJsonText(const Json& doc, const SearchResult& result) {
  std::string text = DumpJson(doc, 2) + "\n";
  const std::string place = "\n  \"configurations\": null";
  const std::size_t at = text.find(place);
  if (at == std::string::npos) return text;
  // Each configuration's object as DumpJson writes it inside the array: its own dump, every line
  // indented by the array's depth (two levels of two spaces). Strings hold no raw newline.
  std::string all = result.configs.empty() ? "[]" : "[\n";
  for (std::size_t k = 0; k < result.configs.size(); ++k) {
    const ConfigOutcome& c = result.configs[k];
    Json j = ConfigJson(c);
    j["verdict"] = std::string(VerdictName(c.verdict));
    j["time_bound_s"] = ToSeconds(c.time_bound_ns);
    j["memory_bound_bytes"] = c.memory_bound_bytes;
    if (c.verdict == Verdict::kDominated) j["dominated_by"] = ConfigJson(result.configs[c.dominated_by]);
    if (c.screen_ns > 0) j["screen_iteration_time_s"] = ToSeconds(c.screen_ns);
    if (c.verdict == Verdict::kPlanned) {
      j["status"] = std::string(ModelStatusName(c.planner.status));
      if (c.planner.status == ModelStatus::kOptimal || c.planner.status == ModelStatus::kFeasible) {
        j["iteration_time_s"] = ToSeconds(c.planner.iteration_ns);
      }
      j["lower_bound_s"] = ToSeconds(c.planner.bound_ns);
    }
    const std::string one = DumpJson(j, 2);
    all += "    ";
    for (char ch : one) {
      all += ch;
      if (ch == '\n') all += "    ";
    }
    all += k + 1 < result.configs.size() ? ",\n" : "\n  ]";
  }
  text.replace(at, place.size(), "\n  \"configurations\": " + all);
  return text;
}

Json SearchDocument(const ModelSpec& model, const DeviceSpec& device, const SearchOptions& options,
                    const SearchResult& result) {
  Json doc = SearchToJson(options, result);
  if (!result.ranking.empty()) {
    const ConfigOutcome& best = result.configs[result.ranking[0]];
    const Problem problem = BuildProblem(model, device, SetupOf(options, best.config)).value();
    const SimResult sim = SimulatePlan(problem, best.planner.plan).value();
    doc["best_plan"] = PlanToJson(problem, best.planner.plan, sim, SolverInfoOf(best.planner));
  }
  return doc;
}

}  // namespace bmpipe
