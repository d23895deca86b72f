#include "bmpipe/app/model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>
#include <type_traits>

#include "bmpipe/app/builtin_example.h"
#include "bmpipe/app/common.h"
#include "bmpipe/app/profiles.h"
#include "bmpipe/core/document.h"
#include "bmpipe/core/units.h"
#include "bmpipe/frameworks/formats.h"
#include "bmpipe/cost/problem_builder.h"
#include "bmpipe/cost/setup_reader.h"
#include "bmpipe/io/problem_json.h"
#include "bmpipe/problem/problem_reader.h"
#include "bmpipe/problem/recompute.h"
#include "bmpipe/validate/validate.h"

namespace bmpipe::app {
namespace {

std::string Joined(const std::vector<std::string>& names) { return fmt::format("{}", fmt::join(names, ", ")); }

// An option's value as the command line would give it.
std::string OptionValue(const Option& o) {
  return std::visit(
      [](auto* field) -> std::string {
        using T = std::decay_t<decltype(*field)>;
        if constexpr (std::is_same_v<T, bool>) {
          return *field ? "true" : "false";
        } else if constexpr (std::is_same_v<T, std::string>) {
          return field->empty() ? "(none)" : *field;
        } else if constexpr (std::is_same_v<T, std::vector<std::string>> || std::is_same_v<T, std::vector<int>>) {
          return field->empty() ? "(none)" : fmt::format("{}", fmt::join(*field, ","));
        } else {
          return fmt::format("{}", *field);
        }
      },
      o.field);
}

// The settings that are not a setting of the run: what to read, where to write, the check of sizes.
bool IsSetting(const std::string& key) {
  return !key.empty() && key != "model" && key != "device" && key != "setup_from" && key != "defaults" &&
         key != "devices" &&
         key != "offload_optimizer" && key != "offload_keeps_master";
}

}  // namespace

const char* const kCpHelp = "Context-parallel size: the sequence split over cp ranks (ring attention; needs --flash-attn)";
const char* const kEpHelp =
    "Expert-parallel size: each MoE layer's routed experts split over ep ranks (ep x etp divides tp x cp x dp)";
const char* const kEtpHelp = "Expert tensor-parallel size (default: the same as --tp)";
const char* const kZeroHelp =
    "ZeRO stage: 0, 1 (optimizer state sharded over dp x cp, as --distributed-optimizer), 2 (and gradients), 3 (and "
    "parameters: FSDP)";

std::vector<std::string> PrecisionNames() { return {"bf16", "fp8", "mxfp8", "nvfp4"}; }

std::string PrecisionHelp() {
  return "GEMM precision of the linear layers: bf16; fp8 (Transformer Engine, a scale per tensor; 2 more bytes per "
         "parameter for its weight caches); mxfp8 (a scale per 32 elements, Blackwell devices: 1/32 more bytes "
         "per FP8 tensor); or nvfp4 (4-bit values with a scale per 16, Blackwell devices: forward and backward "
         "GEMMs at the FP4 peak, 0.5625 bytes per quantized element)";
}

Status ApplySetupWords(const SetupWords& w, TrainingSetup& setup) {
  // The option table checks each word against the same names, so every word parses.
  setup.precision = ParsePrecision(w.precision).value_or(Precision::kBf16);
  setup.grad_dtype = ParseStateDtype(w.grad_dtype).value_or(StateDtype::kFp32);
  setup.optimizer_dtype = ParseStateDtype(w.optimizer_dtype).value_or(StateDtype::kFp32);
  setup.moe_dispatcher = ParseMoeDispatcher(w.moe_dispatcher).value_or(MoeDispatcher::kAllToAll);
  setup.moe_routing = ParseMoeRouting(w.moe_routing).value_or(MoeRouting::kNatural);
  if (Status offload = ApplyOffload(w.offload, setup); !offload.ok()) return offload;
  const std::optional<Bytes> headroom = CheckedBytes(std::max(w.headroom_gb, 0.0) * kGigabyte);
  if (!headroom) {
    return InvalidInput(fmt::format("--memory-headroom-gb {:g} must be between 0 and {:g} GB", w.headroom_gb,
                                    kMaxInputBytes / kGigabyte));
  }
  setup.headroom_bytes = *headroom;
  return {};
}

Bytes DefaultHeadroomBytes(const DeviceSpec& device, const TrainingSetup& setup, double error) {
  const Bytes reserved = setup.reserved_bytes.value_or(ReservedBytesDefault(device));
  return HeadroomForError(static_cast<double>(device.memory_bytes - reserved), error);
}

std::string DefaultHeadroomLine(Bytes bytes, double error) {
  return fmt::format("{:.1f} GB kept free on every rank by default: the cost model's held-out memory error for runs "
                     "of this kind (±{:.1f} %) of the usable memory, so a plan fits when its peak is that much higher; "
                     "--memory-headroom-gb 0 plans to the full capacity",
                     static_cast<double>(bytes) / 1e9, 100 * error);
}

Status SetReservedBytes(double gb, TrainingSetup& setup) {
  if (gb < 0) return {};
  const std::optional<Bytes> bytes = CheckedBytes(gb * kGigabyte);
  if (!bytes) {
    return InvalidInput(fmt::format("--reserved-gb {:g} is more than any device holds (at most {:g} GB); give the "
                                    "memory reserved for the framework in GB",
                                    gb, kMaxInputBytes / kGigabyte));
  }
  setup.reserved_bytes = *bytes;
  return {};
}

void AddSetupOptions(OptionTable& t, TrainingSetup& setup, SetupWords& words, const std::string& group,
                     const std::string& needs) {
  auto in = [&](Option& o) -> Option& { return o.Group(group).Needs(needs); };
  in(t.Add("--moe-routing", "moe_routing", &words.moe_routing,
           "How a dropless MoE router's load falls on the expert-parallel ranks: natural (a learned router: the "
           "busiest rank takes 1.2 x the even share of routed tokens, from published measurements, "
           "docs/cost-model.md) or balanced (forced even: Megatron's --moe-router-force-load-balancing, as NVIDIA's "
           "MoE benchmarks run)"))
      .Choices({"natural", "balanced"})
      .ShowDefault();
  in(t.Add("--moe-imbalance", "moe_imbalance", &setup.moe_imbalance,
           "Dropless MoE: the busiest expert-parallel rank's routed tokens over the even share, in [1, 16]; 0: from "
           "--moe-routing"))
      .ShowDefault();
  in(t.Add("--moe-capacity-factor", "moe_capacity_factor", &setup.moe_capacity_factor,
           "MoE expert capacity over the even share (0: dropless, then --moe-imbalance applies)"))
      .ShowDefault();
  in(t.Add("--moe-dispatcher", "moe_dispatcher", &words.moe_dispatcher,
           "How MoE tokens reach their experts: alltoall (Megatron's all-to-all, every routed copy) or flex "
           "(DeepEP/HybridEP: once to each node holding one of the token's experts, then over NVLink)"))
      .Choices({"alltoall", "flex"})
      .ShowDefault();
  in(t.Add("--ep-comm-overlap", "ep_comm_overlap", &setup.ep_comm_overlap,
           "Fraction of the MoE dispatch and combine hidden behind another micro-batch's compute (0..1; Megatron's "
           "--overlap-moe-expert-parallel-comm)"))
      .ShowDefault();
  in(t.Add("--moe-cuda-graphs", "moe_cuda_graphs", &setup.moe_cuda_graphs,
           "The MoE router and the dispatch preprocessing replayed as CUDA graphs (Megatron's --cuda-graph-impl "
           "transformer_engine --cuda-graph-scope moe_router moe_preprocess): each MoE layer pass waits the device's "
           "moe_host_graphed_ms for the host instead of moe_host_ms plus moe_host_expert_ms per expert on the rank"));
  in(t.Add("--grad-dtype", "grad_dtype", &words.grad_dtype, "Main gradients: fp32 or bf16"))
      .Choices({"fp32", "bf16"})
      .ShowDefault();
  in(t.Add("--optimizer-dtype", "optimizer_dtype", &words.optimizer_dtype,
           "Adam's moments: fp32 or bf16 (master weights stay fp32)"))
      .Choices({"fp32", "bf16"})
      .ShowDefault();
  in(t.Add("--fp8-recipe", "fp8_recipe", &setup.fp8_recipe,
           "With --precision fp8: the scaling recipe the export states (Megatron's --fp8-recipe): tensorwise "
           "(current scaling, as NVIDIA's recipes run and the FP8 efficiency was fitted on), delayed or blockwise; "
           "costed alike"))
      .Choices({"tensorwise", "delayed", "blockwise"})
      .ShowDefault();
  in(t.Add("--fp8-params", "fp8_params", &setup.fp8_params,
           "With --precision fp8: the linear layers' weights kept in FP8 (1 byte and a 1-byte transpose instead of "
           "16-bit weights and Transformer Engine's FP8 caches; the parameter all-gathers move FP8): Megatron's "
           "--fp8-param-gather, which needs the distributed optimizer"));
  in(t.Add("--no-fp8-transpose-cache", "no_fp8_transpose_cache", &setup.no_fp8_transpose_cache,
           "With --precision fp8: the FP8 weights' transposes are not kept across micro-batches (a byte per "
           "linear-layer parameter less, a transpose in every backward): Megatron's "
           "--disable-parameter-transpose-cache"));
  in(t.Add("--tp-comm-overlap", "tp_comm_overlap", &setup.tp_comm_overlap,
           "Fraction of the tensor-parallel collectives hidden behind GEMMs (0..1; Megatron's default is 0, "
           "--tp-comm-overlap with userbuffers hides most)"))
      .ShowDefault();
  in(t.Add("--offload", "offload", &words.offload,
           "What goes to host memory (comma-separated): activations (offered per layer beside recomputation), "
           "optimizer (state and step on the CPU), optimizer-moments (Adam's moments and the step on the CPU, the "
           "fp32 master weights kept on the device: Megatron's offload without the precision-aware optimizer)"))
      .CommaSeparated()
      .Choices({"activations", "optimizer", "optimizer-moments"});
  in(t.Add("--offload-modules", "offload_modules", &setup.offload_modules,
           "With --offload activations: the offload options move only the tensors saved inside these modules of "
           "megatron-core's fine-grained activation offloading (qkv_linear, core_attn, attn_proj, mlp_norm, expert_fc1, "
           "moe_act; docs/cost-model.md), as Megatron's --offload-modules does, so that --target megatron can run "
           "them. Default: everything the option keeps"))
      .CommaSeparated()
      .Choices({"qkv_linear", "core_attn", "attn_proj", "mlp_norm", "expert_fc1", "moe_act"});
  in(t.Add("--memory-headroom-gb", "headroom_gb", &words.headroom_gb,
           "Memory every rank must leave free beyond the reserve, in GB. Default: plan and search keep the share "
           "the cost model's held-out memory error may add to a peak (stated in the report; when no plan fits with "
           "it, they plan to the full capacity and warn); simulate and compare keep none and warn of a rank within "
           "that error. 0 plans to the full capacity"))
      .NonNegative();
  // The Python package's older keys for what --offload says in words.
  t.Add("", "offload_optimizer", &setup.offload_optimizer, "The optimizer's state and step on the host (offload optimizer)");
  t.Add("", "offload_keeps_master", &setup.offload_keeps_master,
        "With offload_optimizer: the fp32 master weights stay on the device (offload optimizer-moments)");
}

void AddModelOptions(OptionTable& t, ModelRequest& m, const std::string& problem_flag) {
  const std::string group = "Cost model (instead of --problem)";
  auto in = [&](Option& o) -> Option& { return o.Group(group).Needs("--model"); };
  t.RecordGiven(&m.given);
  t.Add("--model", "model", &m.model,
        "Model preset (" + Joined(ModelPresetNames()) + ") or a Hugging Face config.json")
      .Group(group)
      .Excludes(problem_flag);
  in(t.Add("--device", "device", &m.device,
           "Device preset (" + Joined(DevicePresetNames()) + ") or a device file (JSON/YAML, docs/cost-model.md)"));
  in(t.Add("--tp", "tp", &m.setup.tp, "Tensor-parallel size")).ShowDefault();
  in(t.Add("--pp", "pp", &m.setup.pp, "Pipeline-parallel size (pipeline ranks)")).ShowDefault();
  in(t.Add("--dp", "dp", &m.setup.dp, "Data-parallel size")).ShowDefault();
  in(t.Add("--vpp", "vpp", &m.setup.vpp,
           "Model chunks per pipeline rank; > 1 runs interleaved 1F1B (2 with --schedule zb-v, dualpipe or dualpipev, "
           "2 or more with interleaved-zb)"))
      .ShowDefault();
  in(t.Add("--mbs", "mbs", &m.setup.micro_batch_size, "Micro-batch size (sequences)")).ShowDefault();
  in(t.Add("--gbs", "gbs", &m.setup.global_batch_size,
           "Global batch size (sequences per iteration); micro-batches = gbs / (mbs x dp)"));
  in(t.Add("--seq", "seq", &m.setup.seq, "Sequence length (tokens)"));
  t.Find("--model")->needs = "--device";
  in(t.Add("--defaults", "defaults", &m.defaults,
           "A framework version's defaults for what neither --setup-from's file nor the command line states: the "
           "settings its own recipes run with (data/profiles.yaml, each with its source): " +
               Joined(ProfileNames()) + ". Without it, bmpipe's defaults, which the report lists"))
      .Choices(ProfileNames());
  in(t.Add("--setup-from", "setup_from", &m.setup_from,
           "A launcher's file stating the training setup: Megatron-LM arguments (a file of flags or a command line), "
           "a Megatron-Bridge ConfigContainer's YAML (its fields read as the Megatron flags they set), or a "
           "torchtitan job (its TOML configuration or the argument file bmpipe writes): parallel sizes, virtual "
           "stages, batch, sequence parallelism, attention backend, distributed optimizer or FSDP, recomputation, "
           "precision and FP8 weights, gradient and optimizer dtypes, overlap switches, optimizer offload, MoE "
           "dispatcher, routing, capacity, overlap, CUDA graphs. What it states replaces the defaults, what it leaves "
           "out takes the framework's defaults, and options given here win over it; a data-parallel size the file "
           "does not state (the launcher's world size) comes from --dp or --devices. simulate without --plan runs "
           "the file's own layout and recomputation. The report lists every setting and where it came from"));
  in(t.Add("--sequence-parallel", "sequence_parallel", &m.setup.sequence_parallel,
           "Megatron sequence parallelism (norm, dropout and residual activations split over TP)"));
  in(t.Add("--flash-attn", "flash_attention", &m.setup.flash_attention, "Fused (flash) attention: no s x s activations"));
  in(t.Add("--distributed-optimizer", "distributed_optimizer", &m.setup.distributed_optimizer,
           "Shard optimizer state over data parallel (ZeRO-1): 6 + 12/dp bytes per parameter, not 18"));
  in(t.Add("--recompute", "recompute", &m.setup.recompute,
           "Recomputation options offered for every decoder layer (comma-separated): " + Joined(RecomputeOptionNames()) +
               ", or unions such as selective+norm; by default also those the target's settings use"))
      .CommaSeparated()
      .ShowDefault()
      .Given(&m.recompute_given);
  {
    std::vector<std::string> names;
    std::string help = "Pipeline schedule (docs/semantics.md, \"Schedules\"):";
    for (const ScheduleTraits& s : kSchedules) {
      if (s.kind == ScheduleKind::kInterleavedOneFOneB) continue;  // 1f1b with --vpp > 1
      names.emplace_back(s.name);
      help += fmt::format(" {}: {};", s.name, s.summary);
    }
    help += " 1f1b with --vpp > 1 runs Megatron's interleaved 1F1B";
    in(t.Add("--schedule", "schedule", &m.schedule, help)).Choices(names).ShowDefault();
  }
  in(t.Add("--overlap-pairs", "overlap_pairs", &m.setup.overlap_pairs,
           "Run the schedule's pairs of one micro-batch's forward and another's backward overlapped, each one's "
           "expert-parallel all-to-all under the other's compute (docs/semantics.md, \"Actions\"): DualPipe and "
           "DualPipeV with DeepSeek's overlap, interleaved 1F1B as Megatron's combined 1F1B "
           "(--overlap-moe-expert-parallel-comm; each steady forward joined to the backward after it)"));
  in(t.Add("--microbatch-group", "micro_batch_group", &m.setup.micro_batch_group,
           "Interleaved 1F1B and interleaved ZB: micro-batches each chunk runs in a row (Megatron's "
           "--microbatch-group-size-per-virtual-pipeline-stage; default --pp). Lets the micro-batch count be any "
           "number of at least --pp"))
      .Positive();
  in(t.Add("--reserved-gb", "reserved_gb", &m.reserved_gb,
           "Memory reserved on every device for the framework, in GB (default: 1 GiB + 5 % of the device memory)"))
      .NonNegative();
  in(t.Add("--dp-overlap", "dp_overlap", &m.setup.dp_overlap,
           "Fraction of the data-parallel gradient sync hidden behind the backward (0..1)"))
      .ShowDefault();
  in(t.Add("--devices", "devices", &m.setup.devices, "Total devices; checked against tp x cp x pp x dp"));
  in(t.Add("--cp", "cp", &m.setup.cp, kCpHelp)).ShowDefault();
  in(t.Add("--ep", "ep", &m.setup.ep, kEpHelp)).ShowDefault();
  in(t.Add("--etp", "etp", &m.setup.etp, kEtpHelp)).Range(1, 1 << 20);
  in(t.Add("--precision", "precision", &m.words.precision, PrecisionHelp())).Choices(PrecisionNames()).ShowDefault();
  in(t.Add("--zero", "zero", &m.setup.zero, kZeroHelp)).Range(0, 3).ShowDefault();
  AddSetupOptions(t, m.setup, m.words, group, "--model");
  in(t.Add("--dump-problem", "", &m.dump_problem,
           "Write the problem the cost model built (docs/file-formats.md) to this file, to re-run with --problem, "
           "share or edit"));
  t.RecordGiven(nullptr);
}

Lines SettingLines(const ModelRequest& resolved, std::vector<TrainingInfo::Setting>* origins) {
  ModelRequest shown = resolved;
  OptionTable table;
  AddModelOptions(table, shown, "--problem");
  std::vector<std::string> given, filed, profiled, defaulted;
  for (const Option& o : table.options()) {
    if (!IsSetting(o.key)) continue;
    std::string value = OptionValue(o);
    if (o.key == "reserved_gb" && shown.reserved_gb < 0) value = "1 GiB + 5 % of the device";
    if (o.key == "headroom_gb" && shown.words.headroom_gb < 0) value = "0";
    if (o.key == "recompute" && shown.recompute_layers > 0) {
      value += fmt::format(" (full on the first {} layers of each stage)", shown.recompute_layers);
    }
    const std::string item = fmt::format("{} {}", o.key, value);
    if (origins) {
      origins->push_back({o.key, value,
                          resolved.given.count(o.key)          ? "given"
                          : resolved.from_file.count(o.key)    ? "file"
                          : resolved.from_profile.count(o.key) ? "profile"
                                                               : "default"});
    }
    (resolved.given.count(o.key)            ? given
     : resolved.from_file.count(o.key)      ? filed
     : resolved.from_profile.count(o.key)   ? profiled
                                            : defaulted)
        .push_back(item);
  }
  Lines lines;
  lines.push_back({"settings", "given: " + (given.empty() ? std::string("none") : Joined(given))});
  if (!resolved.setup_source.empty()) {
    lines.push_back({"", fmt::format("from {}: {}", resolved.setup_source, filed.empty() ? "none" : Joined(filed))});
  }
  if (!resolved.profile_source.empty()) {
    lines.push_back({"", fmt::format("from profile {}: {}", resolved.profile_source,
                                     profiled.empty() ? "none" : Joined(profiled))});
  }
  lines.push_back({"", "bmpipe's defaults: " + Joined(defaulted)});
  return lines;
}

namespace {

// --setup-from's file into `r` (bound to `table`): what it states and the command line does not.
Status ApplySetupFile(const ModelRequest& args, OptionTable& table, ModelRequest& r, Lines& lines) {
  Result<std::string> text = LoadText(args.setup_from);
  if (!text.ok()) return text.error();
  Result<LauncherSetup> read = ReadLauncherSetup(text.value(), args.setup_from);
  if (!read.ok()) return read.error();
  Json apply = Json::object();
  std::vector<std::string> overridden;
  for (const auto& [key, value] : read.value().keywords.items()) {
    // --overlap-pairs reads the file's --overlap-moe-expert-parallel-comm as Megatron's combined
    // 1F1B rather than as the fixed fraction the published runs assume.
    if (args.given.count(key) || (key == "recompute_num_layers" && args.given.count("recompute")) ||
        (key == "ep_comm_overlap" && args.given.count("overlap_pairs"))) {
      overridden.push_back(fmt::format("{} (the file: {})", key, value.is_array() ? value[0].dump() : value.dump()));
      continue;
    }
    r.from_file.insert(key == "recompute_num_layers" ? "recompute" : key);
    if (key == "recompute_num_layers") {
      r.recompute_layers = value.get<int>();
      continue;
    }
    if (key == "recompute" && !args.file_recompute_only) {
      // The planner chooses among its options: the file's setting is one of them.
      for (const Json& option : value) {
        const std::string name = option.get<std::string>();
        if (std::find(r.setup.recompute.begin(), r.setup.recompute.end(), name) == r.setup.recompute.end()) {
          r.setup.recompute.push_back(name);
        }
      }
      continue;
    }
    apply[key] = value;
  }
  if (Status applied = ReadOptions(table, apply, "--setup-from " + args.setup_from); !applied.ok()) return applied;
  r.setup_source = args.setup_from;
  r.file_model_shape = read.value().model_shape;
  r.setup_plan = read.value().plan_text;
  r.setup_plan_format = read.value().plan_format;
  // What the file states that bmpipe cannot cost: an error unless the command line says instead.
  for (const auto& [key, why] : read.value().refused) {
    if (!args.given.count(key)) return InvalidInput(fmt::format("--setup-from {}: {}", args.setup_from, why));
  }
  // The data-parallel size is the launcher's world size over the model-parallel sizes.
  if (!args.given.count("dp") && r.from_file.count("dp")) {
    // The file states it (torchtitan's degrees); --devices is checked against it.
  } else if (!args.given.count("dp") && args.setup.devices > 0) {
    const long model_parallel = static_cast<long>(r.setup.tp) * r.setup.cp * r.setup.pp;
    if (args.setup.devices % model_parallel != 0) {
      return InvalidInput(fmt::format("--devices {} is not a multiple of tp {} x cp {} x pp {} = {}; give --devices "
                                      "as data-parallel replicas of the file's layout",
                                      args.setup.devices, r.setup.tp, r.setup.cp, r.setup.pp, model_parallel));
    }
    r.setup.dp = static_cast<int>(args.setup.devices / model_parallel);
  } else if (!args.given.count("dp")) {
    return InvalidInput(fmt::format("--setup-from {}: the {} do not state the data-parallel size (the launcher's "
                                    "world size does); give --dp N or --devices N",
                                    args.setup_from, read.value().format));
  }
  // torchtitan's global batch, when not stated: the local batch on every data-parallel rank.
  if (read.value().local_batch > 0 && !args.given.count("gbs") && !r.from_file.count("gbs")) {
    const std::int64_t global = read.value().local_batch * r.setup.dp;
    if (global > std::numeric_limits<int>::max()) {
      return InvalidInput(fmt::format("--setup-from {}: local batch {} x data parallel {} is more sequences than bmpipe "
                                      "takes; give --gbs",
                                      args.setup_from, read.value().local_batch, r.setup.dp));
    }
    r.setup.global_batch_size = static_cast<int>(global);
    r.from_file.insert("gbs");
  }
  lines.push_back({"setup", fmt::format("{} ({}): {} settings read{}", args.setup_from, read.value().format,
                                        r.from_file.size(),
                                        overridden.empty() ? "" : "; given here instead: " + Joined(overridden))});
  for (const std::string& note : read.value().notes) lines.push_back({"", note});
  return {};
}

// --defaults' profile into `r`: each setting neither given nor in the file, whose condition holds
// once those are applied.
Status ApplyProfile(const ModelRequest& args, OptionTable& table, ModelRequest& r, Lines& lines) {
  Result<Profile> profile = FindProfile(args.defaults);
  if (!profile.ok()) return profile.error();
  TrainingSetup now = r.setup;
  now.precision = ParsePrecision(r.words.precision).value_or(Precision::kBf16);
  for (const ProfileSetting& setting : profile.value().settings) {
    if (args.given.count(setting.key) || r.from_file.count(setting.key) || !ProfileSettingApplies(setting, now)) {
      continue;
    }
    if (Status applied = ApplyProfileSetting(table, args.defaults, setting); !applied.ok()) return applied;
    r.from_profile.insert(setting.key);
  }
  r.profile_source = args.defaults;
  lines.push_back({"defaults", fmt::format("profile {}: {} (data/profiles.yaml names each value's source)",
                                           args.defaults, profile.value().describes)});
  return {};
}

}  // namespace

Result<ModelRequest> ResolveSetup(const ModelRequest& args, Lines& lines) {
  if (args.setup_from.empty() && args.defaults.empty()) return args;
  ModelRequest r = args;
  OptionTable table;
  AddModelOptions(table, r, "--problem");
  if (!args.setup_from.empty()) {
    if (Status file = ApplySetupFile(args, table, r, lines); !file.ok()) return file.error();
  }
  if (!args.defaults.empty()) {
    if (Status profile = ApplyProfile(args, table, r, lines); !profile.ok()) return profile.error();
  }
  r.given = args.given;  // what the file and the profile set is not given
  if (!args.setup_from.empty() && !args.given.count("dp") && !r.from_file.count("dp")) {
    r.given.insert("dp");  // from --devices
  }
  r.setup_from.clear();
  r.defaults.clear();
  return r;
}

Result<Problem> BuildModelProblem(const ModelRequest& request, std::vector<std::pair<std::string, std::string>>& lines,
                                  std::vector<std::pair<std::string, std::string>>& files,
                                  const std::vector<TargetKind>& targets) {
  Result<ModelRequest> resolved = ResolveSetup(request, lines);
  if (!resolved.ok()) return resolved.error();
  const ModelRequest& args = resolved.value();
  if (args.setup.global_batch_size <= 0 || args.setup.seq <= 0) {
    return InvalidInput(fmt::format("--model needs {}{}{}: give it (or --setup-from a launcher file that states it)",
                                    args.setup.global_batch_size <= 0 ? "--gbs (sequences per iteration)" : "",
                                    args.setup.global_batch_size <= 0 && args.setup.seq <= 0 ? " and " : "",
                                    args.setup.seq <= 0 ? "--seq (tokens per sequence)" : ""));
  }
  Result<ModelSpec> model = LoadModel(args.model);
  if (!model.ok()) return model.error();
  // The file's model shape against --model's: the setup of one model read for another is an error.
  for (const auto& [flag, value] : args.file_model_shape) {
    const ModelSpec& m = model.value();
    const std::int64_t has = flag == "--num-layers"        ? m.layers
                             : flag == "--hidden-size"     ? m.hidden
                             : flag == "--num-experts"     ? m.moe.experts
                             : flag == "--moe-router-topk" ? m.moe.top_k
                                                           : m.moe.ffn;
    if (has != value) {
      return InvalidInput(fmt::format("--setup-from {} states {} {}, but --model {} has {}: the file is another "
                                      "model's launch; give that model's config as --model",
                                      args.setup_source, flag, value, args.model, has));
    }
  }
  Result<DeviceSpec> device = LoadDevice(args.device);
  if (!device.ok()) return device.error();
  TrainingSetup setup = args.setup;
  const std::optional<ScheduleKind> schedule = ScheduleFromName(args.schedule);
  if (!schedule || *schedule == ScheduleKind::kInterleavedOneFOneB) {
    return InvalidInput(fmt::format("--schedule {}: use one of {} (1f1b interleaves with --vpp > 1)", args.schedule,
                                    ScheduleNames()));
  }
  setup.schedule = *schedule;
  if (!args.recompute_given) AddTargetRecomputeOptions(targets, setup.recompute);
  if (Status reserved = SetReservedBytes(args.reserved_gb, setup); !reserved.ok()) return reserved.error();
  if (Status words = ApplySetupWords(args.words, setup); !words.ok()) return words.error();
  // Both given, they must agree: the distributed optimizer is ZeRO 1.
  if (args.given.count("zero") && args.given.count("distributed_optimizer") && setup.distributed_optimizer &&
      setup.zero != 1) {
    return InvalidInput(fmt::format("--zero {} with --distributed-optimizer, which is ZeRO 1: give one of them", setup.zero));
  }
  const double memory_error = MemoryUncertainty(model.value(), setup);
  ModelRequest shown = args;  // the settings as the report lists them: the default headroom's value
  const bool default_headroom = args.default_headroom && args.words.headroom_gb < 0;
  if (default_headroom) {
    setup.headroom_bytes = DefaultHeadroomBytes(device.value(), setup, memory_error);
    shown.words.headroom_gb = static_cast<double>(setup.headroom_bytes) / kGigabyte;
  }
  std::vector<std::string> host_notes;
  Result<Problem> problem = BuildProblem(model.value(), device.value(), setup, &host_notes);
  if (!problem.ok()) return problem.error();
  const ParameterCounts counts = CountParameters(model.value());
  lines.push_back({"model", fmt::format("{} ({}, {:.2f} B parameters, {} layers)", args.model, model.value().family,
                                        static_cast<double>(counts.total) / kBillion, model.value().layers)});
  lines.push_back({"costs", fmt::format("analytic model on {}{}", device.value().name,
                                        device.value().approximate ? " (approximate device figures)" : "")});
  lines.push_back({"uncertainty", PredictionUncertainty(model.value(), setup, device.value().name)});
  // Without a profile, the target's framework has one that says what it runs by itself.
  if (args.profile_source.empty()) {
    for (TargetKind kind : targets) {
      const bool megatron = kind == TargetKind::kMegatron || kind == TargetKind::kMegatronLocal;
      if (!megatron && kind != TargetKind::kTorchTitan) continue;
      lines.push_back({"defaults", fmt::format("bmpipe's, listed below; --defaults {} takes what {} runs with when "
                                               "only the layout is given",
                                               megatron ? "megatron-core-0.16" : "torchtitan-0.3",
                                               megatron ? "Megatron-LM" : "torchtitan")});
      break;
    }
  }
  if (default_headroom && setup.headroom_bytes > 0) {
    lines.push_back({"headroom", DefaultHeadroomLine(setup.headroom_bytes, memory_error)});
  }
  if (problem.value().training) problem.value().training->memory_error = memory_error;
  if (model.value().moe.enabled() && setup.moe_capacity_factor == 0) {
    const std::string why =
        setup.moe_imbalance > 0                    ? "--moe-imbalance"
        : setup.moe_routing == MoeRouting::kNatural ? "natural routing, a learned router (--moe-routing balanced for "
                                                      "force-balanced benchmarks)"
                                                    : "forced balance (--moe-routing balanced)";
    lines.push_back({"moe routing", fmt::format("the busiest expert-parallel rank takes {:g} x the even share of routed "
                                                "tokens: {}",
                                                MoeImbalance(setup), why)});
  }
  for (const std::string& note : model.value().not_modeled) lines.push_back({"not modeled", note});
  for (const std::string& note : host_notes) lines.push_back({"host memory", note});
  std::vector<TrainingInfo::Setting> origins;
  for (auto& line : SettingLines(shown, &origins)) lines.push_back(std::move(line));
  if (problem.value().training) problem.value().training->settings = std::move(origins);
  if (!args.dump_problem.empty()) {
    files.push_back({args.dump_problem, ProblemJsonText(problem.value(), "")});
    lines.push_back({"problem", "written to " + args.dump_problem});
  }
  return problem;
}

Result<Problem> LoadProblemFile(const std::string& path, const Context& context) {
  std::vector<std::string> notes;
  Result<Problem> problem = LoadProblem(path, &notes);
  for (const std::string& n : notes) context.Note(n);
  return problem;
}

Result<Problem> BuiltinExample() {
  Result<Json> doc = ParseDocument(BuiltinExampleText(), "problem.yaml");
  if (!doc.ok()) return doc.error();
  return ReadProblem(doc.value(), BuiltinExampleName());
}

Result<Problem> LoadProblemOrExample(const std::string& path, const Context& context, std::string& shown) {
  if (!path.empty()) {
    shown = path;
    return LoadProblemFile(path, context);
  }
  shown = BuiltinExampleName();
  return BuiltinExample();
}

}  // namespace bmpipe::app
