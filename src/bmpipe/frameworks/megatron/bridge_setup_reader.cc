// Reading the training setup a Megatron-Bridge (or NeMo 2) ConfigContainer states, as its YAML dump
// writes it (megatron.h, ReadMegatronBridgeSetup): each field that changes cost is said again as
// the Megatron-LM flag Megatron-Bridge sets from it, and the Megatron reader reads those flags, so
// one reader holds the meaning of each setting. Megatron-Bridge's own resolution comes first: the
// mixed-precision section over the model's fields, a comm_overlap value over the ddp one.
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bmpipe/core/json_cursor.h"
#include "bmpipe/frameworks/launcher_args.h"
#include "bmpipe/frameworks/megatron/args.h"
#include "bmpipe/frameworks/megatron/megatron.h"

namespace bmpipe {
namespace {

// The fields Megatron-Bridge's mixed-precision recipe `name` sets (src/megatron/bridge/training/
// mixed_precision.py at 05097809: each registered under its name with '_' and with '-').
Json MixedPrecisionRecipe(std::string name) {
  std::replace(name.begin(), name.end(), '-', '_');
  const Json bf16 = {{"bf16", true}, {"grad_reduce_in_fp32", true}};
  const Json fp16 = {{"fp16", true}, {"grad_reduce_in_fp32", false}};
  auto with = [](Json base, const Json& more) {
    for (const auto& [k, v] : more.items()) base[k] = v;
    return base;
  };
  const Json delayed = {{"fp8", "hybrid"}, {"fp8_recipe", "delayed"}, {"fp8_param_gather", true}};
  const Json mxfp8 = {{"fp8", "e4m3"}, {"fp8_recipe", "mxfp8"}, {"fp8_param_gather", true}};
  const Json current = {{"fp8", "hybrid"}, {"fp8_recipe", "tensorwise"}, {"fp8_param_gather", true}};
  const Json subchannel = {{"fp8", "hybrid"}, {"fp8_recipe", "blockwise"}, {"fp8_param_gather", false}};
  const std::map<std::string, Json> recipes = {
      {"bf16_mixed", bf16},
      {"fp16_mixed", fp16},
      {"bf16_with_fp8_delayed_scaling_mixed", with(bf16, delayed)},
      {"fp16_with_fp8_delayed_scaling_mixed", with(fp16, delayed)},
      {"bf16_with_mxfp8_mixed", with(bf16, mxfp8)},
      {"fp16_with_mxfp8_mixed", with(fp16, mxfp8)},
      {"bf16_with_fp8_current_scaling_mixed", with(bf16, current)},
      {"nemotron_h_bf16_with_fp8_current_scaling_mixed", with(bf16, current)},
      {"nanov2_bf16_with_fp8_current_scaling_mixed",
       with(bf16, {{"fp8", "hybrid"}, {"fp8_recipe", "blockwise"}, {"fp8_param_gather", true}})},
      {"fp16_with_fp8_current_scaling_mixed", with(fp16, current)},
      {"bf16_with_fp8_subchannel_scaling_mixed", with(bf16, subchannel)},
      {"fp16_with_fp8_subchannel_scaling_mixed", with(fp16, subchannel)},
  };
  auto it = recipes.find(name);
  if (it == recipes.end()) {
    std::vector<std::string> names;
    for (const auto& [n, fields] : recipes) names.push_back(n);
    FailConfiguration(fmt::format("mixed_precision: {}: not a Megatron-Bridge recipe bmpipe knows ({}); give the "
                                  "resolved ConfigContainer (a dry run's YAML, or ConfigContainer.to_yaml) whose "
                                  "mixed_precision section has its fields",
                                  name, fmt::join(names, ", ")));
  }
  return it->second;
}


// A field's value as a flag's word, or empty for null.
std::string Word(const Json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return std::to_string(v.get<std::int64_t>());
  if (v.is_number()) return fmt::format("{}", v.get<double>());
  // A dtype written as an object ({_target_: torch.bfloat16}).
  if (v.is_object() && v.contains("_target_") && v["_target_"].is_string()) return v["_target_"].get<std::string>();
  return v.dump();
}

// "torch.bfloat16" / "bf16" as Megatron's dtype words.
std::string DtypeWord(const Json& v, const std::string& field) {
  const std::string w = Word(v);
  if (w.empty() || w == "torch.float32" || w == "fp32" || w == "float32") return "fp32";
  if (w == "torch.bfloat16" || w == "bf16" || w == "bfloat16") return "bf16";
  FailConfiguration(fmt::format("{} {}: bmpipe models fp32 and bf16 state; give one of them", field, w));
}

// Shell-quotes a word for the Megatron argument text.
std::string Quoted(const std::string& w) {
  std::string out = "'";
  for (char c : w) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

class Translation {
 public:
  void Flag(const std::string& name) { args_ += name + "\n"; }
  void Value(const std::string& name, const Json& v) {
    const std::string w = Word(v);
    if (w.empty()) return;
    args_ += name + " " + Quoted(w) + "\n";
  }
  void Switch(const std::string& name, const Json& v) {
    if (v.is_boolean() && v.get<bool>()) Flag(name);
  }
  // A flag of several values: a list's, or one value's.
  void Values(const std::string& name, const Json& v) {
    if (Word(v).empty()) return;
    args_ += name;
    for (const Json& one : v.is_array() ? v : Json::array({v})) args_ += " " + Quoted(Word(one));
    args_ += "\n";
  }
  const std::string& args() const { return args_; }

 private:
  std::string args_;
};

LauncherSetup ReadBridge(const Json& doc) {
  if (!doc.is_object() || !doc.contains("model") || !doc["model"].is_object()) {
    FailConfiguration("a Megatron-Bridge ConfigContainer has a `model` section; this document has none");
  }
  const Json null;
  auto section = [&](const char* name) -> const Json& {
    return doc.contains(name) && doc[name].is_object() ? doc[name] : null;
  };
  auto field = [&](const Json& s, const char* key) -> const Json& {
    return s.is_object() && s.contains(key) ? s[key] : null;
  };
  // A comm_overlap value set wins over the ddp (or model) one, as Megatron-Bridge applies it.
  auto overlap = [&](const Json& base, const char* key) -> const Json& {
    const Json& co = field(section("comm_overlap"), key);
    return co.is_null() ? field(base, key) : co;
  };
  const Json& model = section("model");
  const Json& train = section("train");
  const Json& ddp = section("ddp");
  const Json& optimizer = section("optimizer");
  const Json& given_mp = doc.contains("mixed_precision") ? doc["mixed_precision"] : null;
  // A recipe's name stands for the fields its function sets.
  Json named;
  if (given_mp.is_string()) named = MixedPrecisionRecipe(given_mp.get<std::string>());
  const Json& mp = given_mp.is_string() ? named : given_mp;
  const Json& precision = mp.is_object() ? mp : model;  // the mixed-precision config is applied to the model
  Translation t;
  t.Value("--tensor-model-parallel-size", field(model, "tensor_model_parallel_size"));
  t.Value("--pipeline-model-parallel-size", field(model, "pipeline_model_parallel_size"));
  const Json& layout = field(model, "pipeline_model_parallel_layout");
  if (!Word(layout).empty()) {
    t.Value("--pipeline-model-parallel-layout", layout);
  } else {
    t.Value("--num-virtual-stages-per-pipeline-rank", field(model, "virtual_pipeline_model_parallel_size"));
  }
  // The model's fields that are a Megatron flag's value as they are.
  static const std::pair<const char*, const char*> kModelValues[] = {
      {"--microbatch-group-size-per-virtual-pipeline-stage", "microbatch_group_size_per_vp_stage"},
      {"--context-parallel-size", "context_parallel_size"},
      {"--expert-model-parallel-size", "expert_model_parallel_size"},
      {"--expert-tensor-parallel-size", "expert_tensor_parallel_size"},
      {"--num-layers", "num_layers"},
      {"--hidden-size", "hidden_size"}};
  static const std::pair<const char*, const char*> kMoeValues[] = {
      {"--num-experts", "num_moe_experts"},
      {"--moe-router-topk", "moe_router_topk"},
      {"--moe-ffn-hidden-size", "moe_ffn_hidden_size"},
      {"--moe-token-dispatcher-type", "moe_token_dispatcher_type"},
      {"--moe-expert-capacity-factor", "moe_expert_capacity_factor"}};
  for (const auto& [flag, key] : kModelValues) t.Value(flag, field(model, key));
  if (!Word(field(model, "num_moe_experts")).empty()) {
    for (const auto& [flag, key] : kMoeValues) t.Value(flag, field(model, key));
    t.Switch("--moe-router-force-load-balancing", field(model, "moe_router_force_load_balancing"));
  }
  const Json& seq = field(model, "seq_length");
  t.Value("--seq-length", Word(seq).empty() ? field(section("dataset"), "sequence_length") : seq);
  t.Value("--micro-batch-size", field(train, "micro_batch_size"));
  t.Value("--global-batch-size", field(train, "global_batch_size"));
  t.Switch("--sequence-parallel", field(model, "sequence_parallel"));
  t.Value("--attention-backend", field(model, "attention_backend"));
  t.Value("--transformer-impl", field(model, "transformer_impl"));
  // Data parallelism: the distributed optimizer (in ddp and optimizer alike) or Megatron-FSDP.
  const bool distributed = field(ddp, "use_distributed_optimizer") == Json(true) ||
                           field(optimizer, "use_distributed_optimizer") == Json(true);
  if (distributed) t.Flag("--use-distributed-optimizer");
  if (field(ddp, "use_megatron_fsdp") == Json(true) || field(ddp, "use_custom_fsdp") == Json(true)) {
    t.Flag("--use-megatron-fsdp");
    t.Value("--data-parallel-sharding-strategy", field(ddp, "data_parallel_sharding_strategy"));
  }
  t.Switch("--overlap-grad-reduce", overlap(ddp, "overlap_grad_reduce"));
  t.Switch("--overlap-param-gather", overlap(ddp, "overlap_param_gather"));
  const Json& tp_overlap = field(section("comm_overlap"), "tp_comm_overlap");
  t.Switch("--tp-comm-overlap", tp_overlap.is_null() ? field(model, "tp_comm_overlap") : tp_overlap);
  const Json& moe_overlap = field(section("comm_overlap"), "overlap_moe_expert_parallel_comm");
  t.Switch("--overlap-moe-expert-parallel-comm",
           moe_overlap.is_null() ? field(model, "overlap_moe_expert_parallel_comm") : moe_overlap);
  // Recomputation, as Megatron's flags say it.
  t.Value("--recompute-granularity", field(model, "recompute_granularity"));
  t.Value("--recompute-method", field(model, "recompute_method"));
  t.Value("--recompute-num-layers", field(model, "recompute_num_layers"));
  const Json& modules = field(model, "recompute_modules");
  if (modules.is_array() && !modules.empty() && !Word(field(model, "recompute_granularity")).empty()) {
    t.Values("--recompute-modules", modules);
  }
  if (field(model, "cpu_offloading") == Json(true)) t.Flag("--cpu-offloading");
  t.Switch("--disable-parameter-transpose-cache", field(model, "disable_parameter_transpose_cache"));
  // Precision: the mixed-precision section applied over the model's fields.
  if (!Word(field(precision, "fp4")).empty()) {
    t.Value("--fp4-format", field(precision, "fp4"));
    t.Value("--fp4-recipe", field(precision, "fp4_recipe"));
    if (field(precision, "fp4_param") == Json(true) || field(precision, "fp4_param_gather") == Json(true)) {
      t.Flag("--fp4-param-gather");
    }
  } else if (!Word(field(precision, "fp8")).empty()) {
    t.Value("--fp8-format", field(precision, "fp8"));
    t.Value("--fp8-recipe", field(precision, "fp8_recipe"));
    if (field(precision, "fp8_param_gather") == Json(true) || field(precision, "fp8_param") == Json(true) ||
        field(ddp, "fp8_param_gather") == Json(true)) {
      t.Flag("--fp8-param-gather");
    }
  }
  if (field(precision, "fp16") == Json(true)) t.Flag("--fp16");
  // Gradients: the DDP buffer's dtype, or the precision-aware optimizer's main gradients.
  const Json& reduce_fp32 = field(ddp, "grad_reduce_in_fp32").is_null() ? field(precision, "grad_reduce_in_fp32")
                                                                          : field(ddp, "grad_reduce_in_fp32");
  if (reduce_fp32 == Json(false)) t.Flag("--grad-reduce-in-bf16");
  if (field(optimizer, "use_precision_aware_optimizer") == Json(true)) {
    t.Flag("--use-precision-aware-optimizer");
    t.Value("--main-grads-dtype", Json(DtypeWord(field(optimizer, "main_grads_dtype"), "optimizer.main_grads_dtype")));
    t.Value("--exp-avg-dtype", Json(DtypeWord(field(optimizer, "exp_avg_dtype"), "optimizer.exp_avg_dtype")));
    t.Value("--exp-avg-sq-dtype",
               Json(DtypeWord(field(optimizer, "exp_avg_sq_dtype"), "optimizer.exp_avg_sq_dtype")));
  }
  if (field(optimizer, "optimizer_cpu_offload") == Json(true)) {
    t.Flag("--optimizer-cpu-offload");
    t.Value("--optimizer-offload-fraction", field(optimizer, "optimizer_offload_fraction"));
  }
  // CUDA graphs: none, or their scopes.
  const std::string graphs = Word(field(model, "cuda_graph_impl"));
  if (!graphs.empty() && graphs != "none") {
    t.Value("--cuda-graph-impl", field(model, "cuda_graph_impl"));
    t.Values("--cuda-graph-scope", field(model, "cuda_graph_scope"));
  }
  const std::string mtp = Word(field(model, "mtp_num_layers"));
  if (!mtp.empty() && mtp != "0" && field(model, "mtp_enabled") != Json(false)) t.Value("--mtp-num-layers", Json(mtp));
  LauncherSetup out = ReadMegatronSetupFlags(t.args());
  // The flag reader's count of cost-free flags means nothing here: say what was read instead.
  std::vector<std::string> notes;
  notes.push_back("a Megatron-Bridge ConfigContainer: its fields read as the Megatron-LM flags Megatron-Bridge sets "
                  "from them (comm_overlap over ddp, mixed_precision over model)");
  for (const std::string& n : out.notes) {
    if (n.find("flags that change no cost") == std::string::npos) notes.push_back(n);
  }
  out.notes = notes;
  out.format = "a Megatron-Bridge ConfigContainer";
  return out;
}

}  // namespace

bool IsMegatronBridgeConfig(const Json& doc) {
  if (!doc.is_object()) return false;
  if (doc.contains("_target_") && doc["_target_"].is_string() &&
      doc["_target_"].get<std::string>().find("ConfigContainer") != std::string::npos) {
    return true;
  }
  return doc.contains("model") && doc.contains("train") && (doc.contains("ddp") || doc.contains("optimizer"));
}

Result<LauncherSetup> ReadMegatronBridgeSetup(const Json& doc, const std::string& source) {
  return ReadDocument<LauncherSetup>(source, [&] { return ReadBridge(doc); });
}

}  // namespace bmpipe
