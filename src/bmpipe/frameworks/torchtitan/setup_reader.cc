// Reading the training setup a torchtitan job states (torchtitan.h, ReadTorchTitanSetup): its TOML
// job configuration or the argument file bmpipe writes for torchtitan 0.3 (--section.key value),
// both as one table of section.key values, each that changes cost or memory as the keyword of
// bmpipe's option that says the same, torchtitan's defaults for what is left out.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bmpipe/core/json_cursor.h"
#include "bmpipe/core/toml.h"
#include "bmpipe/frameworks/launcher_args.h"
#include "bmpipe/frameworks/torchtitan/torchtitan.h"
#include "bmpipe/problem/problem.h"
#include "bmpipe/schedule/pipeline.h"

namespace bmpipe {
namespace {

constexpr std::int64_t kBig = std::int64_t{1} << 40;
constexpr std::int64_t kMaxDegree = std::int64_t{1} << 20;  // a parallel degree

// The keys the reader reads (section.key), and how the argument file gives them.
const std::map<std::string, Arity>& SetupKeys() {
  static const std::map<std::string, Arity> keys = {
      {"parallelism.tensor_parallel_degree", Arity::kOne},
      {"parallelism.pipeline_parallel_degree", Arity::kOne},
      {"parallelism.context_parallel_degree", Arity::kOne},
      {"parallelism.expert_parallel_degree", Arity::kOne},
      {"parallelism.expert_tensor_parallel_degree", Arity::kOne},
      {"parallelism.data_parallel_replicate_degree", Arity::kOne},
      {"parallelism.data_parallel_shard_degree", Arity::kOne},
      {"parallelism.fsdp_reshard_after_forward", Arity::kOne},
      {"parallelism.enable_sequence_parallel", Arity::kNone},
      {"parallelism.no-enable-sequence-parallel", Arity::kNone},
      {"parallelism.pipeline_parallel_schedule", Arity::kOne},
      {"parallelism.pipeline_parallel_microbatch_size", Arity::kOne},
      {"parallelism.pipeline_parallel_layers_per_stage", Arity::kOne},
      {"parallelism.module_fqns_per_model_part", Arity::kMany},
      {"parallelism.pipeline_parallel_schedule_csv", Arity::kOne},
      {"parallelism.enable_async_tensor_parallel", Arity::kNone},
      {"training.local_batch_size", Arity::kOne},
      {"training.batch_size", Arity::kOne},  // before torchtitan 0.1: the local batch size
      {"training.global_batch_size", Arity::kOne},
      {"training.seq_len", Arity::kOne},
      {"training.mixed_precision_param", Arity::kOne},
      {"training.mixed_precision_reduce", Arity::kOne},
      {"training.dtype", Arity::kOne},
      {"training.enable_cpu_offload", Arity::kNone},
      {"training.compile", Arity::kNone},
      {"training.disable_cuda_graphs", Arity::kNone},
      {"compile.enable", Arity::kNone},
      {"model.converters", Arity::kMany},
      {"model.name", Arity::kOne},
      {"model.flavor", Arity::kOne},
      {"float8.recipe_name", Arity::kOne},
      {"float8.enable_fsdp_float8_all_gather", Arity::kNone},
      {"activation_checkpoint.mode", Arity::kOne},
      {"activation_checkpoint.selective_ac_option", Arity::kOne},
      {"module", Arity::kOne},
      {"config", Arity::kOne},
  };
  return keys;
}

// What the job states: section.key -> value (TOML values; the argument file's words as strings,
// switches as true).
using Settings = std::map<std::string, Json>;

// The TOML tables flattened to section.key (deeper tables joined with dots).
void Flatten(const Json& node, const std::string& prefix, Settings& out) {
  for (auto it = node.begin(); it != node.end(); ++it) {
    const std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (it->is_object()) {
      Flatten(*it, key, out);
    } else {
      out[key] = *it;
    }
  }
}

// The argument file: --section.key value, switches, and the activation_checkpoint:<mode> word.
Settings ArgumentSettings(const std::string& text, std::vector<std::string>& ignored) {
  std::map<std::string, Arity> known;
  for (const auto& [key, arity] : SetupKeys()) known["--" + key] = arity;
  known["activation_checkpoint"] = Arity::kOne;
  const Flags flags = ReadFlags(ShellWords(text), known);
  Settings out;
  for (const auto& [name, flag] : flags.given) {
    const std::string key = name == "activation_checkpoint" ? "activation_checkpoint.mode" : name.substr(2);
    if (known.at(name) == Arity::kNone) {
      out[key] = true;
    } else if (known.at(name) == Arity::kMany) {
      out[key] = flag.values;
    } else {
      out[key] = flag.values.empty() ? "" : flag.values.front();
    }
  }
  ignored = flags.ignored;
  return out;
}

class Reader {
 public:
  explicit Reader(const Settings& settings) : s_(settings) {}

