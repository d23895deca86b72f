#include "bmpipe/cost/problem_builder.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "bmpipe/cost/layer_ops.h"
#include "bmpipe/schedule/schedule.h"

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

// Megatron orders ranks tensor-parallel first, then context-, data- and pipeline-parallel: a
// data-parallel group stays inside a node while tp x cp x dp devices fit in one, and pipeline
// neighbours are tp x cp x dp devices apart.
Links LinksOf(const DeviceSpec& d, const TrainingSetup& s) {
  const long span = static_cast<long>(s.tp) * s.cp * s.dp;
  const bool dp_inside = span <= d.devices_per_node;
  const bool pp_inside = span < d.devices_per_node;
  Links l;
  l.dp_bandwidth = (dp_inside ? d.intra_node_bandwidth_bytes_per_s : d.inter_node_bandwidth_bytes_per_s) * d.efficiency.link;
  l.pp_bandwidth = (pp_inside ? d.intra_node_bandwidth_bytes_per_s : d.inter_node_bandwidth_bytes_per_s) * d.efficiency.link;
  l.pp_latency = pp_inside ? d.intra_node_latency_s : d.inter_node_latency_s;
  return l;
}

// CPU Adam's rate per device for an offloaded optimizer step (an assumption, not calibrated:
// DeepSpeed's vectorized CPU Adam on the cores a node gives each of its devices).
constexpr double kHostAdamParametersPerSecond = 1e9;

// The setup's switches beyond the original ones, for the problem's name (empty by default).
std::string DescribeSetupExtras(const TrainingSetup& s) {
  std::string out;
  if (s.cp > 1) out += fmt::format(", cp {}", s.cp);
  if (s.ep > 1) out += fmt::format(", ep {}", s.ep);
  if (s.etp > 0 && s.etp != s.tp) out += fmt::format(", etp {}", s.etp);
  if (s.precision != Precision::kBf16) out += fmt::format(", {}", PrecisionName(s.precision));
  if (s.fp8_params) out += " weights";
  if (s.no_fp8_transpose_cache) out += ", no fp8 transpose cache";
  if (s.grad_dtype != StateDtype::kFp32) out += fmt::format(", {} gradients", StateDtypeName(s.grad_dtype));
  if (s.optimizer_dtype != StateDtype::kFp32) out += fmt::format(", {} optimizer moments", StateDtypeName(s.optimizer_dtype));
  if (s.zero > 1) out += fmt::format(", zero-{}", s.zero);
  if (s.offload_optimizer) out += s.offload_keeps_master ? ", optimizer moments offloaded" : ", optimizer offloaded";
  if (s.tp_comm_overlap > 0) out += fmt::format(", tp comm overlap {:g}", s.tp_comm_overlap);
  if (s.moe_dispatcher != MoeDispatcher::kAllToAll) out += fmt::format(", {} dispatcher", MoeDispatcherName(s.moe_dispatcher));
  if (s.ep_comm_overlap > 0) out += fmt::format(", ep comm overlap {:g}", s.ep_comm_overlap);
  if (s.moe_cuda_graphs) out += ", MoE CUDA graphs";
  return out;
}

double GradBytes(const TrainingSetup& s) { return s.grad_dtype == StateDtype::kBf16 ? 2 : 4; }

// Bytes of a parameter the data-parallel gathers move: 16-bit, or FP8 for the linear layers'
// weights kept in FP8 (--fp8-param-gather; ValidateSetup allows it only with FP8 GEMMs).
double GatheredBytes(const TrainingSetup& s, bool linear_layers) {
  return linear_layers && s.fp8_params ? QuantizedBytesPerElement(s.precision) : 2;
}

// A layer's parameters on one device, by the group whose ranks shard its training state: the
// dense ones over data x context parallelism, the routed experts' over expert data parallelism.
struct LayerParameters {
  double dense = 0, expert = 0;
  double total() const { return dense + expert; }
};

