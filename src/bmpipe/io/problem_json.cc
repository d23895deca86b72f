#include "bmpipe/io/problem_json.h"
#include "bmpipe/core/document.h"

namespace bmpipe {
namespace {

double Seconds(TimeNs t) { return ToSeconds(t); }

}  // namespace

Json ProblemToJson(const Problem& problem, const std::string& description) {
  Json out = Json::object();
  if (!problem.name.empty()) out["name"] = problem.name;
  if (!description.empty()) out["description"] = description;
  const Pipeline& p = problem.pipeline;
  // `stages` and `virtual_stages`, the old names of `ranks` and `chunks`, for tools that read them
  // (the reader takes both when they agree).
  out["pipeline"] = {{"ranks", p.ranks},
                     {"chunks", p.chunks},
                     {"micro_batches", p.micro_batches},
                     {"schedule", std::string(ScheduleName(p.schedule))},
                     {"stages", p.ranks},
                     {"virtual_stages", p.chunks}};
  if (p.micro_batch_group != 0) out["pipeline"]["micro_batch_group"] = p.micro_batch_group;
  if (p.overlap) out["pipeline"]["overlap"] = true;
  out["device"] = {{"memory_bytes", problem.memory_bytes}, {"reserved_bytes", problem.reserved_bytes}};
  out["p2p_s"] = Seconds(problem.p2p_ns);
  Json layers = Json::array();
  for (std::size_t i = 0; i < problem.layers.size();) {
    std::size_t j = i + 1;
    while (j < problem.layers.size() && problem.layers[i].name == problem.layers[j].name && SameCosts(problem.layers[i], problem.layers[j])) ++j;
    const Layer& l = problem.layers[i];
    Json entry = Json::object();
    entry["name"] = l.name;
    if (j - i > 1) entry["repeat"] = j - i;
    entry["static_bytes"] = l.static_bytes;
    if (l.update_ns != 0) entry["update_s"] = Seconds(l.update_ns);
    if (l.p2p_ns != problem.p2p_ns) entry["p2p_s"] = Seconds(l.p2p_ns);
    if (l.weight_grad_ns != 0) entry["weight_grad_s"] = Seconds(l.weight_grad_ns);
    if (l.weight_grad_bytes != 0) entry["weight_grad_bytes"] = l.weight_grad_bytes;
    Json options = Json::array();
    for (const LayerOption& o : l.options) {
      Json option = {{"name", o.name},
                     {"forward_s", Seconds(o.forward_ns)},
                     {"backward_s", Seconds(o.backward_ns)},
                     {"recompute_s", Seconds(o.recompute_ns)},
                     {"saved_bytes", o.saved_bytes},
                     {"peak_extra_bytes", o.peak_extra_bytes}};
      if (o.forward_comm_ns != 0) option["forward_comm_s"] = Seconds(o.forward_comm_ns);
      if (o.backward_comm_ns != 0) option["backward_comm_s"] = Seconds(o.backward_comm_ns);
      options.push_back(std::move(option));
    }
    entry["options"] = std::move(options);
    layers.push_back(std::move(entry));
    i = j;
  }
  out["layers"] = std::move(layers);
  if (const std::optional<TrainingInfo>& t = problem.training) {
    Json training = Json::object();
    if (!t->model.empty()) training["model"] = t->model;
    training["tensor_parallel"] = t->tensor_parallel;
    training["data_parallel"] = t->data_parallel;
    training["micro_batch_size"] = t->micro_batch_size;
    training["global_batch_size"] = t->global_batch_size;
    training["seq_length"] = t->seq_length;
    training["sequence_parallel"] = t->sequence_parallel;
    training["distributed_optimizer"] = t->distributed_optimizer;
    training["flash_attention"] = t->flash_attention;
    training["overlap_grad_reduce"] = t->overlap_grad_reduce;
    if (t->context_parallel != 1) training["context_parallel"] = t->context_parallel;
    if (t->expert_parallel != 1) training["expert_parallel"] = t->expert_parallel;
    if (t->expert_tensor_parallel != 0) training["expert_tensor_parallel"] = t->expert_tensor_parallel;
    if (t->zero_stage >= 2) training["zero_stage"] = t->zero_stage;
    if (t->precision != "bf16") training["precision"] = t->precision;
    if (!t->fp8_recipe.empty()) training["fp8_recipe"] = t->fp8_recipe;
    if (t->mtp_layers > 0) training["mtp_layers"] = t->mtp_layers;
    if (t->fp8_params) training["fp8_params"] = true;
    if (t->no_fp8_transpose_cache) training["no_fp8_transpose_cache"] = true;
    if (t->grad_dtype != "fp32") training["grad_dtype"] = t->grad_dtype;
    if (t->optimizer_dtype != "fp32") training["optimizer_dtype"] = t->optimizer_dtype;
    if (t->tp_comm_overlap) training["tp_comm_overlap"] = true;
    if (t->offload_optimizer) training["offload_optimizer"] = true;
    if (t->offload_keeps_master) training["offload_keeps_master"] = true;
    if (t->moe.enabled()) {
      Json moe = Json::object();
      moe["experts"] = t->moe.experts;
      moe["top_k"] = t->moe.top_k;
      moe["expert_ffn"] = t->moe.expert_ffn;
      if (t->moe.shared_expert_ffn > 0) moe["shared_expert_ffn"] = t->moe.shared_expert_ffn;
      if (!t->moe.dense_layers.empty()) moe["dense_layers"] = t->moe.dense_layers;
      if (t->moe.capacity_factor > 0) moe["capacity_factor"] = t->moe.capacity_factor;
      if (t->moe.dispatcher != "alltoall") moe["dispatcher"] = t->moe.dispatcher;
      if (t->moe.comm_overlap) moe["comm_overlap"] = true;
      if (t->moe.cuda_graphs) moe["cuda_graphs"] = true;
      training["moe"] = std::move(moe);
    }
    if (!t->linear_mixers.empty()) training["linear_mixers"] = t->linear_mixers;
    if (!t->offload_modules.empty()) training["offload_modules"] = t->offload_modules;
    if (!t->not_modeled.empty()) training["not_modeled"] = t->not_modeled;
    out["training"] = std::move(training);
  }
  return out;
}

std::string ProblemJsonText(const Problem& problem, const std::string& description) {
  return DumpJson(ProblemToJson(problem, description), 2) + "\n";
}

}  // namespace bmpipe
