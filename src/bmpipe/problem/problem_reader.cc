#include "bmpipe/problem/problem_reader.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "bmpipe/core/json_cursor.h"
#include "bmpipe/problem/recompute.h"

namespace bmpipe {
namespace {

ScheduleKind ReadSchedule(const JsonCursor& c, int chunks) {
  const std::string name = c.String();
  const std::optional<ScheduleKind> kind = ScheduleFromName(name);
  if (!kind) c.Fail(fmt::format("unknown schedule; use one of {}", ScheduleNames()));
  // Megatron selects the interleaved order whenever there are several chunks per rank.
  if (*kind == ScheduleKind::kOneFOneB && chunks > 1) return ScheduleKind::kInterleavedOneFOneB;
  return *kind;
}

// A key under its name, or under the name older files give it, which is read the same with a
// note to rename it; a file that gives both must give one value.
std::optional<JsonCursor> Renamed(const JsonCursor& c, std::string_view name, std::string_view old,
                                  std::string_view what, std::vector<std::string>& notes) {
  std::optional<JsonCursor> now = c.Optional(name), before = c.Optional(old);
  if (now && before) {
    if (now->json() != before->json()) {
      before->Fail(fmt::format("is the old name of {}.{}, which says {}; give one of them", c.path(), name,
                               now->json().dump()));
    }
    return now;
  }
  if (before) {
    notes.push_back(fmt::format("{}.{} is the old name of {}.{} ({}); it is read as that, rename it", c.path(), old,
                                c.path(), name, what));
  }
  return before ? before : now;
}

Pipeline ReadPipeline(const JsonCursor& c, std::vector<std::string>& notes) {
  c.ExpectKeys({"ranks", "chunks", "stages", "virtual_stages", "micro_batches", "micro_batch_group", "schedule",
                "overlap"});
  Pipeline p;
  std::optional<JsonCursor> ranks =
      Renamed(c, "ranks", "stages", "the pipeline ranks; a stage is one model chunk of one rank", notes);
  const JsonCursor r = ranks ? *ranks : c.Required("ranks", "the pipeline-parallel size; older files call it stages");
  p.ranks = static_cast<int>(r.Integer(1, kMaxRanks, "give the pipeline-parallel size"));
  if (auto v = Renamed(c, "chunks", "virtual_stages", "model chunks per rank", notes)) {
    p.chunks = static_cast<int>(v->Integer(1, kMaxStages, "give the number of model chunks per rank (1 = no interleaving)"));
  }
  JsonCursor m = c.Required("micro_batches", "micro-batches per iteration");
  p.micro_batches = static_cast<int>(
      m.Integer(1, kMaxMicroBatches,
                "a pipeline needs at least 1 micro-batch; set it to global batch / (data-parallel size x micro-batch size)"));
  p.schedule = ReadSchedule(c.Required("schedule", ScheduleNames()), p.chunks);
  if (auto g = c.Optional("micro_batch_group")) {
    p.micro_batch_group = static_cast<int>(
        g->Integer(1, kMaxMicroBatches, "give the micro-batches each chunk runs in a row (interleaved 1F1B)"));
  }
  if (auto o = c.Optional("overlap")) p.overlap = o->Bool();
  return p;
}

LayerOption ReadOption(const JsonCursor& c) {
  c.ExpectKeys({"name", "forward_s", "backward_s", "recompute_s", "saved_bytes", "peak_extra_bytes", "forward_comm_s",
                "backward_comm_s"});
  LayerOption o;
  o.name = c.Required("name", "e.g. 'none', 'selective', 'full'").String();
  o.forward_ns = c.Required("forward_s", "forward time per micro-batch, seconds").Seconds();
  o.backward_ns = c.Required("backward_s", "backward time per micro-batch without recomputation, seconds").Seconds();
  if (auto r = c.Optional("recompute_s")) o.recompute_ns = r->Seconds();
  o.saved_bytes = c.Required("saved_bytes", "activation bytes kept from forward to backward per micro-batch").ByteCount();
  if (auto t = c.Optional("peak_extra_bytes")) o.peak_extra_bytes = t->ByteCount();
  if (auto f = c.Optional("forward_comm_s")) o.forward_comm_ns = f->Seconds();
  if (auto b = c.Optional("backward_comm_s")) o.backward_comm_ns = b->Seconds();
  return o;
}

// Reads one entry of `layers` and appends it `repeat` times.
void ReadLayerEntry(const JsonCursor& c, int entry, TimeNs default_p2p, std::vector<Layer>& layers) {
  c.ExpectKeys({"name", "repeat", "static_bytes", "update_s", "p2p_s", "weight_grad_s", "weight_grad_bytes", "options"});
  Layer layer;
  layer.entry = entry;
  layer.name = c.Required("name", "a label such as 'embedding' or 'decoder'").String();
  std::int64_t repeat = 1;
  if (auto r = c.Optional("repeat")) repeat = r->Integer(1, kMaxLayers, "give how many identical consecutive layers this entry stands for");
  layer.static_bytes = c.Required("static_bytes", "parameters + gradients + optimizer state bytes on one device").ByteCount();
  if (auto u = c.Optional("update_s")) layer.update_ns = u->Seconds();
  layer.p2p_ns = default_p2p;
  if (auto p = c.Optional("p2p_s")) layer.p2p_ns = p->Seconds();
  if (auto w = c.Optional("weight_grad_s")) layer.weight_grad_ns = w->Seconds();
  if (auto w = c.Optional("weight_grad_bytes")) layer.weight_grad_bytes = w->ByteCount();
  JsonCursor options = c.Required("options", "a list of recomputation options, at least one");
  std::vector<JsonCursor> elements = options.Elements();
  if (elements.size() > static_cast<std::size_t>(kMaxOptionsPerLayer)) {
    options.FailAt(fmt::format("{} options; bmpipe takes at most {} per layer", elements.size(), kMaxOptionsPerLayer));
  }
  for (std::size_t i = 0; i < elements.size(); ++i) {
    LayerOption o = ReadOption(elements[i]);
    for (std::size_t k = 0; k < layer.options.size(); ++k) {
      if (layer.options[k].name == o.name) {
        elements[i].Required("name", "").Fail(fmt::format(
            "duplicate option name (also {}[{}]); option names must be unique within a layer", options.path(), k));
      }
    }
    layer.options.push_back(std::move(o));
  }
  if (static_cast<std::int64_t>(layers.size()) + repeat > kMaxLayers) {
    c.FailAt(fmt::format("the model would have more than {} layers; check 'repeat'", kMaxLayers));
  }
  for (std::int64_t i = 0; i < repeat; ++i) layers.push_back(layer);
}

MoeInfo ReadMoe(const JsonCursor& c) {
  c.ExpectKeys({"experts", "top_k", "expert_ffn", "shared_expert_ffn", "dense_layers", "capacity_factor", "dispatcher",
                "comm_overlap", "cuda_graphs"});
  constexpr std::int64_t kMost = std::int64_t{1} << 24;
  MoeInfo moe;
  moe.experts = static_cast<int>(c.Required("experts", "routed experts per MoE layer").Integer(1, kMost, "give the routed experts"));
  JsonCursor top_k = c.Required("top_k", "experts per token");
  moe.top_k = static_cast<int>(top_k.Integer(1, moe.experts, "give at most the routed experts"));
  moe.expert_ffn = static_cast<int>(
      c.Required("expert_ffn", "intermediate size of one expert").Integer(1, kMost, "give the expert's intermediate size"));
  if (auto s = c.Optional("shared_expert_ffn")) {
    moe.shared_expert_ffn = static_cast<int>(s->Integer(0, kMost, "give the shared experts' intermediate size, or 0"));
  }
  if (auto dense = c.Optional("dense_layers")) {
    for (const JsonCursor& d : dense->Elements(true)) {
      const int layer = static_cast<int>(d.Integer(0, kMaxLayers - 1, "give a decoder layer index"));
      if (!moe.dense_layers.empty() && layer <= moe.dense_layers.back()) d.Fail("list the dense layers ascending, each once");
      moe.dense_layers.push_back(layer);
    }
  }
  if (auto f = c.Optional("capacity_factor")) {
    moe.capacity_factor = f->Number();
    if (!(moe.capacity_factor == 0 || (moe.capacity_factor >= 1 && moe.capacity_factor <= 64))) {
      f->Fail("must be 0 (dropless) or in [1, 64]");
    }
  }
  if (auto d = c.Optional("dispatcher")) {
    moe.dispatcher = d->String();
    if (moe.dispatcher != "alltoall" && moe.dispatcher != "flex") d->Fail("use alltoall or flex");
  }
  if (auto o = c.Optional("comm_overlap")) moe.comm_overlap = o->Bool();
  if (auto g = c.Optional("cuda_graphs")) moe.cuda_graphs = g->Bool();
  return moe;
}

// Far more parts than a model leaves out; bounds what a problem file can make every plan repeat.
constexpr std::size_t kMaxNotModeled = 256;

TrainingInfo ReadTraining(const JsonCursor& c) {
  c.ExpectKeys({"model", "tensor_parallel", "data_parallel", "micro_batch_size", "global_batch_size", "seq_length",
                "sequence_parallel", "distributed_optimizer", "flash_attention", "overlap_grad_reduce",
                "context_parallel", "expert_parallel", "expert_tensor_parallel", "zero_stage", "precision", "fp8_recipe", "grad_dtype",
                "optimizer_dtype", "tp_comm_overlap", "offload_optimizer", "offload_keeps_master", "fp8_params",
                "no_fp8_transpose_cache", "moe", "linear_mixers", "not_modeled", "mtp_layers", "offload_modules"});
  TrainingInfo t;
  constexpr std::int64_t kMost = std::int64_t{1} << 24;
  if (auto m = c.Optional("model")) t.model = m->String();
  auto size = [&](std::string_view key, int& value, std::string_view what) {
    if (auto v = c.Optional(key)) value = static_cast<int>(v->Integer(1, kMost, what));
  };
  size("tensor_parallel", t.tensor_parallel, "give the tensor-parallel size");
  size("data_parallel", t.data_parallel, "give the data-parallel size");
  size("micro_batch_size", t.micro_batch_size, "give the sequences per micro-batch");
  t.global_batch_size = static_cast<int>(
      c.Required("global_batch_size", "sequences per iteration").Integer(1, kMost, "give the sequences per iteration"));
  t.seq_length = static_cast<int>(
      c.Required("seq_length", "tokens per sequence").Integer(1, kMost, "give the sequence length in tokens"));
  auto flag = [&](std::string_view key, bool& value) {
    if (auto v = c.Optional(key)) value = v->Bool();
  };
  flag("sequence_parallel", t.sequence_parallel);
  flag("distributed_optimizer", t.distributed_optimizer);
  flag("flash_attention", t.flash_attention);
  flag("overlap_grad_reduce", t.overlap_grad_reduce);
  flag("tp_comm_overlap", t.tp_comm_overlap);
  flag("offload_optimizer", t.offload_optimizer);
  flag("offload_keeps_master", t.offload_keeps_master);
  flag("fp8_params", t.fp8_params);
  flag("no_fp8_transpose_cache", t.no_fp8_transpose_cache);
  size("context_parallel", t.context_parallel, "give the context-parallel size");
  size("expert_parallel", t.expert_parallel, "give the expert-parallel size");
  size("expert_tensor_parallel", t.expert_tensor_parallel, "give the expert tensor-parallel size");
  if (auto z = c.Optional("zero_stage")) t.zero_stage = static_cast<int>(z->Integer(0, 3, "give a ZeRO stage 0..3"));
  if (auto m = c.Optional("mtp_layers")) {
    t.mtp_layers = static_cast<int>(m->Integer(0, kMaxLayers, "give the multi-token-prediction modules the head runs"));
  }
  auto word = [&](std::string_view key, std::string& value, std::initializer_list<std::string_view> allowed) {
    auto v = c.Optional(key);
    if (!v) return;
    value = v->String();
    for (std::string_view a : allowed) {
      if (value == a) return;
    }
    v->Fail(fmt::format("must be one of {}", fmt::join(allowed, ", ")));
  };
  word("precision", t.precision, {"bf16", "fp8", "mxfp8", "nvfp4"});
  word("fp8_recipe", t.fp8_recipe, {"tensorwise", "delayed", "blockwise"});
  if (!t.fp8_recipe.empty() && t.precision != "fp8") {
    c.Required("fp8_recipe", "").Fail("applies to precision fp8 only (MXFP8 and NVFP4 name their own scaling)");
  }
  word("grad_dtype", t.grad_dtype, {"fp32", "bf16"});
  word("optimizer_dtype", t.optimizer_dtype, {"fp32", "bf16"});
  if (auto moe = c.Optional("moe")) t.moe = ReadMoe(*moe);
  if (auto mixers = c.Optional("linear_mixers")) {
    for (const JsonCursor& e : mixers->Elements()) {
      const std::string name = e.String();
      if (name != "mamba2" && name != "gated_deltanet") e.Fail("must be mamba2 or gated_deltanet");
      if (std::find(t.linear_mixers.begin(), t.linear_mixers.end(), name) != t.linear_mixers.end()) {
        e.Fail("is listed twice; give each mixer once");
      }
      t.linear_mixers.push_back(name);
    }
  }
  if (auto modules = c.Optional("offload_modules")) {
    for (const JsonCursor& e : modules->Elements()) {
      const std::string name = e.String();
      if (std::find(std::begin(kOffloadModules), std::end(kOffloadModules), name) == std::end(kOffloadModules)) {
        e.Fail(fmt::format("must be one of {}", fmt::join(kOffloadModules, ", ")));
      }
      if (std::find(t.offload_modules.begin(), t.offload_modules.end(), name) != t.offload_modules.end()) {
        e.Fail("is listed twice; give each module once");
      }
      t.offload_modules.push_back(name);
    }
  }
  if (auto notes = c.Optional("not_modeled")) {
    const std::vector<JsonCursor> entries = notes->Elements(/*allow_empty=*/true);
    if (entries.size() > kMaxNotModeled) {
      notes->FailAt(fmt::format("has {} entries, more than {}; give a sentence for each part the costs leave out",
                                entries.size(), kMaxNotModeled));
    }
    for (const JsonCursor& e : entries) t.not_modeled.push_back(e.String());
  }
  return t;
}

Problem ReadProblemTree(const Json& doc, std::vector<std::string>& notes) {
  JsonCursor root(doc, "");
  root.ExpectKeys({"name", "description", "pipeline", "device", "p2p_s", "layers", "training"});
  Problem problem;
  if (auto n = root.Optional("name")) problem.name = n->String();
  if (auto d = root.Optional("description")) d->String();
  problem.pipeline = ReadPipeline(root.Required("pipeline", "ranks, micro_batches and schedule"), notes);

  JsonCursor device = root.Required("device", "memory_bytes and reserved_bytes");
  device.ExpectKeys({"name", "memory_bytes", "reserved_bytes"});
  if (auto n = device.Optional("name")) n->String();
  JsonCursor memory = device.Required("memory_bytes", "device memory capacity in bytes");
  problem.memory_bytes = memory.ByteCount();
  if (problem.memory_bytes == 0) memory.Fail("the device needs some memory; give its capacity in bytes");
  if (auto r = device.Optional("reserved_bytes")) problem.reserved_bytes = r->ByteCount();
  if (problem.reserved_bytes >= problem.memory_bytes) {
    device.FailAt(fmt::format("reserved_bytes = {} leaves no memory of memory_bytes = {}; lower reserved_bytes",
                              problem.reserved_bytes, problem.memory_bytes));
  }

  problem.p2p_ns = root.Required("p2p_s", "time to send one stage's output to the next rank, seconds (0 if unknown)").Seconds();
  JsonCursor layers = root.Required("layers", "the model's layers in order");
  std::vector<JsonCursor> entries = layers.Elements();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    ReadLayerEntry(entries[i], static_cast<int>(i), problem.p2p_ns, problem.layers);
  }
  if (auto t = root.Optional("training")) problem.training = ReadTraining(*t);
  Status status = ValidateProblem(problem);
  if (!status.ok()) throw internal::CursorFailure{status.error().message};
  return problem;
}

}  // namespace

Result<Problem> ReadProblem(const Json& doc, const std::string& source, std::vector<std::string>* notes) {
  std::vector<std::string> read;
  Result<Problem> problem = ReadDocument<Problem>(source, [&] { return ReadProblemTree(doc, read); });
  // Also when the problem is refused: its message names the keys by their new names.
  if (notes != nullptr) {
    for (const std::string& n : read) notes->push_back(fmt::format("{}: {}", source, n));
  }
  return problem;
}

Result<Problem> LoadProblem(const std::string& path, std::vector<std::string>* notes) {
  Result<Json> doc = LoadDocument(path);
  if (!doc.ok()) return doc.error();
  return ReadProblem(doc.value(), path, notes);
}

}  // namespace bmpipe