// Per micro-batch, the sharded-state collectives of a layer (ZeRO-2: reduce-scatter of its
// gradients after each backward; ZeRO-3: also an all-gather of its 16-bit parameters before the
// forward and again before the backward), the part not hidden behind compute.
struct ShardTraffic {
  double forward_s = 0, backward_s = 0;
};
ShardTraffic ShardTrafficOf(const LayerParameters& p, const TrainingSetup& s, const Links& links, bool linear_layers) {
  ShardTraffic t;
  const int zero = ZeroStage(s);
  if (zero < 2) return t;
  const double hidden = 1 - s.dp_overlap;
  const int dense_group = s.dp * s.cp, expert_group = ExpertDataParallel(s);
  // The layer's parameters (p: on one device before sharding) gathered from, or its gradients
  // reduce-scattered over, the group: a ring moves (n - 1)/n of the whole, as in UpdateSeconds.
  auto collective = [&](double bytes_per_parameter) {
    return AllGatherSeconds(bytes_per_parameter * p.dense, dense_group, links.dp_bandwidth, 0) +
           AllGatherSeconds(bytes_per_parameter * p.expert, expert_group, links.dp_bandwidth, 0);
  };
  t.backward_s = hidden * collective(GradBytes(s));
  if (zero == 3) {
    const double gathered = GatheredBytes(s, linear_layers);
    t.forward_s = hidden * collective(gathered);
    t.backward_s += hidden * collective(gathered);
  }
  return t;
}

// Once-per-iteration time of a layer's parameters on one device: the data-parallel gradient sync
// (with ZeRO-1 a reduce-scatter of gradients and an all-gather of 16-bit or FP8 parameters, else an
// all-reduce; ZeRO-2 and 3 sync per micro-batch instead, ShardTrafficOf) and the optimizer step.
// Gradient buckets hold many layers, so the sync is bandwidth-bound (no per-layer latency).
double UpdateSeconds(const LayerParameters& p, const DeviceSpec& d, const TrainingSetup& s, const Links& links,
                     bool linear_layers) {
  const int zero = ZeroStage(s);
  const double grad = GradBytes(s);
  double sync = 0;
  for (auto [parameters, group] : {std::pair{p.dense, s.dp * s.cp}, std::pair{p.expert, ExpertDataParallel(s)}}) {
    if (group <= 1 || parameters == 0) continue;
    if (zero == 0) sync += AllReduceSeconds(grad * parameters, group, links.dp_bandwidth, 0);
    if (zero == 1) {
      sync += AllGatherSeconds(grad * parameters, group, links.dp_bandwidth, 0) +
              AllGatherSeconds(GatheredBytes(s, linear_layers) * parameters, group, links.dp_bandwidth, 0);
    }
  }
  const double dense_updated = zero >= 1 ? p.dense / (s.dp * s.cp) : p.dense;
  const double expert_updated = zero >= 1 ? p.expert / ExpertDataParallel(s) : p.expert;
  const double updated = dense_updated + expert_updated;
  double step = updated * 30 / (d.memory_bandwidth_bytes_per_s * d.efficiency.memory);
  if (s.offload_optimizer) {
    // ZeRO-Offload: gradients to the host, the step on its CPU, 16-bit parameters back (the fp32
    // master weights when they stay on the device).
    step = updated * (grad + (s.offload_keeps_master ? 4 : 2)) / (d.host_bandwidth_bytes_per_s * d.efficiency.link) +
           updated / kHostAdamParametersPerSecond;
  }
  return (1 - s.dp_overlap) * sync + step;
}

// The host memory a layer's offloaded optimizer state takes on one device.
double HostStateBytes(const LayerParameters& p, const TrainingSetup& s) {
  return p.dense * HostBytesPerParameter(s, s.dp * s.cp) + p.expert * HostBytesPerParameter(s, ExpertDataParallel(s));
}

