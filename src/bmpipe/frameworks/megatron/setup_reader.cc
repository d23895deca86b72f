// Reading the training setup a Megatron-LM argument file states (megatron.h, ReadMegatronSetup):
// each flag that changes cost or memory as the keyword of bmpipe's option that says the same, the
// flags left out at Megatron's defaults, and the overlap switches at the fractions of the
// published-runs table's convention (problem.h).
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bmpipe/core/json_cursor.h"
#include "bmpipe/frameworks/megatron/args.h"
#include "bmpipe/frameworks/megatron/megatron.h"
#include "bmpipe/problem/problem.h"
#include "bmpipe/problem/recompute.h"

namespace bmpipe {
namespace {

// The flags the setup reader reads beyond the plan reader's: precision, attention, dtypes and the
// switches of the launch.
const std::map<std::string, Arity>& SetupFlags() {
  static const std::map<std::string, Arity> flags = [] {
    std::map<std::string, Arity> f = MegatronFlags();
    for (const char* name : {"--bf16", "--fp16", "--use-flash-attn", "--grad-reduce-in-bf16",
                             "--accumulate-allreduce-grads-in-fp32", "--moe-router-force-load-balancing",
                             "--moe-grouped-gemm", "--moe-pad-expert-input-to-capacity"}) {
      f[name] = Arity::kNone;
    }
    for (const char* name : {"--attention-backend", "--transformer-impl", "--microbatch-group-size-per-virtual-pipeline-stage",
                             "--hidden-size", "--moe-router-load-balancing-type",
                             "--optimizer-offload-fraction", "--ckpt-format", "--fp8-amax-history-len",
                             "--fp8-amax-compute-algo"}) {
      f[name] = Arity::kOne;
    }
    return f;
  }();
  return flags;
}

// Flags of a launch that change neither time nor memory in bmpipe's model: listed as such, not as
// unknown.
bool CostFree(const std::string& flag) {
  static const std::set<std::string> names = {
      "--lr", "--min-lr", "--lr-decay-style", "--lr-warmup-iters", "--lr-warmup-samples", "--lr-decay-iters",
      "--lr-decay-samples", "--weight-decay", "--clip-grad", "--adam-beta1", "--adam-beta2", "--adam-eps",
      "--init-method-std", "--train-iters", "--train-samples", "--eval-iters", "--eval-interval", "--log-interval",
      "--save-interval", "--save", "--load", "--data-path", "--split", "--tokenizer-type", "--tokenizer-model",
      "--vocab-file", "--merge-file", "--seed", "--tensorboard-dir", "--wandb-project", "--wandb-exp-name",
      "--distributed-backend", "--distributed-timeout-minutes", "--use-mcore-models", "--no-load-optim",
      "--no-load-rng", "--mock-data", "--log-throughput", "--log-timers-to-tensorboard", "--timing-log-level",
      "--manual-gc", "--manual-gc-interval", "--exit-duration-in-mins", "--data-cache-path", "--num-workers",
      "--use-checkpoint-args", "--finetune", "--bias-swiglu-fusion", "--no-bias-swiglu-fusion",
      "--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl", "--disable-bias-linear", "--untie-embeddings-and-output-weights",
      "--position-embedding-type", "--rotary-base", "--rotary-percent", "--normalization", "--norm-epsilon",
      "--swiglu", "--squared-relu", "--group-query-attention", "--num-query-groups", "--hidden-size",
      "--ffn-hidden-size", "--num-attention-heads", "--kv-channels", "--max-position-embeddings",
      "--make-vocab-size-divisible-by", "--attention-dropout", "--hidden-dropout", "--no-masked-softmax-fusion",
      "--no-position-embedding", "--qk-layernorm", "--multi-latent-attention", "--q-lora-rank", "--kv-lora-rank",
      "--qk-head-dim", "--qk-pos-emb-head-dim", "--v-head-dim", "--moe-router-score-function",
      "--moe-router-enable-expert-bias", "--moe-router-bias-update-rate", "--moe-aux-loss-coeff",
      "--moe-router-dtype", "--moe-router-pre-softmax", "--moe-router-num-groups", "--moe-router-group-topk",
      "--moe-router-topk-scaling-factor", "--moe-z-loss-coeff", "--moe-permute-fusion", "--moe-shared-expert-overlap",
      "--use-distributed-optimizer-checkpoint", "--async-save", "--dist-ckpt-strictness", "--calculate-per-token-loss",
      "--vocab-size", "--use-rotary-position-embeddings", "--no-rope-fusion", "--overlap-p2p-communication",
      "--defer-embedding-wgrad-compute", "--decoupled-lr", "--decoupled-min-lr", "--tiktoken-pattern",
      "--no-create-attention-mask-in-dataloader", "--no-mmap-bin-files", "--profile", "--profile-step-start",
      "--profile-step-end", "--apply-layernorm-1p", "--attention-softmax-in-fp32", "--no-persist-layer-norm",
      "--moe-token-drop-policy", "--rotary-scaling-factor", "--mscale", "--mscale-all-dim", "--log-params-norm",
      "--log-num-zeros-in-grad", "--bf16-reduced-precision-matmul", "--eod-mask-loss", "--reset-position-ids",
      "--reset-attention-mask", "--tokenizer-model", "--no-gradient-accumulation-fusion", "--use-flash-attn"};
  return names.count(flag) > 0;
}

std::string First(const Flag& flag) { return flag.values.empty() ? std::string() : flag.values.front(); }

// Megatron's --recompute-modules as bmpipe's option names: the parts a layer recomputes. Megatron's
// mlp is the dense MLP and moe the MoE block, both bmpipe's mlp on the layers they apply to: with
// experts (`moe`) and only one of them named, both options are offered (without and with mlp), and
// the file's plan sets each layer's; else the one option every layer runs.
Json RecomputeModules(const std::vector<std::string>& modules, bool moe) {
  const bool dense_mlp = std::find(modules.begin(), modules.end(), "mlp") != modules.end();
  const bool moe_mlp = std::find(modules.begin(), modules.end(), "moe") != modules.end();
  std::vector<std::string> parts;
  auto add = [&](const std::string& part) {
    if (std::find(parts.begin(), parts.end(), part) == parts.end()) parts.push_back(part);
  };
  for (const std::string& m : modules) {
    if (m == "core_attn") add("selective");
    else if (m == "mlp" || m == "moe") continue;
    else if (m == "layernorm") add("norm");
    else if (m == "mla_up_proj") add("mla_up_proj");
    else if (m == "moe_act") add("mlp_act");
    else {
      FailConfiguration(fmt::format("--recompute-modules {}: recomputing '{}' is not modeled by bmpipe's options "
                                    "(core_attn, mlp, moe, moe_act, layernorm and mla_up_proj are); remove it",
                                    fmt::join(modules, " "), m));
    }
  }
  const std::string base = parts.empty() ? "none" : fmt::format("{}", fmt::join(parts, "+"));
  const std::string with_mlp = parts.empty() ? "mlp" : base + "+mlp";
  if (moe && dense_mlp != moe_mlp) return Json::array({base, with_mlp});
  return Json::array({dense_mlp || moe_mlp ? with_mlp : base});
}

}  // namespace

LauncherSetup ReadMegatronSetupFlags(const std::string& text) {
  const Flags flags = ReadFlags(ShellWords(text), SetupFlags());
  LauncherSetup out;
  out.plan_text = text;
  Json& k = out.keywords;
  k = Json::object();
  std::vector<std::string> defaults;  // what Megatron's defaults supplied
  auto integer = [&](const char* flag, const char* key, std::int64_t min, std::int64_t max) {
    if (const Flag* f = flags.Get(flag)) k[key] = IntegerValue(*f, min, max);
  };
  integer("--tensor-model-parallel-size", "tp", 1, kMaxRanks);
  integer("--pipeline-model-parallel-size", "pp", 1, kMaxRanks);
  integer("--context-parallel-size", "cp", 1, kMaxRanks);
  integer("--expert-model-parallel-size", "ep", 1, 1 << 16);
  integer("--expert-tensor-parallel-size", "etp", 1, kMaxRanks);
  integer("--micro-batch-size", "mbs", 1, std::int64_t{1} << 24);
  integer("--global-batch-size", "gbs", 1, std::int64_t{1} << 30);
  integer("--seq-length", "seq", 1, std::int64_t{1} << 24);
  // The parallel sizes and the micro-batch left out: Megatron's 1.
  for (const auto& [flag, key] : {std::pair<const char*, const char*>{"--tensor-model-parallel-size", "tp"},
                                  {"--pipeline-model-parallel-size", "pp"},
                                  {"--context-parallel-size", "cp"},
                                  {"--micro-batch-size", "mbs"}}) {
    if (!k.contains(key)) {
      k[key] = 1;
      defaults.push_back(fmt::format("{} 1", flag));
    }
  }

  // Virtual stages: over the layers the file states (the per-stage flag needs them).
  const int ranks = k.contains("pp") ? k["pp"].get<int>() : 1;
  int layers = 0;
  if (const Flag* n = flags.Get("--num-layers")) layers = static_cast<int>(IntegerValue(*n, 1, kMaxLayers));
  if (flags.Get("--num-layers-per-virtual-pipeline-stage") && layers == 0) {
    FailConfiguration("--num-layers-per-virtual-pipeline-stage without --num-layers: the virtual stages per rank "
                      "follow from both; add --num-layers");
  }
  if (const int chunks = MegatronChunks(flags, layers, ranks); chunks > 1) k["vpp"] = chunks;
  integer("--microbatch-group-size-per-virtual-pipeline-stage", "micro_batch_group", 1, std::int64_t{1} << 24);

  // Megatron turns sequence parallelism off over one tensor-parallel rank (it divides nothing).
  const bool tp1 = !k.contains("tp") || k["tp"].get<int>() == 1;
  k["sequence_parallel"] = flags.Get("--sequence-parallel") != nullptr && !tp1;
  if (flags.Get("--sequence-parallel") && tp1) {
    out.notes.push_back("--sequence-parallel with tensor-parallel size 1: Megatron turns it off (it divides nothing)");
  }
  // Attention: Megatron-Core's default backend (auto) lets Transformer Engine pick its fused or
  // flash kernel, which keeps no s x s scores; local and unfused compute them, as the local layer
  // spec's core attention does.
  const Flag* impl_flag = flags.Get("--transformer-impl");
  const bool local_spec = impl_flag && First(*impl_flag) == "local";
  if (const Flag* backend = flags.Get("--attention-backend")) {
    const std::string b = First(*backend);
    if (b != "flash" && b != "fused" && b != "auto" && b != "unfused" && b != "local") {
      FailConfiguration(fmt::format("--attention-backend {}: give flash, fused, unfused, local or auto", b));
    }
    k["flash_attention"] = b == "flash" || b == "fused" || b == "auto";
  } else if (flags.Get("--use-flash-attn")) {
    k["flash_attention"] = true;
  } else {
    k["flash_attention"] = !local_spec;
    defaults.push_back(local_spec ? "the local layer spec's unfused core attention"
                                  : "--attention-backend auto (Transformer Engine's fused attention: flash_attention)");
  }

  // ZeRO: the distributed optimizer is stage 1; Megatron-FSDP's sharding strategy names the stage.
  const bool distributed = flags.Get("--use-distributed-optimizer") != nullptr;
  k["distributed_optimizer"] = distributed;
  if (flags.Get("--use-megatron-fsdp") || flags.Get("--use-custom-fsdp")) k["zero"] = MegatronZeroStage(flags);

  // Recomputation: the options the file's setting uses (block also leaves layers without any).
  const Flag* granularity = flags.Get("--recompute-granularity");
  std::string kind = granularity ? First(*granularity) : "";
  if (kind.empty() && flags.Get("--recompute-activations")) kind = "selective";
  const Flag* method = flags.Get("--recompute-method");
  const Flag* count = flags.Get("--recompute-num-layers");
  if (kind.empty()) {
    if (method || count || flags.Get("--recompute-modules")) {
      FailConfiguration("--recompute-method, --recompute-num-layers or --recompute-modules without "
                        "--recompute-granularity: Megatron recomputes nothing then; add --recompute-granularity full "
                        "or selective, or remove them");
    }
    k["recompute"] = Json::array({"none"});
  } else if (kind == "full") {
    if (!method || !count) {
      FailConfiguration("--recompute-granularity full needs --recompute-method block|uniform and "
                        "--recompute-num-layers N (Megatron refuses it without them)");
    }
    const std::string how = First(*method);
    const std::int64_t n = IntegerValue(*count, 1, kMaxLayers);
    if (how == "uniform" && n == 1) {
      k["recompute"] = Json::array({"full"});
    } else if (how == "block") {
      k["recompute"] = Json::array({"none", "full"});
      k["recompute_num_layers"] = n;
    } else if (how == "uniform") {
      FailConfiguration(fmt::format("--recompute-method uniform --recompute-num-layers {}: uniform checkpoints groups "
                                    "of {} decoder layers as one unit, which bmpipe's per-layer options do not "
                                    "model; give --recompute-num-layers 1 (every layer) or --recompute-method block",
                                    n, n));
    } else {
      FailConfiguration(fmt::format("--recompute-method {}: give block or uniform", how));
    }
  } else if (kind == "selective") {
    if (method || count) {
      FailConfiguration("--recompute-method or --recompute-num-layers with selective recomputation: Megatron refuses "
                        "them; remove them");
    }
    const Flag* modules = flags.Get("--recompute-modules");
    k["recompute"] = RecomputeModules(modules ? modules->values : std::vector<std::string>{"core_attn"},
                                      flags.Get("--num-experts") != nullptr);
    if (!modules) defaults.push_back("--recompute-modules core_attn");
  } else {
    FailConfiguration(fmt::format("--recompute-granularity {}: give full or selective", kind));
  }

  // Precision: the recipe tells MXFP8 (a scale per 32 elements) from FP8 with a scale per tensor.
  const Flag* fp8 = flags.Get("--fp8-format");
  const Flag* fp4 = flags.Get("--fp4-format");
  if (fp8 && fp4) FailConfiguration("--fp8-format with --fp4-format: Megatron refuses both; give one");
  if (fp4) {
    if (const Flag* recipe = flags.Get("--fp4-recipe"); recipe && First(*recipe) != "nvfp4") {
      FailConfiguration(fmt::format("--fp4-recipe {}: bmpipe costs Transformer Engine's NVFP4 block scaling only "
                                    "(--fp4-recipe nvfp4)",
                                    First(*recipe)));
    }
    k["precision"] = "nvfp4";
  } else if (fp8) {
    const Flag* recipe = flags.Get("--fp8-recipe");
    const std::string r = recipe ? First(*recipe) : "delayed";
    if (r != "delayed" && r != "tensorwise" && r != "blockwise" && r != "mxfp8") {
      FailConfiguration(fmt::format("--fp8-recipe {}: give delayed, tensorwise, blockwise or mxfp8", r));
    }
    k["precision"] = r == "mxfp8" ? "mxfp8" : "fp8";
    if (r != "mxfp8") k["fp8_recipe"] = r;
    if (!recipe) defaults.push_back("--fp8-recipe delayed");
    if (r != "tensorwise" && r != "mxfp8") {
      out.notes.push_back(fmt::format("--fp8-recipe {} is costed as the FP8 of the runs fitted (tensorwise, current "
                                      "scaling): no published run calibrates {} scaling apart",
                                      r, r));
    }
  } else {
    k["precision"] = "bf16";
    if (flags.Get("--fp16")) out.notes.push_back("--fp16 is costed as bf16 (the same 16-bit peak and bytes)");
  }
  k["fp8_params"] = flags.Get("--fp8-param-gather") != nullptr || flags.Get("--fp4-param-gather") != nullptr;
  k["no_fp8_transpose_cache"] = flags.Get("--disable-parameter-transpose-cache") != nullptr;

  // State dtypes: the precision-aware optimizer's, else fp32 main gradients unless reduced in bf16
  // (Megatron accumulates and reduces bf16 training's gradients in fp32 by default).
  auto dtype = [&](const char* name) { return MegatronStateDtype(flags, name); };
  std::string grads = dtype("--main-grads-dtype");
  if (flags.Get("--grad-reduce-in-bf16")) {
    if (flags.Get("--accumulate-allreduce-grads-in-fp32")) {
      FailConfiguration("--grad-reduce-in-bf16 with --accumulate-allreduce-grads-in-fp32: they contradict; give one");
    }
    grads = "bf16";
  }
  k["grad_dtype"] = grads;
  const std::string avg = dtype("--exp-avg-dtype"), avg_sq = dtype("--exp-avg-sq-dtype");
  if (avg != avg_sq) {
    FailConfiguration(fmt::format("--exp-avg-dtype {} --exp-avg-sq-dtype {}: bmpipe models both moments in one "
                                  "dtype; give the same",
                                  avg, avg_sq));
  }
  k["optimizer_dtype"] = avg;

  // Overlaps: switches, at the table's fractions (problem.h).
  const bool grad_reduce = flags.Get("--overlap-grad-reduce") != nullptr;
  const bool param_gather = flags.Get("--overlap-param-gather") != nullptr;
  if (param_gather && !(distributed || k.contains("zero"))) {
    FailConfiguration("--overlap-param-gather without --use-distributed-optimizer: Megatron refuses it; add "
                      "--use-distributed-optimizer or remove it");
  }
  const double dp_overlap = !grad_reduce && !param_gather ? 0
                            : !distributed || (grad_reduce && param_gather)
                                ? kDpOverlapSwitchedOn
                            : grad_reduce ? kDpOverlapGradReduceOnly
                                          : kDpOverlapParamGatherOnly;
  k["dp_overlap"] = dp_overlap;
  k["tp_comm_overlap"] = flags.Get("--tp-comm-overlap") ? kTpCommOverlapSwitchedOn : 0.0;
  if (dp_overlap > 0 || flags.Get("--tp-comm-overlap")) {
    out.notes.push_back(fmt::format(
        "overlap switches at the published-runs table's fractions (docs/fidelity.md): {}{}",
        dp_overlap > 0 ? fmt::format("{:g} of the data-parallel sync hidden", dp_overlap) : "",
        flags.Get("--tp-comm-overlap")
            ? fmt::format("{}{:g} of the tensor-parallel collectives", dp_overlap > 0 ? ", " : "", kTpCommOverlapSwitchedOn)
            : ""));
  }

  // Offloading: the optimizer (the precision-aware optimizer's CPU offload); Megatron's
  // --cpu-offloading of whole layers' activations is not bmpipe's per-layer option.
  if (flags.Get("--cpu-offloading")) {
    FailConfiguration("--cpu-offloading: Megatron offloads the activations of whole layers and refuses it with "
                      "pipeline parallelism or recomputation, which bmpipe's per-layer offload options do not "
                      "describe; remove --cpu-offloading");
  }
  if (flags.Get("--optimizer-cpu-offload")) {
    if (!flags.Get("--use-precision-aware-optimizer")) {
      FailConfiguration("--optimizer-cpu-offload without --use-precision-aware-optimizer: Megatron-LM requires it; "
                        "add --use-precision-aware-optimizer");
    }
    if (const Flag* fraction = flags.Get("--optimizer-offload-fraction"); fraction && First(*fraction) != "1" &&
                                                                        First(*fraction) != "1.0") {
      FailConfiguration(fmt::format("--optimizer-offload-fraction {}: bmpipe costs the whole optimizer on the host "
                                    "(1.0); give 1.0 or remove --optimizer-cpu-offload",
                                    First(*fraction)));
    }
    k["offload"] = Json::array({"optimizer"});
  }
  // Fine-grained activation offloading: the offload options, limited to its modules (the plan
  // reader checks the fraction and the delta across ranks).
  if (const std::vector<std::string> modules = MegatronOffloadModules(flags); !modules.empty()) {
    Json names = Json::array();
    for (const std::string& m : modules) {
      if (m == "attn_norm") {
        FailConfiguration("--offload-modules attn_norm: Transformer Engine's layer spec fuses the input norm into the "
                          "QKV projection and megatron-core skips attn_norm (qkv_linear offloads that input); remove it");
      }
      if (std::find(std::begin(kOffloadModules), std::end(kOffloadModules), m) == std::end(kOffloadModules)) {
        FailConfiguration(fmt::format("--offload-modules {}: bmpipe costs {}; remove '{}'", fmt::join(modules, " "),
                                      fmt::join(kOffloadModules, ", "), m));
      }
      names.push_back(m);
    }
    if (!k.contains("offload")) k["offload"] = Json::array();
    k["offload"].push_back("activations");
    k["offload_modules"] = names;
  }

  // MoE: the dispatcher (Megatron's default, allgather, is not costed), routing, capacity, overlap
  // and CUDA graphs. Without --num-experts the model's own experts decide whether they apply.
  const bool moe = flags.Get("--num-experts") != nullptr;
  const bool moe_flags = moe || flags.Get("--moe-token-dispatcher-type") || flags.Get("--expert-model-parallel-size");
  if (const Flag* d = flags.Get("--moe-token-dispatcher-type")) {
    const std::string type = First(*d);
    if (type != "alltoall" && type != "flex") {
      FailConfiguration(fmt::format("--moe-token-dispatcher-type {}: bmpipe costs alltoall and flex (DeepEP/HybridEP) "
                                    "dispatchers; give one of them",
                                    type));
    }
    k["moe_dispatcher"] = type;
  } else if (moe) {
    FailConfiguration("--num-experts without --moe-token-dispatcher-type: Megatron's default dispatcher, allgather, "
                      "is not costed by bmpipe; give --moe-token-dispatcher-type alltoall or flex");
  }
  if (moe_flags) k["moe_routing"] = flags.Get("--moe-router-force-load-balancing") ? "balanced" : "natural";
  if (moe_flags || flags.Get("--moe-expert-capacity-factor")) k["moe_capacity_factor"] = MegatronCapacityFactor(flags);
  if (moe_flags || flags.Get("--overlap-moe-expert-parallel-comm")) {
    k["ep_comm_overlap"] = flags.Get("--overlap-moe-expert-parallel-comm") ? kEpCommOverlapSwitchedOn : 0.0;
  }
  const Flag* impl = flags.Get("--cuda-graph-impl");
  const std::string impl_name = impl ? First(*impl) : "none";
  if (impl_name != "none") {
    const Flag* scope = flags.Get("--cuda-graph-scope");
    std::vector<std::string> scopes = scope ? scope->values : std::vector<std::string>{};
    std::sort(scopes.begin(), scopes.end());
    if (impl_name != "transformer_engine" || scopes != std::vector<std::string>{"moe_preprocess", "moe_router"}) {
      FailConfiguration(fmt::format("--cuda-graph-impl {} --cuda-graph-scope {}: bmpipe costs CUDA graphs of the MoE "
                                    "router and the dispatch preprocessing only (--cuda-graph-impl transformer_engine "
                                    "--cuda-graph-scope moe_router moe_preprocess)",
                                    impl_name, scope ? fmt::format("{}", fmt::join(scope->values, " ")) : "(full)"));
    }
  }
  if (moe_flags || impl_name != "none") k["moe_cuda_graphs"] = impl_name != "none";

  for (const char* name : {"--num-layers", "--hidden-size", "--num-experts", "--moe-router-topk", "--moe-ffn-hidden-size"}) {
    if (const Flag* f = flags.Get(name)) out.model_shape.push_back({name, IntegerValue(*f, 1, std::int64_t{1} << 30)});
  }
  if (const Flag* mtp = flags.Get("--mtp-num-layers")) {
    out.notes.push_back(fmt::format("--mtp-num-layers {}: the model's multi-token-prediction modules come from "
                                    "--model (its config's num_nextn_predict_layers), not from this flag",
                                    First(*mtp)));
  }
  if (!defaults.empty()) {
    out.notes.push_back(fmt::format("Megatron's defaults for what the file leaves out: {}", fmt::join(defaults, "; ")));
  }
  // What is not read: the model's shape (--model gives it), cost-free flags, and the unknown.
  std::vector<std::string> unknown, free;
  for (std::size_t i = 0; i < flags.ignored.size(); ++i) {
    const std::string& word = flags.ignored[i];
    if (word.rfind("--", 0) != 0) continue;
    (CostFree(word.substr(0, word.find('='))) ? free : unknown).push_back(word.substr(0, word.find('=')));
  }
  if (!free.empty()) {
    out.notes.push_back(fmt::format("{} flags that change no cost bmpipe models (learning rate, data, logging, the "
                                    "model's shape, which --model gives)",
                                    free.size()));
  }
  if (!unknown.empty()) {
    out.notes.push_back(fmt::format("not read (unknown to bmpipe's Megatron reader; if one changes time or memory, "
                                    "give it as a bmpipe option): {}",
                                    ListedWords(unknown)));
  }
  return out;
}

Result<LauncherSetup> ReadMegatronSetup(const std::string& text, const std::string& source) {
  return ReadDocument<LauncherSetup>(source, [&] {
    LauncherSetup out = ReadMegatronSetupFlags(text);
    out.format = "Megatron-LM arguments";
    return out;
  });
}

}  // namespace bmpipe
