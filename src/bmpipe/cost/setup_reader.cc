#include "bmpipe/cost/setup_reader.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "bmpipe/core/units.h"
#include "bmpipe/problem/problem.h"
#include "bmpipe/problem/recompute.h"

namespace bmpipe {
namespace {

int ReadCount(const JsonCursor& c, const char* key, const char* what, int max, std::optional<int> default_value = {}) {
  if (default_value && !c.Has(key)) return *default_value;
  return static_cast<int>(c.Required(key, what).Integer(1, max, what));
}

bool ReadFlag(const JsonCursor& c, const char* key) {
  auto v = c.Optional(key);
  return v ? v->Bool() : false;
}

// A number within [lo, hi], or `default_value` when absent.
double ReadNumber(const JsonCursor& c, const char* key, double lo, double hi, double default_value) {
  auto v = c.Optional(key);
  if (!v) return default_value;
  const double x = v->Number();
  if (!(x >= lo && x <= hi)) v->Fail(fmt::format("must be between {:g} and {:g}", lo, hi));
  return x;
}

// A setup word read by `parse` (ParsePrecision, ...), or `default_value` when absent.
template <typename Enum>
Enum ReadWord(const JsonCursor& c, const char* key, Enum default_value, std::optional<Enum> (*parse)(std::string_view),
              const char* choices) {
  auto v = c.Optional(key);
  if (!v) return default_value;
  const std::optional<Enum> value = parse(v->String());
  if (!value) v->Fail(fmt::format("use {}", choices));
  return value.value_or(default_value);
}

}  // namespace

const std::vector<std::string>& SetupLayoutKeys() {
  static const std::vector<std::string> keys = {"tp",  "pp",  "dp",  "vpp", "cp", "ep", "etp", "mbs", "gbs", "seq",
                                                "sequence_parallel", "distributed_optimizer", "zero", "precision"};
  return keys;
}

const std::vector<std::string>& SetupSwitchKeys() {
  static const std::vector<std::string> keys = {
      "flash_attention", "fp8_params", "fp8_recipe", "no_fp8_transpose_cache", "grad_dtype", "optimizer_dtype", "tp_comm_overlap",
      "dp_overlap", "offload_optimizer", "offload_keeps_master", "moe_capacity_factor", "moe_imbalance", "moe_routing",
      "moe_dispatcher", "ep_comm_overlap", "moe_cuda_graphs"};
  return keys;
}

const std::vector<std::string>& SetupFieldKeys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> out = SetupLayoutKeys();
    out.insert(out.end(), SetupSwitchKeys().begin(), SetupSwitchKeys().end());
    return out;
  }();
  return keys;
}

void ReadSetupLayout(const JsonCursor& c, TrainingSetup& s) {
  s.tp = ReadCount(c, "tp", "the tensor-parallel size", kMaxTensorParallel);
  s.pp = ReadCount(c, "pp", "the pipeline-parallel size", kMaxRanks);
  s.dp = ReadCount(c, "dp", "the data-parallel size", kMaxDataParallel);
  s.vpp = ReadCount(c, "vpp", "model chunks per pipeline rank", kMaxStages, 1);
  s.cp = ReadCount(c, "cp", "the context-parallel size", kMaxTensorParallel, 1);
  s.ep = ReadCount(c, "ep", "the expert-parallel size", kMaxDataParallel, 1);
  if (c.Has("etp")) s.etp = ReadCount(c, "etp", "the expert tensor-parallel size", kMaxTensorParallel);
  s.micro_batch_size = ReadCount(c, "mbs", "the micro-batch size", kMaxBatch);
  s.global_batch_size = ReadCount(c, "gbs", "the global batch size", kMaxBatch);
  s.seq = ReadCount(c, "seq", "the sequence length", kMaxSequence);
  s.sequence_parallel = ReadFlag(c, "sequence_parallel");
  s.distributed_optimizer = ReadFlag(c, "distributed_optimizer");
  if (auto z = c.Optional("zero")) s.zero = static_cast<int>(z->Integer(0, 3, "the ZeRO stage"));
  s.precision = ReadWord(c, "precision", Precision::kBf16, ParsePrecision, "bf16, fp8, mxfp8 or nvfp4");
}