// A decoder layer kind and the graph its options were costed on.
struct LayerKind {
  Layer* layer;
  const LayerGraph* graph;
};

// Leaves out the offload options whose worst case could overflow `budget` bytes of host memory
// (problem_builder.h); an error when a layer kind keeps no option.
Status KeepOffloadWithinHost(const std::vector<LayerKind>& kinds, const ModelSpec& model, const DeviceSpec& d,
                             const TrainingSetup& s, Bytes reserved, double budget, std::vector<std::string>* notes) {
  const Pipeline pipeline = SetupPipeline(s);
  const long in_flight = std::min<long>(WarmupForwards(pipeline, 0) + 1, pipeline.micro_batches);
  // Every other stage holds at least one layer, and a rank's static memory fits the device.
  long layers = std::min<long>(model.layers, model.layers + 2L - (pipeline.stages() - pipeline.chunks));
  Bytes least_static = 0;
  for (const LayerKind& k : kinds) {
    if (least_static == 0 || k.layer->static_bytes < least_static) least_static = k.layer->static_bytes;
  }
  if (least_static > 0) layers = std::min<long>(layers, (d.memory_bytes - reserved) / least_static);
  if (s.offload_layers > 0) layers = std::min<long>(layers, s.offload_layers);
  layers = std::max<long>(layers, 1);
  for (const LayerKind& k : kinds) {
    std::vector<LayerOption> kept;
    std::string left_out;
    for (const LayerOption& option : k.layer->options) {
      // Only an offloading option keeps bytes on the host.
      const bool offloads = (ParseRecompute(option.name).value().parts & kOffloadActivations) != 0;
      const double host = offloads ? EvaluateOption(*k.graph, option.name).host_bytes : 0;
      const double worst = host * static_cast<double>(in_flight) * static_cast<double>(layers);
      if (host == 0 || worst <= budget) {
        kept.push_back(option);
        continue;
      }
      const std::string why = fmt::format(
          "option '{}' of the {} layers keeps {:.0f} bytes per micro-batch on the host; x {} micro-batches in flight "
          "on the first stage x {} such layers on one rank = {:.0f} bytes, beyond the {:.0f} bytes of host memory per "
          "device left ('{}' host_memory_bytes {}{})",
          option.name, k.layer->name, host, in_flight, layers, worst, budget, d.name, d.host_memory_bytes,
          s.offload_optimizer ? ", less the offloaded optimizer state" : "");
      if (notes) notes->push_back("not offered: " + why);
      left_out += (left_out.empty() ? "" : "; ") + why;
    }
    if (kept.empty()) {
      return InvalidInput(fmt::format("--recompute: no option of the {} layers fits host memory: {}; add an option that "
                                      "keeps activations on the device (e.g. full) or raise --pp",
                                      k.layer->name, left_out));
    }
    k.layer->options = std::move(kept);
  }
  return {};
}