  bool Has(const std::string& key) const { return s_.count(key) > 0; }

  std::int64_t Integer(const std::string& key, std::int64_t absent, std::int64_t min, std::int64_t max) {
    read_.insert(key);
    auto it = s_.find(key);
    if (it == s_.end()) return absent;
    std::int64_t v = 0;
    if (it->second.is_number_integer()) {
      v = it->second.get<std::int64_t>();
    } else if (it->second.is_string()) {
      const std::string& t = it->second.get_ref<const std::string&>();
      std::size_t used = 0;
      try {
        v = std::stoll(t, &used);
      } catch (...) {
        used = 0;
      }
      if (used == 0 || used != t.size()) FailConfiguration(fmt::format("{} {}: give a whole number", key, t));
    } else {
      FailConfiguration(fmt::format("{} {}: give a whole number", key, it->second.dump()));
    }
    if (v < min || v > max) FailConfiguration(fmt::format("{} {}: give a whole number from {} to {}", key, v, min, max));
    return v;
  }

  std::string Word(const std::string& key, const std::string& absent) {
    read_.insert(key);
    auto it = s_.find(key);
    if (it == s_.end()) return absent;
    if (it->second.is_string()) return it->second.get<std::string>();
    if (it->second.is_number_integer()) return std::to_string(it->second.get<std::int64_t>());
    FailConfiguration(fmt::format("{} {}: give a string", key, it->second.dump()));
  }

  bool Switch(const std::string& key, bool absent) {
    read_.insert(key);
    auto it = s_.find(key);
    if (it == s_.end()) return absent;
    if (it->second.is_boolean()) return it->second.get<bool>();
    if (it->second.is_string()) {
      const std::string& t = it->second.get_ref<const std::string&>();
      if (t == "true" || t == "True") return true;
      if (t == "false" || t == "False") return false;
    }
    FailConfiguration(fmt::format("{} {}: give true or false", key, it->second.dump()));
  }

