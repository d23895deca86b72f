#include "bmpipe/cost/problem_builder.h"

#include <cmath>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "bmpipe/cost/layer_ops.h"

namespace bmpipe {
namespace {

// Converts the cost model's seconds and bytes to the problem's integers. A value no input may give
// (a device file with a tiny peak, a sequence of millions of tokens) is kept as the first error, so
// that no conversion overflows and the message names what was out of range.
class Converter {
 public:
  TimeNs Ns(double seconds, std::string_view what) {
    if (std::optional<TimeNs> ns = CheckedNs(seconds)) return *ns;
    Remember(fmt::format("{} of {:.3g} s", what, seconds), fmt::format("{:g} s", kMaxInputSeconds));
    return 0;
  }
  Bytes RoundBytes(double bytes, std::string_view what) {
    if (std::optional<Bytes> b = CheckedBytes(bytes)) return *b;
    Remember(fmt::format("{} of {:.3g} bytes", what, bytes), fmt::format("{:g} bytes", kMaxInputBytes));
    return 0;
  }
  const std::optional<Error>& error() const { return error_; }

 private:
  void Remember(const std::string& value, const std::string& limit) {
    if (error_) return;
    error_ = InvalidInput(fmt::format("the cost model gives {}, beyond the {} a problem may hold; check the device's "
                                      "peak_flops, bandwidths and efficiencies, and --seq, --mbs and --tp",
                                      value, limit));
  }
  std::optional<Error> error_;
};

struct Links {
  double dp_bandwidth, pp_bandwidth, pp_latency;
};

// Megatron orders ranks tensor-parallel first, then data-parallel, then pipeline: a data-parallel
// group stays inside a node while tp x dp devices fit in one, and pipeline neighbours are tp x dp
// devices apart.
Links LinksOf(const DeviceSpec& d, const TrainingSetup& s) {
  const long span = static_cast<long>(s.tp) * s.dp;
  const bool dp_inside = span <= d.devices_per_node;
  const bool pp_inside = span < d.devices_per_node;
  Links l;
  l.dp_bandwidth = (dp_inside ? d.intra_node_bandwidth_bytes_per_s : d.inter_node_bandwidth_bytes_per_s) * d.efficiency.link;
  l.pp_bandwidth = (pp_inside ? d.intra_node_bandwidth_bytes_per_s : d.inter_node_bandwidth_bytes_per_s) * d.efficiency.link;
  l.pp_latency = pp_inside ? d.intra_node_latency_s : d.inter_node_latency_s;
  return l;
}

// Once-per-iteration time of `parameters` (on one device): gradient sync and optimizer step.
// Gradient buckets hold many layers, so the sync is bandwidth-bound (no per-layer latency).
double UpdateSeconds(double parameters, const DeviceSpec& d, const TrainingSetup& s, const Links& links) {
  double sync = 0;
  if (s.dp > 1) {
    sync = s.distributed_optimizer
               ? AllGatherSeconds(4 * parameters, s.dp, links.dp_bandwidth, 0) +
                     AllGatherSeconds(2 * parameters, s.dp, links.dp_bandwidth, 0)
               : AllReduceSeconds(4 * parameters, s.dp, links.dp_bandwidth, 0);
  }
  const double updated = s.distributed_optimizer ? parameters / s.dp : parameters;
  const double step = updated * 30 / (d.memory_bandwidth_bytes_per_s * d.efficiency.memory);
  return (1 - s.dp_overlap) * sync + step;
}

Layer MakeLayer(const std::string& name, const LayerGraph& graph, const std::vector<std::string>& options,
                double parameters, const DeviceSpec& d, const TrainingSetup& s, const Links& links, TimeNs p2p_ns,
                Converter& convert) {
  Layer layer;
  layer.name = name;
  layer.static_bytes = convert.RoundBytes(parameters * BytesPerParameter(s), "the " + name + "'s static memory");
  layer.update_ns = convert.Ns(UpdateSeconds(parameters, d, s, links), "the " + name + "'s update time");
  layer.p2p_ns = p2p_ns;
  for (const std::string& option : options) {
    const OptionCost c = EvaluateOption(graph, option);
    const std::string of = fmt::format("the {}'s option '{}'", name, option);
    layer.options.push_back(LayerOption{option, convert.Ns(c.forward_s, of + " a forward time"),
                                        convert.Ns(c.backward_s, of + " a backward time"),
                                        convert.Ns(c.recompute_s, of + " a recompute time"),
                                        convert.RoundBytes(c.saved_bytes, of + " saved activations"),
                                        convert.RoundBytes(c.peak_extra_bytes, of + " transient memory")});
  }
  return layer;
}

}  // namespace

double ModelFlopsPerIteration(const ModelSpec& model, const DeviceSpec& device, const TrainingSetup& setup) {
  TrainingSetup one = setup;
  one.tp = one.pp = one.dp = one.vpp = one.micro_batch_size = 1;
  one.sequence_parallel = false;
  one.flash_attention = false;  // the unfused graph: the full score square, not flash's causal half
  auto flops = [](const LayerGraph& graph) {
    double sum = 0;
    for (const LayerOp& op : graph.ops) sum += op.forward_flops + op.backward_flops;
    return sum;
  };
  double per_sequence = flops(EmbeddingGraph(model, device, one)) + flops(HeadGraph(model, device, one));
  const double dense = flops(DecoderLayerGraph(model, device, one, /*moe=*/false));
  const double moe = model.moe.enabled() ? flops(DecoderLayerGraph(model, device, one, /*moe=*/true)) : 0;
  for (int i = 0; i < model.layers; ++i) per_sequence += IsMoeLayer(model, i) ? moe : dense;
  return per_sequence * setup.global_batch_size;
}

double BytesPerParameter(const TrainingSetup& s) { return s.distributed_optimizer ? 6 + 12.0 / s.dp : 18; }

Result<Problem> BuildProblem(const ModelSpec& model, const DeviceSpec& device, const TrainingSetup& setup) {
  Status valid = ValidateModel(model);
  if (!valid.ok()) return valid.error();
  valid = ValidateSetup(model, device, setup);
  if (!valid.ok()) return valid.error();

  Problem p;
  p.name = fmt::format("{} on {}: tp {} pp {} dp {} vpp {}, micro-batch {} x {} tokens, global batch {}{}{}{}",
                       model.name, device.name, setup.tp, setup.pp, setup.dp, setup.vpp, setup.micro_batch_size,
                       setup.seq, setup.global_batch_size, setup.sequence_parallel ? ", sequence parallel" : "",
                       setup.flash_attention ? ", flash attention" : "",
                       setup.distributed_optimizer ? ", distributed optimizer" : "");
  p.pipeline = SetupPipeline(setup);
  p.memory_bytes = device.memory_bytes;
  p.reserved_bytes = setup.reserved_bytes.value_or(ReservedBytesDefault(device));
  const Links links = LinksOf(device, setup);
  const double activation = static_cast<double>(setup.seq) * setup.micro_batch_size * model.hidden * 2 /
                            (setup.sequence_parallel ? setup.tp : 1);
  Converter convert;
  p.p2p_ns = convert.Ns(links.pp_latency + activation / links.pp_bandwidth, "a p2p time");

  const ParameterCounts counts = CountParameters(model);
  const double vocab = PaddedVocab(model.vocab, setup.tp);
  const double t = setup.tp;
  const double norm = model.norm == NormKind::kLayerNorm ? 2.0 * model.hidden : model.hidden;
  // Vocabulary-parallel matrices are split over t; learned positions and norms are replicated.
  const double embedding = vocab * model.hidden / t + static_cast<double>(model.learned_positions) * model.hidden;
  // With a tied head and several pipeline ranks the last rank keeps its own copy (Megatron).
  const bool head_matrix = !model.tied_embeddings || setup.pp > 1;
  const double head = norm + (head_matrix ? vocab * model.hidden / t : 0);

  p.layers.push_back(MakeLayer("embedding", EmbeddingGraph(model, device, setup), {"none"}, embedding, device, setup,
                               links, p.p2p_ns, convert));
  const LayerGraph dense = DecoderLayerGraph(model, device, setup, /*moe=*/false);
  const Layer dense_layer = MakeLayer("decoder", dense, setup.recompute, static_cast<double>(counts.dense_layer) / t,
                                      device, setup, links, p.p2p_ns, convert);
  Layer moe_layer;
  if (model.moe.enabled()) {
    moe_layer = MakeLayer("decoder-moe", DecoderLayerGraph(model, device, setup, /*moe=*/true), setup.recompute,
                          static_cast<double>(counts.moe_layer) / t, device, setup, links, p.p2p_ns, convert);
  }
  if (convert.error()) return *convert.error();
  for (int i = 0; i < model.layers; ++i) p.layers.push_back(IsMoeLayer(model, i) ? moe_layer : dense_layer);
  p.layers.push_back(
      MakeLayer("head", HeadGraph(model, device, setup), {"none"}, head, device, setup, links, p.p2p_ns, convert));
  if (convert.error()) return *convert.error();
  // Entries: runs of layers of one kind, as a problem file would list them with `repeat`.
  for (std::size_t i = 1; i < p.layers.size(); ++i) {
    p.layers[i].entry = p.layers[i - 1].entry + (p.layers[i].name == p.layers[i - 1].name ? 0 : 1);
  }
  TrainingInfo training;
  training.model = model.name;
  training.tensor_parallel = setup.tp;
  training.data_parallel = setup.dp;
  training.micro_batch_size = setup.micro_batch_size;
  training.global_batch_size = setup.global_batch_size;
  training.seq_length = setup.seq;
  training.sequence_parallel = setup.sequence_parallel;
  training.distributed_optimizer = setup.distributed_optimizer;
  training.flash_attention = setup.flash_attention;
  training.overlap_grad_reduce = setup.dp_overlap > 0;
  p.training = training;
  Status problem_ok = ValidateProblem(p);
  if (!problem_ok.ok()) return problem_ok.error();
  return p;
}

}  // namespace bmpipe