Layer MakeLayer(const std::string& name, const LayerGraph& graph, const std::vector<std::string>& options,
                const LayerParameters& parameters, bool linear_layers, const DeviceSpec& d, const TrainingSetup& s,
                const Links& links, TimeNs p2p_ns, Converter& convert) {
  Layer layer;
  layer.name = name;
  double state = parameters.dense * BytesPerParameter(s, s.dp * s.cp) +
                 parameters.expert * BytesPerParameter(s, ExpertDataParallel(s));
  // Transformer Engine caches each FP8 weight and its transpose across micro-batches, beside the
  // 16-bit weight; weights kept in FP8 (--fp8-param-gather) replace the 16-bit copy and keep their
  // transpose: the 2 bytes a 16-bit weight takes. Without the transpose cache, a byte less.
  // An FP8 copy takes b bytes a parameter: 1, and MXFP8's scales (1 + 1/32).
  if (linear_layers && IsQuantized(s.precision)) {
    const double b = QuantizedBytesPerElement(s.precision);
    state += ((s.fp8_params ? 2 * b - 2 : 2 * b) - (s.no_fp8_transpose_cache ? b : 0)) * parameters.total();
  }
  layer.static_bytes = convert.RoundBytes(state, "the " + name + "'s static memory");
  layer.update_ns = convert.Ns(UpdateSeconds(parameters, d, s, links, linear_layers), "the " + name + "'s update time");
  layer.p2p_ns = p2p_ns;
  const WeightGradCost weight_grad = WeightGradOf(graph);
  layer.weight_grad_ns = convert.Ns(weight_grad.seconds, "the " + name + "'s weight-gradient time");
  layer.weight_grad_bytes = convert.RoundBytes(weight_grad.bytes, "the " + name + "'s weight-gradient inputs");
  const ShardTraffic shard = ShardTrafficOf(parameters, s, links, linear_layers);
  // ZeRO-3 holds the layer's gathered 16-bit parameters while it runs, and the next layer's
  // being prefetched.
  const double gathered = ZeroStage(s) == 3 ? 2 * GatheredBytes(s, linear_layers) * parameters.total() : 0;
  for (const std::string& option : options) {
    const OptionCost c = EvaluateOption(graph, option);
    const std::string of = fmt::format("the {}'s option '{}'", name, option);
    layer.options.push_back(LayerOption{option, convert.Ns(c.forward_s + shard.forward_s, of + " a forward time"),
                                        convert.Ns(c.backward_s + shard.backward_s, of + " a backward time"),
                                        convert.Ns(c.recompute_s, of + " a recompute time"),
                                        convert.RoundBytes(c.saved_bytes, of + " saved activations"),
                                        convert.RoundBytes(c.peak_extra_bytes + gathered, of + " transient memory"),
                                        convert.Ns(c.forward_comm_s, of + " a forward communication time"),
                                        convert.Ns(c.backward_comm_s, of + " a backward communication time")});
  }
  return layer;
}

}  // namespace

double ModelFlopsPerIteration(const ModelSpec& model, const DeviceSpec& device, const TrainingSetup& setup,
                              AttentionFlops attention) {
  TrainingSetup one = setup;
  one.tp = one.pp = one.dp = one.vpp = one.cp = one.ep = one.micro_batch_size = 1;
  one.etp = 0;
  one.sequence_parallel = false;
  one.precision = Precision::kBf16;
  one.moe_capacity_factor = 0;
  one.moe_imbalance = 1;
  // kFull: the unfused graph, the whole score square. kCausal: the fused kernel's forward, which
  // skips the masked blocks, and twice that for its backward (not the 2.5 x it runs, which
  // includes recomputing the scores).
  one.flash_attention = attention == AttentionFlops::kCausal;
  auto flops = [](const LayerGraph& graph) {
    double sum = 0;
    for (const LayerOp& op : graph.ops) {
      sum += op.kind == OpClass::kFusedAttention ? 3 * op.forward_flops : op.forward_flops + op.backward_flops;
    }
    return sum;
  };
  double per_sequence = flops(EmbeddingGraph(model, device, one)) + flops(HeadWithMtpGraph(model, device, one));
  // One graph per layer kind.
  std::map<DecoderKind, double> kind_flops;
  for (int i = 0; i < model.layers; ++i) {
    const DecoderKind kind = DecoderKindOf(model, i);
    auto it = kind_flops.find(kind);
    if (it == kind_flops.end()) it = kind_flops.emplace(kind, flops(DecoderLayerGraph(model, device, one, kind))).first;
    per_sequence += it->second;
  }
  return per_sequence * setup.global_batch_size;
}