  std::vector<std::string> Words(const std::string& key) {
    read_.insert(key);
    auto it = s_.find(key);
    if (it == s_.end()) return {};
    std::vector<std::string> words;
    auto add = [&](const std::string& text) {
      std::size_t start = 0;
      while (start <= text.size()) {
        const std::size_t comma = text.find(',', start);
        const std::string w = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (!w.empty()) words.push_back(w);
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    };
    if (it->second.is_string()) {
      add(it->second.get<std::string>());
    } else if (it->second.is_array()) {
      for (const Json& v : it->second) {
        if (!v.is_string()) FailConfiguration(fmt::format("{} {}: give a list of strings", key, it->second.dump()));
        add(v.get<std::string>());
      }
    } else {
      FailConfiguration(fmt::format("{} {}: give a list of strings", key, it->second.dump()));
    }
    return words;
  }

  const Json& Value(const std::string& key) {
    read_.insert(key);
    return s_.at(key);
  }

  const std::set<std::string>& read() const { return read_; }

 private:
  const Settings& s_;
  std::set<std::string> read_;
};

LauncherSetup Translate(const Settings& settings, const std::string& format) {
  LauncherSetup out;
  out.format = format;
  Reader r(settings);
  Json& k = out.keywords;
  std::vector<std::string> defaults;

  const std::int64_t tp = r.Integer("parallelism.tensor_parallel_degree", 1, 1, kMaxDegree);
  const std::int64_t pp = r.Integer("parallelism.pipeline_parallel_degree", 1, 1, kMaxDegree);
  const std::int64_t cp = r.Integer("parallelism.context_parallel_degree", 1, 1, kMaxDegree);
  k["tp"] = tp;
  k["pp"] = pp;
  k["cp"] = cp;
  if (r.Has("parallelism.expert_parallel_degree")) k["ep"] = r.Integer("parallelism.expert_parallel_degree", 1, 1, kMaxDegree);
  if (r.Has("parallelism.expert_tensor_parallel_degree")) {
    k["etp"] = r.Integer("parallelism.expert_tensor_parallel_degree", 1, 1, kMaxDegree);
  }

  // Data parallel: replicated (DDP), sharded (FSDP2), or both (HSDP).
  const std::int64_t replicate = r.Integer("parallelism.data_parallel_replicate_degree", 1, 1, kBig);
  const std::int64_t shard = r.Integer("parallelism.data_parallel_shard_degree", -1, -1, kBig);
  if (shard == 0) FailConfiguration("parallelism.data_parallel_shard_degree 0: give -1 (every rank left) or a size");
  const std::string reshard = r.Word("parallelism.fsdp_reshard_after_forward", "default");
  if (reshard != "default" && reshard != "always" && reshard != "never") {
    FailConfiguration(fmt::format("parallelism.fsdp_reshard_after_forward {}: give default, always or never", reshard));
  }
  const bool sharded = shard == -1 || shard > 1;
  if (sharded && replicate > 1) {
    out.refused["zero"] = fmt::format("parallelism.data_parallel_replicate_degree {} with data_parallel_shard_degree {}: "
                                      "HSDP shards within groups of the data-parallel ranks, and bmpipe's ZeRO stages "
                                      "shard over all of them; give --zero (and --dp) on the command line",
                                      replicate, shard);
  } else if (sharded) {
    // FSDP2 shards parameters, gradients and optimizer state; torchtitan's default reshards the
    // parameters after the forward except with pipeline parallelism.
    // Kept gathered, FSDP2 reduce-scatters the gradients of each backward (ZeRO 2), except that
    // torch.distributed.pipelining accumulates them unsharded over the micro-batches and syncs at
    // the last (ZeRO 1).
    const bool resharded = reshard == "always" || (reshard == "default" && pp == 1);
    const int stage = resharded ? 3 : pp > 1 ? 1 : 2;
    k["zero"] = stage;
    if (reshard == "default") {
      defaults.push_back(fmt::format("fsdp_reshard_after_forward default: {} with pipeline degree {} (ZeRO {})",
                                     resharded ? "resharded" : "kept gathered", pp, stage));
    }
    if (shard > 1) k["dp"] = shard;
    // FSDP2 prefetches the next all-gather and reduce-scatters as the backward goes.
    k["dp_overlap"] = kDpOverlapSwitchedOn;
    out.notes.push_back(fmt::format("FSDP2 overlaps its all-gathers and reduce-scatters with compute (prefetching): "
                                    "{:g} of the data-parallel sync hidden, the published-runs table's fraction for "
                                    "Megatron's overlap switches (docs/fidelity.md)",
                                    kDpOverlapSwitchedOn));
  } else {
    k["zero"] = 0;
    k["dp"] = replicate;
    if (replicate > 1) {
      // DDP all-reduces gradient buckets as the backward produces them.
      k["dp_overlap"] = kDpOverlapSwitchedOn;
      out.notes.push_back(fmt::format("DDP all-reduces gradient buckets during the backward: {:g} of the sync hidden, "
                                      "the published-runs table's fraction (docs/fidelity.md)",
                                      kDpOverlapSwitchedOn));
    }
  }

  // Sequence parallelism: torchtitan's tensor parallelism shards the norms' sequence by default.
  const bool sp_off = r.Switch("parallelism.no-enable-sequence-parallel", false);
  const bool sp = !sp_off && r.Switch("parallelism.enable_sequence_parallel", true);
  k["sequence_parallel"] = sp && tp > 1;
  if (r.Switch("parallelism.enable_async_tensor_parallel", false)) k["tp_comm_overlap"] = kTpCommOverlapSwitchedOn;

  // The pipeline schedule and its stages.
  const std::string schedule_name = r.Word("parallelism.pipeline_parallel_schedule", "1F1B");
  const std::optional<ScheduleKind> schedule = ScheduleFromTorchClass(schedule_name);
  if (!schedule) {
    FailConfiguration(fmt::format("parallelism.pipeline_parallel_schedule {}: not a schedule bmpipe models; give one "
                                  "of {}",
                                  schedule_name, TorchScheduleClasses()));
  }
  const ScheduleTraits& traits = TraitsOf(*schedule);
  // The stages: one list of modules each (a TOML array of arrays; the argument file's words).
  std::int64_t stages = 0;
  if (r.Has("parallelism.module_fqns_per_model_part")) {
    const Json& fqns = r.Value("parallelism.module_fqns_per_model_part");
    if (!fqns.is_array() || fqns.empty()) {
      FailConfiguration("parallelism.module_fqns_per_model_part: give one list of module names per stage");
    }
    stages = static_cast<std::int64_t>(fqns.size());
  }
  if (pp > 1) {
    std::int64_t vpp = 1;
    if (stages > 0) {
      if (stages % pp != 0) {
        FailConfiguration(fmt::format("parallelism.module_fqns_per_model_part: {} stages for pipeline degree {}; give "
                                      "a multiple of it",
                                      stages, pp));
      }
      vpp = stages / pp;
    } else if (r.Has("parallelism.pipeline_parallel_layers_per_stage")) {
      r.Integer("parallelism.pipeline_parallel_layers_per_stage", 1, 1, kBig);
      out.refused["vpp"] = "parallelism.pipeline_parallel_layers_per_stage: the stages per rank follow from the "
                           "model's layers; give --vpp on the command line";
    } else if (traits.max_chunks != 1) {
      vpp = std::max(2, traits.min_chunks);
      defaults.push_back(fmt::format("{} stages per rank for the multi-stage schedule {} (torchtitan's default)", vpp,
                                     schedule_name));
    }
    k["vpp"] = vpp;
    const std::int64_t mbs = r.Integer("parallelism.pipeline_parallel_microbatch_size", 1, 1, kBig);
    k["mbs"] = mbs;
  }
  k["schedule"] = *schedule == ScheduleKind::kInterleavedOneFOneB ? std::string("1f1b") : std::string(traits.name);

  // Batch: torchtitan's local batch is per data-parallel rank; without pipelining it is the
  // micro-batch (more local batches accumulate gradients up to the global batch).
  const bool old_batch = r.Has("training.batch_size") && !r.Has("training.local_batch_size");
  const std::int64_t local = old_batch ? r.Integer("training.batch_size", 8, 1, kBig)
                                       : r.Integer("training.local_batch_size", 8, 1, kBig);
  if (!r.Has("training.local_batch_size") && !old_batch) defaults.push_back("local_batch_size 8");
  if (pp == 1) k["mbs"] = local;
  const std::int64_t global = r.Integer("training.global_batch_size", -1, -1, kBig);
  if (global > 0) {
    k["gbs"] = global;
  } else {
    out.local_batch = local;  // the global batch is local x data parallel
  }
  k["seq"] = r.Integer("training.seq_len", 2048, 1, kBig);
  if (!r.Has("training.seq_len")) defaults.push_back("seq_len 2048");

  // Precision: bf16 parameters for the GEMMs (FSDP2's mixed precision), fp32 gradient reduction
  // unless mixed_precision_reduce says bfloat16; float8 or MX converters quantize the linears.
  const std::string param = r.Word("training.mixed_precision_param", "bfloat16");
  if (param != "bfloat16") {
    out.refused["precision"] = fmt::format("training.mixed_precision_param {}: bmpipe costs bf16 GEMMs and their "
                                           "quantized forms; give --precision on the command line",
                                           param);
  }
  const std::string reduce = r.Word("training.mixed_precision_reduce", "float32");
  if (reduce != "float32" && reduce != "bfloat16") {
    FailConfiguration(fmt::format("training.mixed_precision_reduce {}: give float32 or bfloat16", reduce));
  }
  k["grad_dtype"] = reduce == "bfloat16" ? "bf16" : "fp32";
  if (r.Word("training.dtype", "float32") == "bfloat16") {
    k["optimizer_dtype"] = "bf16";
    out.notes.push_back("training.dtype bfloat16: torchtitan keeps the weights and the optimizer's state in bf16 with "
                        "no fp32 copy; bmpipe costs the moments in bf16 and still counts a 4-byte master copy per "
                        "parameter (2 bytes more than the run holds, over the ZeRO shards)");
  }
  const std::vector<std::string> converters = r.Words("model.converters");
  const bool float8 = std::count(converters.begin(), converters.end(), "float8") > 0 ||
                      std::count(converters.begin(), converters.end(), "quantize.linear.float8") > 0;
  const bool mx = std::count(converters.begin(), converters.end(), "mx") > 0 ||
                  std::count(converters.begin(), converters.end(), "quantize.linear.mx") > 0;
  if (float8 && mx) FailConfiguration("model.converters has both float8 and mx: give one");
  k["precision"] = float8 ? "fp8" : mx ? "mxfp8" : "bf16";
  if (float8) {
    const std::string recipe = r.Word("float8.recipe_name", "tensorwise");
    k["fp8_recipe"] = "tensorwise";
    if (recipe != "tensorwise") {
      out.notes.push_back(fmt::format("float8.recipe_name {}: costed as tensorwise current scaling (bmpipe's FP8 "
                                      "GEMM efficiency does not depend on the scaling granularity)",
                                      recipe));
    }
    k["fp8_params"] = r.Switch("float8.enable_fsdp_float8_all_gather", false);
  }
  for (const std::string& c : converters) {
    if (c != "float8" && c != "mx" && c != "quantize.linear.float8" && c != "quantize.linear.mx") {
      FailConfiguration(fmt::format("model.converters {}: bmpipe costs the float8 and mx converters only", c));
    }
  }
  // Attention: SDPA's fused kernels (or flex attention): no score matrix is kept.
  k["flash_attention"] = true;

  // Activation checkpointing: none and full are bmpipe's options; torchtitan's selective (per op,
  // or every n-th layer) and memory-budget modes are not.
  const std::string mode = r.Word("activation_checkpoint.mode", "selective");
  const std::string option = r.Word("activation_checkpoint.selective_ac_option", "2");
  if (mode == "none") {
    k["recompute"] = std::vector<std::string>{"none"};
  } else if (mode == "full") {
    k["recompute"] = std::vector<std::string>{"full"};
  } else if (mode == "selective" || mode == "memory_budget") {
    out.refused["recompute"] = fmt::format(
        "activation_checkpoint mode {}{}{}: torchtitan's {} checkpointing is none of bmpipe's recomputation options; "
        "give --recompute on the command line (none, selective, full, ...), or mode none or full in the file",
        mode, mode == "selective" ? " selective_ac_option " + option : "",
        r.Has("activation_checkpoint.mode") ? "" : " (not given: torchtitan's default)", mode);
  } else {
    FailConfiguration(fmt::format("activation_checkpoint mode {}: give none, selective, full or memory_budget", mode));
  }

  if (r.Switch("training.enable_cpu_offload", false)) {
    out.refused["offload"] = "training.enable_cpu_offload: FSDP's CPU offload moves parameters, gradients and the "
                             "optimizer's state to the host, which none of bmpipe's --offload choices costs; give "
                             "--offload on the command line";
  }
  if (r.Switch("compile.enable", false) || r.Switch("training.compile", false)) {
    out.notes.push_back("torch.compile: not modeled (bmpipe's kernel efficiencies are those of the published runs)");
  }
  r.Switch("training.disable_cuda_graphs", false);
  r.Word("parallelism.pipeline_parallel_schedule_csv", "");
  const std::string model = r.Has("module") ? r.Word("module", "") + " " + r.Word("config", "")
                                            : r.Word("model.name", "") + " " + r.Word("model.flavor", "");
  if (model != " ") {
    out.notes.push_back(fmt::format("the model ({}) comes from --model, which must be that model", model));
  }
  if (!defaults.empty()) {
    out.notes.push_back(fmt::format("torchtitan's defaults for what the file leaves out: {}", fmt::join(defaults, "; ")));
  }
  std::vector<std::string> unread;
  for (const auto& [key, value] : settings) {
    if (!r.read().count(key)) unread.push_back(key);
  }
  if (!unread.empty()) {
    out.notes.push_back(fmt::format("not read (no cost bmpipe models, or unknown to bmpipe's torchtitan reader; if one "
                                    "changes time or memory, give it as a bmpipe option): {}",
                                    ListedWords(unread)));
  }
  return out;
}

}  // namespace

Result<LauncherSetup> ReadTorchTitanSetup(const std::string& text, const std::string& source) {
  if (IsTorchTitanToml(text)) {
    Result<Json> doc = ParseToml(text, source);
    if (!doc.ok()) return doc.error();
    Settings settings;
    Flatten(doc.value(), "", settings);
    return ReadDocument<LauncherSetup>(source, [&] { return Translate(settings, "torchtitan job configuration (TOML)"); });
  }
  return ReadDocument<LauncherSetup>(source, [&] {
    std::vector<std::string> ignored;
    const Settings settings = ArgumentSettings(text, ignored);
    LauncherSetup out = Translate(settings, "torchtitan arguments");
    // Its stages, when it names them, are the plan simulate runs.
    if (settings.count("parallelism.module_fqns_per_model_part")) {
      out.plan_text = text;
      out.plan_format = FrameworkId::kTorchTitan;
    }
    if (!ignored.empty()) out.notes.push_back(IgnoredNote(ignored, "unknown to bmpipe's torchtitan reader"));
    return out;
  });
}

bool IsTorchTitanToml(const std::string& text) {
  for (const char* table : {"parallelism", "training", "activation_checkpoint", "job"}) {
    if (HasTomlTable(text, table)) return true;
  }
  return false;
}

}  // namespace bmpipe