void ReadSetupSwitches(const JsonCursor& c, TrainingSetup& s) {
  s.flash_attention = ReadFlag(c, "flash_attention");
  s.fp8_params = ReadFlag(c, "fp8_params");
  if (auto r = c.Optional("fp8_recipe")) {
    s.fp8_recipe = r->String();
    if (s.fp8_recipe != "tensorwise" && s.fp8_recipe != "delayed" && s.fp8_recipe != "blockwise") {
      r->Fail("give tensorwise, delayed or blockwise (Megatron's --fp8-recipe; MXFP8 is precision mxfp8)");
    }
  }
  s.no_fp8_transpose_cache = ReadFlag(c, "no_fp8_transpose_cache");
  s.grad_dtype = ReadWord(c, "grad_dtype", StateDtype::kFp32, ParseStateDtype, "fp32 or bf16");
  s.optimizer_dtype = ReadWord(c, "optimizer_dtype", StateDtype::kFp32, ParseStateDtype, "fp32 or bf16");
  s.tp_comm_overlap = ReadNumber(c, "tp_comm_overlap", 0, 1, 0);
  s.dp_overlap = ReadNumber(c, "dp_overlap", 0, 1, 0);
  s.offload_optimizer = ReadFlag(c, "offload_optimizer");
  s.offload_keeps_master = ReadFlag(c, "offload_keeps_master");
  s.moe_capacity_factor = ReadNumber(c, "moe_capacity_factor", 0, 1e3, 0);
  // A run table's rows are force-balanced benchmarks unless they say otherwise (moe_routing
  // natural), so balanced is the default here, unlike the command line's natural.
  s.moe_routing = ReadWord(c, "moe_routing", MoeRouting::kBalanced, ParseMoeRouting, "natural or balanced");
  s.moe_imbalance = ReadNumber(c, "moe_imbalance", 1, 1e3, 0);
  s.moe_dispatcher = ReadWord(c, "moe_dispatcher", MoeDispatcher::kAllToAll, ParseMoeDispatcher, "alltoall or flex");
  s.ep_comm_overlap = ReadNumber(c, "ep_comm_overlap", 0, 1, 0);
  s.moe_cuda_graphs = ReadFlag(c, "moe_cuda_graphs");
}

void ReadSetupFields(const JsonCursor& c, TrainingSetup& s) {
  ReadSetupLayout(c, s);
  ReadSetupSwitches(c, s);
}

Status ApplyOffload(const std::vector<std::string>& what, TrainingSetup& s) {
  for (std::size_t i = 0; i < what.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (what[i] == what[j]) return InvalidInput(fmt::format("--offload names '{}' twice; give it once", what[i]));
    }
  }
  if (std::find(what.begin(), what.end(), "optimizer") != what.end() &&
      std::find(what.begin(), what.end(), "optimizer-moments") != what.end()) {
    return InvalidInput("--offload optimizer,optimizer-moments: the first moves the whole optimizer state to the host, "
                        "the second only Adam's moments; give one");
  }
  for (const std::string& w : what) {
    if (w == "optimizer") {
      s.offload_optimizer = true;
    } else if (w == "optimizer-moments") {
      s.offload_optimizer = s.offload_keeps_master = true;
    } else if (w == "activations") {
      std::vector<std::string> with = s.recompute;
      for (const std::string& option : s.recompute) {
        if (option == "full") continue;
        const std::string offloaded = option == "none" ? "offload" : option + "+offload";
        if (std::find(with.begin(), with.end(), offloaded) == with.end()) with.push_back(offloaded);
      }
      s.recompute = std::move(with);
    } else {
      return InvalidInput(fmt::format("offload '{}': use activations, optimizer or optimizer-moments", w));
    }
  }
  return {};
}

}  // namespace bmpipe