double BytesPerParameter(const TrainingSetup& s, int shards) {
  const int zero = ZeroStage(s);
  const double weight = 2, grad = GradBytes(s);
  // fp32 master weights and Adam's two moments.
  const double optimizer = 4 + 2 * (s.optimizer_dtype == StateDtype::kBf16 ? 2 : 4);
  // Offloaded, the optimizer leaves nothing on the device, or the fp32 master weights.
  const double on_device = s.offload_optimizer ? (s.offload_keeps_master ? 4 : 0) : optimizer;
  return (zero >= 3 ? weight / shards : weight) + (zero >= 2 ? grad / shards : grad) +
         (zero >= 1 ? on_device / shards : on_device);
}

double BytesPerParameter(const TrainingSetup& s) { return BytesPerParameter(s, s.dp * s.cp); }

double HostBytesPerParameter(const TrainingSetup& s, int shards) {
  if (!s.offload_optimizer) return 0;
  const double state = 4 + 2 * (s.optimizer_dtype == StateDtype::kBf16 ? 2 : 4) + GradBytes(s);
  return ZeroStage(s) >= 1 ? state / shards : state;
}

Result<Problem> BuildProblem(const ModelSpec& model, const DeviceSpec& device, const TrainingSetup& setup,
                             std::vector<std::string>* notes) {
  Status valid = ValidateModel(model);
  if (!valid.ok()) return valid.error();
  valid = ValidateSetup(model, device, setup);
  if (!valid.ok()) return valid.error();

  Problem p;
  // A dropless MoE layer's load: what routing (or --moe-imbalance) gives the busiest rank.
  const std::string routed_load = model.moe.enabled() && setup.moe_capacity_factor == 0 && MoeImbalance(setup) != 1
                                 ? fmt::format(", routed load {:g} x even", MoeImbalance(setup))
                                 : "";
  p.name = fmt::format("{} on {}: tp {} pp {} dp {} vpp {}, micro-batch {} x {} tokens, global batch {}{}{}{}{}{}",
                       model.name, device.name, setup.tp, setup.pp, setup.dp, setup.vpp, setup.micro_batch_size,
                       setup.seq, setup.global_batch_size, setup.sequence_parallel ? ", sequence parallel" : "",
                       setup.flash_attention ? ", flash attention" : "",
                       setup.distributed_optimizer ? ", distributed optimizer" : "", DescribeSetupExtras(setup), routed_load);
  p.pipeline = SetupPipeline(setup);
  p.memory_bytes = device.memory_bytes - setup.headroom_bytes;  // the headroom stays free
  p.reserved_bytes = setup.reserved_bytes.value_or(ReservedBytesDefault(device));
  const Links links = LinksOf(device, setup);
  const double activation = static_cast<double>(setup.seq) * setup.micro_batch_size * model.hidden * 2 /
                            (setup.sequence_parallel ? setup.tp : 1) / setup.cp;
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

  p.layers.push_back(MakeLayer("embedding", EmbeddingGraph(model, device, setup), {"none"}, {embedding, 0}, false,
                               device, setup, links, p.p2p_ns, convert));
  // Each kind of decoder layer is costed once: its graph, its parameters on one device (the routed
  // experts split over ep x etp ranks; attention, mixers, router and shared experts over tp) and
  // its layer.
  struct KindCost {
    LayerGraph graph;
    LayerParameters parameters;
    Layer layer;
  };
  auto parameters_of = [&](const DecoderKind& kind) {
    const double all = static_cast<double>(DecoderLayerParameters(model, kind));
    if (kind.ffn != Ffn::kMoe) return LayerParameters{all / t, 0};
    const double routed = static_cast<double>(RoutedExpertParameters(model));
    return LayerParameters{(all - routed) / t, routed / (static_cast<double>(setup.ep) * ExpertTensorParallel(setup))};
  };
  std::map<DecoderKind, KindCost> kinds;
  for (int i = 0; i < model.layers; ++i) {
    const DecoderKind kind = DecoderKindOf(model, i);
    if (kinds.count(kind)) continue;
    KindCost& k = kinds[kind];
    k.graph = DecoderLayerGraph(model, device, setup, kind);
    k.parameters = parameters_of(kind);
    k.layer = MakeLayer(DecoderKindName(kind), k.graph, setup.recompute, k.parameters, true, device, setup, links,
                        p.p2p_ns, convert);
  }
  // The multi-token-prediction modules run in the head layer (HeadWithMtpGraph); their decoder
  // layers' parameters split as the model's do, and they need the embedding table on the last
  // pipeline rank (a copy when there are several ranks and the head is untied).
  LayerParameters head_parameters{head, 0};
  if (model.mtp_layers > 0) {
    const bool moe = model.moe.enabled();
    const DecoderKind block_kind{Mixer::kAttention, moe ? Ffn::kMoe : Ffn::kDense, false};
    const double decoder = static_cast<double>(DecoderLayerParameters(model, block_kind));
    const LayerParameters block = parameters_of(block_kind);
    const double own = (static_cast<double>(counts.mtp_layer) - decoder) / t;  // norms and projection
    head_parameters.dense += model.mtp_layers * (block.dense + own);
    head_parameters.expert += model.mtp_layers * block.expert;
    if (setup.pp > 1 && !model.tied_embeddings) head_parameters.dense += vocab * model.hidden / t;
  }
  if (convert.error()) return *convert.error();

  // Host memory (problem_builder.h): the optimizer state's least share per rank, then the
  // activation offload options whose worst case fits what it leaves.
  double optimizer_host = 0;
  if (setup.offload_optimizer) {
    const double ends[] = {HostStateBytes({embedding, 0}, setup), HostStateBytes(head_parameters, setup)};
    double total = ends[0] + ends[1], largest = std::max(ends[0], ends[1]);
    for (int i = 0; i < model.layers; ++i) {
      const double layer = HostStateBytes(kinds.at(DecoderKindOf(model, i)).parameters, setup);
      total += layer;
      largest = std::max(largest, layer);
    }
    optimizer_host = std::max(largest, total / setup.pp);
    if (optimizer_host > static_cast<double>(device.host_memory_bytes)) {
      return InvalidInput(fmt::format(
          "--offload optimizer keeps {:.0f} bytes of optimizer state and gradients on the host of each device at the "
          "least ({} over --pp {}: {:.0f} bytes in all, {:g} per parameter), but '{}' has {} bytes of host memory per "
          "device (host_memory_bytes); shard the state over more ranks (--zero 1 or more with a larger --dp), raise "
          "--pp, or keep the optimizer on the device",
          optimizer_host, largest > total / setup.pp ? "the largest layer's share" : "the whole model's share", setup.pp,
          total, HostBytesPerParameter(setup, setup.dp * setup.cp), device.name, device.host_memory_bytes));
    }
  }
  std::vector<LayerKind> used;
  for (auto& [kind, k] : kinds) used.push_back({&k.layer, &k.graph});
  if (Status host = KeepOffloadWithinHost(used, model, device, setup, p.reserved_bytes,
                                          static_cast<double>(device.host_memory_bytes) - optimizer_host, notes);
      !host.ok()) {
    return host.error();
  }
  for (int i = 0; i < model.layers; ++i) p.layers.push_back(kinds.at(DecoderKindOf(model, i)).layer);
  p.layers.push_back(MakeLayer("head", HeadWithMtpGraph(model, device, setup), {"none"}, head_parameters,
                               model.mtp_layers > 0, device, setup, links, p.p2p_ns, convert));
  if (convert.error()) return *convert.error();
  // Entries: runs of layers of one kind, as a problem file would list them with `repeat`.
  for (std::size_t i = 1; i < p.layers.size(); ++i) {
    p.layers[i].entry = p.layers[i - 1].entry + (p.layers[i].name == p.layers[i - 1].name ? 0 : 1);
  }
  p.training = SetupTrainingInfo(model, setup);
  Status problem_ok = ValidateProblem(p);
  if (!problem_ok.ok()) return problem_ok.error();
  return p;
}

}  // namespace bmpipe
