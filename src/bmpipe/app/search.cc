// bmpipe search: the best way to train a model on N devices, with its plan and export.
#include <algorithm>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bmpipe/app/commands.h"
#include "bmpipe/app/common.h"
#include "bmpipe/app/invocation.h"
#include "bmpipe/app/model.h"
#include "bmpipe/app/profiles.h"
#include "bmpipe/core/document.h"
#include "bmpipe/core/text.h"
#include "bmpipe/frameworks/formats.h"
#include "bmpipe/frameworks/megatron/megatron.h"
#include "bmpipe/io/problem_json.h"
#include "bmpipe/problem/recompute.h"
#include "bmpipe/report/search_report.h"
#include "bmpipe/validate/validate.h"

namespace bmpipe::app {
namespace {

struct SearchRequest {
  std::string model;
  std::string device;
  SearchOptions options;
  SetupWords words;
  std::vector<std::string> precisions;  // --precision, a list
  std::vector<std::string> schedules;   // --schedules, a list
  std::string mfu_attention = "causal";
  std::string target;
  double reserved_gb = -1;
  bool json = false;
  bool quiet = false;
  std::string progress = "auto";
  std::string out;
  std::string plan_out;
  std::string export_format = "megatron";
  bool export_given = false;     // --export was given
  bool recompute_given = false;  // --recompute was given
  std::string export_out;
  SvgRequest svg;
  std::string defaults;          // --defaults: a framework version's profile (profiles.h)
  std::string setup_from;        // --setup-from: a launcher's file stating the setup
  std::set<std::string> given;   // the keywords given
  std::set<std::string> from_file;  // WithSetupFile: the keywords the file set
};

std::string Joined(const std::vector<std::string>& names) { return fmt::format("{}", fmt::join(names, ", ")); }

OptionTable SearchTable(SearchRequest& r) {
  SearchOptions& o = r.options;
  o.base.recompute = TrainingSetup{}.recompute;
  OptionTable t;
  t.RecordGiven(&r.given);
  t.Add("--model", "model", &r.model, "Model preset (" + Joined(ModelPresetNames()) + ") or a Hugging Face config.json")
      .Required();
  t.Add("--device", "device", &r.device,
        "Device preset (" + Joined(DevicePresetNames()) + ") or a device file (docs/cost-model.md)")
      .Required();
  t.Add("--devices", "devices", &o.devices, "Number of devices to train on").Required();
  t.Add("--gbs", "gbs", &o.base.global_batch_size,
        "Global batch size (sequences per iteration; required unless --setup-from's file states it)");
  t.Add("--seq", "seq", &o.base.seq, "Sequence length (tokens; required unless --setup-from's file states it)");
  t.Add("--top", "top", &o.top, "Configurations to rank").ShowDefault();
  t.Add("--time-budget", "time_budget", &o.time_budget_s,
        fmt::format("Seconds after which no further configuration is planned (default: {:g}; 0: none). A search stopped "
                    "by its budget says so, and its ranking then depends on the machine's speed",
                    kDefaultSearchBudgetS))
      .NonNegative();
  t.Add("--threads", "threads", &o.threads, "Planner threads (default: every hardware thread)").NonNegative();
  t.Add("--plan-count", "plan_count", &o.plan_count,
        "Configurations planned with the exact planner after screening, most promising first (-1: every one the "
        "bounds do not rule out)")
      .ShowDefault();
  t.Add("--node-limit", "node_limit", &o.node_limit,
        "Branch-and-bound nodes per configuration, after its first plans (-1: until proven optimal)")
      .ShowDefault();
  t.Add("--exhaustive", "exhaustive", &o.exhaustive,
        "Plan every valid configuration without pruning (slow; to check the pruned search)");
  t.Add("--tp", "tp", &o.tp, "Only these tensor-parallel sizes (comma-separated)").CommaSeparated();
  t.Add("--pp", "pp", &o.pp, "Only these pipeline sizes").CommaSeparated();
  t.Add("--vpp", "vpp", &o.vpp, "Only these virtual-stage counts (1: plain 1F1B)").CommaSeparated();
  t.Add("--mbs", "mbs", &o.mbs, "Only these micro-batch sizes").CommaSeparated();
  t.Add("--flash-attn", "flash_attention", &o.base.flash_attention, "Fused (flash) attention: no s x s activations");
  t.Add("--recompute", "recompute", &o.base.recompute,
        "Recomputation options offered for every decoder layer (comma-separated): " + Joined(RecomputeOptionNames()) +
            ", or unions such as selective+norm; by default also those the target's settings use")
      .CommaSeparated()
      .ShowDefault()
      .Given(&r.recompute_given);
  t.Add("--reserved-gb", "reserved_gb", &r.reserved_gb,
        "Memory reserved on every device for the framework, in GB (default: 1 GiB + 5 % of the device memory)")
      .NonNegative();
  t.Add("--dp-overlap", "dp_overlap", &o.base.dp_overlap,
        "Fraction of the data-parallel gradient sync hidden behind the backward (0..1)")
      .ShowDefault();
  t.Add("--cp", "cp", &o.cp,
        std::string("Only these context-parallel sizes (default: 1, and with --flash-attn every size leaving each rank "
                    "at least ") +
            std::to_string(kMinContextTokens) + " tokens). " + kCpHelp)
      .CommaSeparated();
  t.Add("--ep", "ep", &o.ep,
        std::string("Only these expert-parallel sizes (default: every size dividing the experts and the devices of a "
                    "stage). ") +
            kEpHelp)
      .CommaSeparated();
  t.Add("--etp", "etp", &o.etp, "Only these expert tensor-parallel sizes (default: 1 and the configuration's tp)")
      .CommaSeparated();
  t.Add("--zero", "zero", &o.zero,
        std::string("Only these ZeRO stages (default: 1, 2 and 3, or 0 without data or context parallelism: ZeRO-1 is "
                    "no costlier than 0 in any term). ") +
            kZeroHelp)
      .CommaSeparated()
      .Range(0, 3);
  t.Add("--mfu-attention", "mfu_attention", &r.mfu_attention,
        "How MFU counts attention: causal (the default: half the score square, as the fused kernel runs it) or full "
        "(the whole square, as older papers state MFU)")
      .Choices({"causal", "full"})
      .ShowDefault();
  t.Add("--precision", "precision", &r.precisions,
        "GEMM precisions to try (comma-separated; default bf16): bf16, fp8 (Transformer Engine; 2 more bytes per "
        "parameter for its weight caches)")
      .CommaSeparated()
      .Choices(PrecisionNames());
  {
    // Every schedule but GPipe; 1f1b stands for interleaved 1F1B where --vpp > 1.
    std::vector<std::string> names;
    std::string help = "Schedules to try (comma-separated; default 1f1b, interleaved where --vpp > 1):";
    for (const ScheduleTraits& s : kSchedules) {
      if (s.kind == ScheduleKind::kGPipe || s.kind == ScheduleKind::kInterleavedOneFOneB) continue;
      names.emplace_back(s.name);
      const std::string chunks = s.kind == ScheduleKind::kOneFOneB ? "any chunks per rank"
                                 : s.max_chunks == 1              ? "one chunk per rank"
                                 : s.min_chunks == s.max_chunks   ? fmt::format("{} chunks per rank", s.min_chunks)
                                                                  : fmt::format("{} or more chunks per rank", s.min_chunks);
      help += fmt::format(" {} ({}{}),", s.name, s.split_backward ? "split backward, " : "", chunks);
    }
    help += " each at the --vpp values it runs; the report's \"sched\" line says how the winner compares with the "
            "best 1F1B or interleaved plan";
    t.Add("--schedules", "schedules", &r.schedules, help).CommaSeparated().Choices(names);
  }
  AddSetupOptions(t, o.base, r.words, "", "");
  t.Add("--defaults", "defaults", &r.defaults,
        "A framework version's defaults for the settings not given: what its own recipes set (data/profiles.yaml, "
        "each with its source): " +
            Joined(ProfileNames()) + "; sequence parallelism and the distributed optimizer stay searched")
      .Choices(ProfileNames());
  t.Add("--setup-from", "setup_from", &r.setup_from,
        "A launcher's file stating the training setup (as simulate and plan read it: Megatron-LM arguments, a "
        "Megatron-Bridge ConfigContainer's YAML, a torchtitan TOML job or argument file): what it states that the "
        "search does not search (batch, sequence, precision, dtypes, overlaps, recomputation, attention, MoE "
        "settings) replaces the defaults and the --defaults profile, options given here win over it; its parallel "
        "sizes, virtual stages, micro-batch size and ZeRO stage are searched instead");
  t.Add("--json", "", &r.json, "Print the search as JSON (statistics, ranking, every configuration's verdict)");
  t.Add("--out", "", &r.out, "Also write the search JSON to this file");
  t.Add("--plan-out", "", &r.plan_out, "Write the best configuration's plan JSON (docs/file-formats.md) here");
  t.Add("--export", "", &r.export_format,
        "Export of the best plan printed after the report: " + Joined(FormatNames()) +
            ", or none; when given, the default --target is its framework")
      .ShowDefault()
      .Given(&r.export_given);
  t.Add("--target", "target", &r.target, TargetOptionHelp());
  t.Add("--export-out", "", &r.export_out, "Write the export to this file instead");
  AddSvgOptions(t, r.svg, "Write the best plan's timeline as SVG to this file");
  t.Add("-q,--quiet", "", &r.quiet, "No progress on standard error (as --progress none)");
  AddProgressOption(t, r.progress);
  t.RecordGiven(nullptr);
  return t;
}

// --defaults' profile into a copy of the request: each setting the search takes as an option, not
// given, whose condition can hold for some configuration (the expert-parallel ones on MoE models;
// SetupOf applies them where they hold). Says what it set in `header`.
Result<SearchRequest> WithProfile(const SearchRequest& r, const ModelSpec& model, Lines& header) {
  if (r.defaults.empty()) return r;
  Result<Profile> profile = FindProfile(r.defaults);
  if (!profile.ok()) return profile.error();
  SearchRequest out = r;
  OptionTable table = SearchTable(out);
  std::vector<std::string> set, searched;
  for (const ProfileSetting& s : profile.value().settings) {
    const Option* option = table.Find(s.key);
    if (option == nullptr || option->key != s.key) {
      searched.push_back(s.key);
      continue;
    }
    if (r.given.count(s.key) || r.from_file.count(s.key)) continue;
    if ((s.when == "ep > 1" || s.when == "ep > 1 and interleaved") && !model.moe.enabled()) continue;
    if (Status applied = ApplyProfileSetting(table, r.defaults, s); !applied.ok()) return applied.error();
    set.push_back(fmt::format("{} {}{}", s.key, s.value.dump(), s.when.empty() ? "" : " (where " + s.when + ")"));
  }
  out.given = r.given;
  header.push_back({"defaults", fmt::format("profile {}: {}{}", r.defaults, set.empty() ? "nothing" : Joined(set),
                                            searched.empty() ? "" : "; searched instead: " + Joined(searched))});
  return out;
}

// The dimensions the search searches: a launcher's file's values for them are searched instead.
bool Searched(const std::string& key) {
  static const std::set<std::string> searched = {"tp",   "pp",       "vpp", "mbs", "cp", "ep", "etp", "zero",
                                                 "dp",   "devices",  "sequence_parallel", "distributed_optimizer",
                                                 "schedule", "micro_batch_group"};
  return searched.count(key) > 0;
}

// --setup-from's file into a copy of the request: each setting the search takes as an option and
// does not search, not given; the file's recomputation joins the options offered. Says what it
// set in `header`.
Result<SearchRequest> WithSetupFile(const SearchRequest& r, Lines& header) {
  if (r.setup_from.empty()) return r;
  Result<std::string> text = LoadText(r.setup_from);
  if (!text.ok()) return text.error();
  Result<LauncherSetup> read = ReadLauncherSetup(text.value(), r.setup_from);
  if (!read.ok()) return read.error();
  for (const auto& [key, why] : read.value().refused) {
    if (!r.given.count(key) && !Searched(key)) return InvalidInput(fmt::format("--setup-from {}: {}", r.setup_from, why));
  }
  SearchRequest out = r;
  OptionTable table = SearchTable(out);
  Json apply = Json::object();
  std::vector<std::string> set, searched, overridden, not_taken;
  for (const auto& [key, value] : read.value().keywords.items()) {
    const std::string shown = fmt::format("{} {}", key, value.is_array() ? value[0].dump() : value.dump());
    if (Searched(key)) {
      searched.push_back(shown);
      continue;
    }
    const Option* option = table.Find(key);
    if (option == nullptr || option->key != key) {
      not_taken.push_back(shown);
      continue;
    }
    if (r.given.count(key)) {
      overridden.push_back(shown);
      continue;
    }
    if (key == "recompute") {
      // Offered beside the options the search offers anyway.
      for (const Json& o : value) {
        const std::string name = o.get<std::string>();
        if (std::find(out.options.base.recompute.begin(), out.options.base.recompute.end(), name) ==
            out.options.base.recompute.end()) {
          out.options.base.recompute.push_back(name);
        }
      }
    } else {
      apply[key] = value;
    }
    out.from_file.insert(key);
    set.push_back(shown);
  }
  if (Status applied = ReadOptions(table, apply, "--setup-from " + r.setup_from); !applied.ok()) return applied.error();
  if (read.value().local_batch > 0 && !r.given.count("gbs") && !out.from_file.count("gbs")) {
    return InvalidInput(fmt::format("--setup-from {}: the global batch is the local batch {} times the data-parallel "
                                    "size, which the search chooses; give --gbs",
                                    r.setup_from, read.value().local_batch));
  }
  out.given = r.given;
  header.push_back({"setup", fmt::format("{} ({}): {}{}{}{}", r.setup_from, read.value().format,
                                         set.empty() ? "nothing taken" : Joined(set),
                                         searched.empty() ? "" : "; searched instead: " + Joined(searched),
                                         overridden.empty() ? "" : "; given here instead: " + Joined(overridden),
                                         not_taken.empty() ? "" : "; not a search setting: " + Joined(not_taken))});
  for (const std::string& note : read.value().notes) header.push_back({"", note});
  return out;
}

// The header lines of the search's report.
Lines SearchHeader(const SearchRequest& r, const SearchOptions& options, const ModelSpec& m, const DeviceSpec& d,
                   const ChosenTarget& chosen) {
  Lines header;
  header.push_back({"model", fmt::format("{} ({}, {:.2f} B parameters, {} layers)", r.model, m.family,
                                         static_cast<double>(CountParameters(m).total) / kBillion, m.layers)});
  header.push_back({"cluster", fmt::format("{} x {}, {} per node{}", options.devices, d.name, d.devices_per_node,
                                           d.approximate ? " (approximate device figures)" : "")});
  header.push_back({"batch", fmt::format("{} sequences x {} tokens = {:.2f} M tokens per iteration{}",
                                         options.base.global_batch_size, options.base.seq,
                                         static_cast<double>(options.base.global_batch_size) * options.base.seq / 1e6,
                                         options.base.flash_attention ? ", flash attention" : "")});
  const Target& target = TargetOf(options.target);
  header.push_back({"target", fmt::format("{}: {} ({})", target.name, target.framework, chosen.why)});
  header.push_back({"recompute", fmt::format("{}, from: {}",
                                             target.granularity == RecomputeGranularity::kPerLayer   ? "per layer"
                                             : target.granularity == RecomputeGranularity::kPerStage ? "per-stage counts"
                                                                                                     : "one global setting",
                                             fmt::join(options.base.recompute, ", "))});
  header.push_back({"planner", options.exhaustive
                                   ? std::string("exhaustive: every valid configuration planned, no bound used")
                                   : fmt::format("{} after screening, branch and bound with {} nodes each after its "
                                                 "first plans",
                                                 options.plan_count < 0
                                                     ? std::string("every configuration not ruled out")
                                                     : fmt::format("the {} most promising configurations", options.plan_count),
                                                 options.node_limit < 0 ? std::string("no limit on")
                                                                        : std::to_string(options.node_limit))});
  for (const std::string& note : m.not_modeled) header.push_back({"not modeled", note});
  return header;
}

Result<Output> RunSearch(const SearchRequest& given_request, const Context& context) {
  if (given_request.svg.path.empty() && (!given_request.svg.window.empty() || !given_request.svg.ranks.empty())) {
    return InvalidInput("--svg-window and --svg-ranks need --svg FILE");
  }
  Result<ModelSpec> model = LoadModel(given_request.model);
  if (!model.ok()) return model.error();
  Result<DeviceSpec> device = LoadDevice(given_request.device);
  if (!device.ok()) return device.error();
  Lines profile_lines;
  Result<SearchRequest> filed = WithSetupFile(given_request, profile_lines);
  if (!filed.ok()) return filed.error();
  Result<SearchRequest> profiled = WithProfile(filed.value(), model.value(), profile_lines);
  if (!profiled.ok()) return profiled.error();
  const SearchRequest& r = profiled.value();
  if (r.options.base.global_batch_size <= 0 || r.options.base.seq <= 0) {
    return InvalidInput(fmt::format("search needs {}: give it (or --setup-from a launcher file that states it)",
                                    r.options.base.global_batch_size <= 0 ? "--gbs (sequences per iteration)"
                                                                          : "--seq (tokens per sequence)"));
  }
  SearchOptions options = r.options;
  if (Status reserved = SetReservedBytes(r.reserved_gb, options.base); !reserved.ok()) return reserved.error();
  if (Status words = ApplySetupWords(r.words, options.base); !words.ok()) return words.error();
  Lines headroom_lines;
  // No budget given: the default one, stated (a budget that stops the search says so again).
  if (r.given.count("time_budget") == 0) {
    options.time_budget_s = kDefaultSearchBudgetS;
    headroom_lines.push_back({"budget", fmt::format("{:g} s by default (--time-budget S sets another, 0 none); the "
                                                    "search below ended within it unless a budget line says otherwise",
                                                    kDefaultSearchBudgetS)});
  }
  if (r.words.headroom_gb < 0) {
    // Each configuration keeps free what the cost model's memory error for its kind of run may add.
    options.headroom_of = [&m = model.value(), &d = device.value()](const TrainingSetup& s) {
      return DefaultHeadroomBytes(d, s, MemoryUncertainty(m, s));
    };
    headroom_lines.push_back({"headroom", "each configuration keeps free the share of its usable memory that the cost "
                                          "model's held-out memory error for its kind of run may add to a peak (the "
                                          "best plan's report below says how much); --memory-headroom-gb 0 plans to "
                                          "the full capacity"});
  }
  options.mfu_attention = r.mfu_attention == "full" ? AttentionFlops::kFull : AttentionFlops::kCausal;
  for (const std::string& p : r.precisions) options.precision.push_back(ParsePrecision(p).value_or(Precision::kBf16));
  for (const std::string& name : r.schedules) options.schedules.push_back(*ScheduleFromName(name));
  // A schedule whose chunks per rank --vpp leaves out would be dropped in silence: say so.
  if (!options.vpp.empty()) {
    for (ScheduleKind kind : options.schedules) {
      const ScheduleTraits& t = TraitsOf(kind);
      if (kind == ScheduleKind::kOneFOneB) continue;
      const bool any = std::any_of(options.vpp.begin(), options.vpp.end(), [&](int v) {
        return v >= t.min_chunks && v <= t.max_chunks;
      });
      if (!any) {
        return InvalidInput(fmt::format("--schedules {} runs {} chunk(s) per rank, which --vpp {} leaves out; add {} to "
                                        "--vpp or drop {} from --schedules",
                                        t.name,
                                        t.max_chunks == t.min_chunks ? std::to_string(t.min_chunks)
                                                                     : fmt::format("{} or more", t.min_chunks),
                                        fmt::join(options.vpp, ","), t.min_chunks, t.name));
      }
    }
  }
  std::optional<FrameworkId> format;
  if (!r.export_format.empty() && r.export_format != "none") {
    Result<FrameworkId> parsed = ParseFormat(r.export_format);
    if (!parsed.ok()) return parsed.error();
    format = parsed.value();
  }
  // The target: --target, else that of an --export given, else any (the default export is then
  // Megatron's closest setting to the per-layer plan).
  Result<ChosenTarget> chosen = ChooseTarget(r.target, r.export_given ? format : std::nullopt);
  if (!chosen.ok()) return chosen.error();
  options.target = chosen.value().kind;
  if (!r.recompute_given) AddTargetRecomputeOptions({options.target}, options.base.recompute);
  options.progress = context.Progress("search", r.quiet ? "none" : r.progress);
  options.deadline = context.stop;
  Result<SearchResult> searched = SearchConfigurations(model.value(), device.value(), options);
  if (!searched.ok()) return searched.error();
  if (searched.value().ranking.empty() && options.headroom_of && !searched.value().interrupted &&
      !searched.value().budget_exhausted) {
    // No configuration keeps the default headroom free: the best that fit at all, with a warning.
    options.headroom_of = nullptr;
    headroom_lines.assign({{"headroom", "none: no configuration keeps the default headroom (the cost model's held-out "
                                        "memory error) free, so these plans use the full capacity; see Memory below"}});
    searched = SearchConfigurations(model.value(), device.value(), options);
    if (!searched.ok()) return searched.error();
  }
  const SearchResult& result = searched.value();

  const ModelSpec& m = model.value();
  const DeviceSpec& d = device.value();
  Lines header = SearchHeader(r, options, m, d, chosen.value());
  for (auto& line : profile_lines) header.push_back(std::move(line));
  for (auto& line : headroom_lines) header.push_back(std::move(line));
  std::string report = FormatSearch(header, options, result);
  Files files;
  std::string exported;
  std::optional<Error> export_error;
  // The JSON of every configuration (hundreds of thousands on a large space): only when asked for.
  const bool json_wanted = r.json || !r.out.empty() || !r.plan_out.empty() || context.wants_json;
  Json doc = json_wanted ? SearchDocument(m, d, options, result) : Json::object();
  std::string json_text = json_wanted ? SearchJsonText(doc, result) : std::string();
  if (result.ranking.empty()) {
    // Why every configuration failed is still worth reading; no file is written.
    Output o;
    o.out = r.json ? json_text : report;
    o.json = json_text;
    if (result.interrupted) {
      o.exit = Exit::kNoPlan;
      o.messages.push_back("no plan found: interrupted (Ctrl-C) before a configuration was planned");
    } else if (result.budget_exhausted && options.time_budget_s > 0) {
      o.exit = Exit::kNoPlan;
      o.messages.push_back("no plan found: the time budget ran out before a configuration was planned; raise "
                           "--time-budget or restrict the space (--tp, --pp, --vpp, --mbs)");
    } else {
      o.exit = Exit::kNoFit;
      o.messages.push_back("no configuration fits in memory; more devices, a shorter --seq, a smaller --gbs or more "
                           "recomputation options (--recompute) would help");
    }
    return o;
  }
  const ConfigOutcome& best = result.configs[result.ranking[0]];
  const TrainingSetup best_setup = SetupOf(options, best.config);
  Result<Problem> built = BuildProblem(m, d, best_setup);
  if (!built.ok()) return built.error();
  if (built.value().training) built.value().training->memory_error = MemoryUncertainty(m, best_setup);
  const Problem& problem = built.value();
  Result<SimResult> sim = SimulatePlan(problem, best.planner.plan);
  if (!sim.ok()) return sim.error();
  // The launch line is the Megatron export's flags: what is written is what was planned.
  Result<std::string> megatron = ExportPlan(problem, best.planner.plan, FrameworkId::kMegatron, TargetKind::kMegatron);
  const std::string launch =
      megatron.ok() ? fmt::format("{}  (data parallel {} follows from {} devices)",
                                  MegatronCommandLine(megatron.value()), best.config.dp, options.devices)
                    : "none for Megatron-LM: " + megatron.error().message;
  ReportHeader plan_header{"The best configuration's plan",
                           {{"setup", DescribeConfig(best.config)}, {"launch", launch}}};
  if (!best.setting.empty()) plan_header.lines.push_back({"setting", best.setting});
  for (auto& line : PlannerLines(best.planner)) plan_header.lines.push_back(line);
  if (!r.plan_out.empty()) {
    files.push_back({r.plan_out, DumpJson(doc["best_plan"], 2) + "\n"});
    plan_header.lines.push_back({"plan", "written to " + r.plan_out});
  }
  if (!r.svg.path.empty()) {
    Status written = StageSvg(files, r.svg, problem, "bmpipe search: " + problem.name,
                              {{DescribeConfig(best.config), best.planner.plan}});
    if (!written.ok()) return written.error();
    plan_header.lines.push_back({"timeline", "written to " + r.svg.path});
  }
  // Megatron, the default export, runs no split-backward schedule: a winner with one is exported as
  // its op order (torch.distributed.pipelining's CSV) unless --export names a format.
  std::string export_name = r.export_format;
  if (format && !r.export_given && problem.pipeline.Copies() > 1) {
    format.reset();  // no format takes it: say so, not as an error
    plan_header.lines.push_back({"export", fmt::format("none: {}", kNoFrameworkRunsDualPipe)});
  } else if (format && !r.export_given && problem.pipeline.SplitBackward()) {
    format = FrameworkId::kTorch;
    export_name = "csv";
    plan_header.lines.push_back({"export", fmt::format("csv, the op order for torch.distributed.pipelining (the "
                                                       "default Megatron export runs no '{}')",
                                                       ScheduleName(problem.pipeline.schedule))});
  }
  if (format) {
    // A failed export leaves the search's results standing: they are written, then the export's
    // error is reported with its exit code.
    Result<std::string> text = ExportPlan(problem, best.planner.plan, *format, options.target);
    if (!text.ok()) {
      export_error = text.error();
      plan_header.lines.push_back({"export", export_name + " failed: " + text.error().message});
    } else {
      exported = text.value();
      if (!r.export_out.empty()) {
        files.push_back({r.export_out, exported});
        plan_header.lines.push_back({"export", export_name + " written to " + r.export_out});
        exported.clear();
        Status companions = StageExportCompanions(files, plan_header.lines, problem, best.planner.plan, *format,
                                                  r.export_out);
        if (!companions.ok()) return companions.error();
      }
    }
  }
  report += "\n" + FormatReport(plan_header, problem, best.planner.plan, sim.value());
  Output o = Emit(std::move(files), r.out, r.json, std::move(json_text), report);
  if (!r.json && !exported.empty()) o.out += "\n" + exported;
  o.extras.push_back({"best_problem", ProblemJsonText(problem, "")});
  // The default export (no --export given) is a courtesy: its failure is reported, not an error.
  if (export_error && r.export_given) {
    o.messages.push_back("the search's report and files were written, but the --export " + r.export_format +
                         " failed: " + export_error->message + "; --target " + r.export_format +
                         " searches for plans it can express");
    if (export_error->kind != ErrorKind::kInvalidInput) o.messages.push_back("error: " + export_error->message);
    o.exit = ExitOf(export_error->kind);
    o.keep_files = true;
  }
  return o;
}

}  // namespace

Command SearchCommand() {
  return MakeCommand<SearchRequest, SearchTable, RunSearch>(
      "search",
      "Find the best way to train a model on N devices: every valid tensor-parallel (within a node) x "
      "context-parallel x pipeline x data-parallel split, expert and expert tensor parallelism (MoE models), "
      "virtual stages (interleaved 1F1B), micro-batch size, sequence parallelism, the ZeRO stage and, with "
      "--precision bf16,fp8, the GEMM precision. Cheap sound bounds (dominance, memory, a time lower bound) set "
      "aside what cannot be among the best; the rest is planned with the exact planner. Prints the top "
          "configurations with throughput, MFU, bubble and memory, why each other value of every dimension loses, "
          "then the best one's plan and its export. The result is the same for any --threads.");
}

}  // namespace bmpipe::app
