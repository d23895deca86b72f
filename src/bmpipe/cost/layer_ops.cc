#include "bmpipe/cost/layer_ops.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "bmpipe/core/json_cursor.h"

namespace bmpipe {
namespace {

constexpr double kActivationBytes = 2;  // 16-bit activations
constexpr double kMaskBytes = 1;        // dropout masks

// A group of `size` consecutive-in-rank-order devices, `stride` ranks apart, and the link it uses:
// NVLink while the whole group lies inside one node, the network otherwise.
struct GroupLink {
  double bandwidth = 0, latency = 0;  // the slower link's; bandwidth with the link efficiency
  double intra_bandwidth = 0, inter_bandwidth = 0;
  int size = 1, per_node = 1;  // members, and members sharing a node
  GroupLink(const DeviceSpec& d, int size_, int stride) : size(size_) {
    const long span = static_cast<long>(size_) * stride;
    per_node = span <= d.devices_per_node ? size_ : std::max(1, d.devices_per_node / std::max(1, stride));
    intra_bandwidth = d.intra_node_bandwidth_bytes_per_s * d.efficiency.link;
    inter_bandwidth = d.inter_node_bandwidth_bytes_per_s * d.efficiency.link;
    const bool inside = per_node >= size_;
    bandwidth = inside ? intra_bandwidth : inter_bandwidth;
    latency = inside ? d.intra_node_latency_s : d.inter_node_latency_s;
  }
  // An all-to-all in which every member sends `bytes` spread evenly over the group (its own share
  // stays): the parts to the node's other members and to other nodes move at once, each on its link.
  double AllToAll(double bytes) const {
    if (size <= 1) return 0;
    const double intra = bytes * (per_node - 1) / size / intra_bandwidth;
    const double inter = bytes * (size - per_node) / size / inter_bandwidth;
    return std::max(intra, inter) + latency;
  }
  // The flex dispatcher's exchange of `bytes` of routed copies, k a token, its experts spread
  // evenly over the members: each token crosses the network once to every other node holding one
  // of its k experts (of `experts`, chosen uniformly: a node misses with probability
  // C(E - E/n, k) / C(E, k)), then reaches each expert's member over the node's links, where every
  // copy not for the member it arrived at moves once.
  double FlexDispatch(double bytes, double k, double experts) const {
    if (size <= 1) return 0;
    const int nodes = (size + per_node - 1) / per_node;
    double miss = 1;
    for (int i = 0; i < static_cast<int>(k); ++i) miss *= std::max(0.0, (experts - experts / nodes - i) / (experts - i));
    const double remote_nodes = (nodes - 1) * (1 - miss);
    const double intra = bytes * (per_node - 1) / per_node / intra_bandwidth;
    const double inter = nodes > 1 ? bytes / k * remote_nodes / inter_bandwidth : 0;
    return std::max(intra, inter) + latency;
  }
};

// A collective around an op: the part it waits for, and the part that runs beside its compute.
struct Comm {
  double exposed = 0, hidden = 0;
  Comm operator+(const Comm& o) const { return {exposed + o.exposed, hidden + o.hidden}; }
};

// Sizes every op of a layer shares.
struct Shape {
  const ModelSpec& model;
  const DeviceSpec& device;
  const TrainingSetup& setup;
  double tokens;     // T = s x b / cp: this rank's share of the micro-batch's tokens
  double seq;        // s: the keys a query may attend to before masking (the whole sequence)
  int t;             // tensor-parallel size
  double sp;         // t with sequence parallelism, else 1: the division of the non-TP regions
  double exposed;    // 1 - tp_comm_overlap: the part of a tensor-parallel collective not overlapped
  bool fp8;          // linear layers run FP8 GEMMs
  GroupLink tp, cp, ep, etp;

  Shape(const ModelSpec& m, const DeviceSpec& d, const TrainingSetup& s)
      : model(m), device(d), setup(s), tokens(static_cast<double>(s.seq) * s.micro_batch_size / s.cp), seq(s.seq),
        t(s.tp), sp(s.sequence_parallel ? s.tp : 1), exposed(1 - s.tp_comm_overlap),
        fp8(IsQuantized(s.precision)), tp(d, s.tp, 1), cp(d, s.cp, s.tp),
        ep(d, s.ep, ExpertTensorParallel(s)), etp(d, ExpertTensorParallel(s), 1) {}
  // A full activation of width `width` (T x width x 2 bytes): in the tensor-parallel region when
  // `sharded`, otherwise in the sequence-parallel one.
  double Activation(double width, bool sharded) const {
    return tokens * width * kActivationBytes / (sharded ? t : sp);
  }
  // The collectives that enter and leave a tensor-parallel region, on a T x h activation: an
  // all-gather in and a reduce-scatter out with sequence parallelism, else nothing in and an
  // all-reduce out. Forward enters at a column-parallel GEMM and leaves at a row-parallel one; the
  // backward runs the opposite collectives. With tensor-parallel overlap a fraction of each runs
  // beside the GEMM it feeds or drains (Transformer Engine's userbuffers split the GEMM into
  // chunks and pipeline the exchange with them): it costs time only where it outlasts that GEMM.
  Comm Enter() const {
    if (t == 1 || !setup.sequence_parallel) return {};
    return Overlapped(AllGatherSeconds(tokens * model.hidden * kActivationBytes, t, tp.bandwidth, tp.latency));
  }
  Comm Leave() const {
    if (t == 1) return {};
    const double bytes = tokens * model.hidden * kActivationBytes;
    // A reduce-scatter costs what an all-gather does.
    return Overlapped(setup.sequence_parallel ? AllGatherSeconds(bytes, t, tp.bandwidth, tp.latency)
                                              : AllReduceSeconds(bytes, t, tp.bandwidth, tp.latency));
  }
  Comm Overlapped(double seconds) const { return {exposed * seconds, (1 - exposed) * seconds}; }
};

class GraphBuilder {
 public:
  GraphBuilder(const Shape& shape, std::string name) : shape_(shape) { graph_.name = std::move(name); }

  int Input(const std::string& name, double bytes) { return AddTensor(name, bytes, -1); }

  // Adds an op; `outputs` are (name, bytes) of new tensors; returns the op's index.
  struct Out {
    std::string name;
    double bytes;
  };
  int Op(const std::string& name, OpClass kind, std::vector<std::string> groups, std::vector<int> inputs,
         const std::vector<Out>& outputs, std::vector<int> saved) {
    LayerOp op;
    op.name = name;
    op.kind = kind;
    op.groups = std::move(groups);
    op.inputs = std::move(inputs);
    op.saved = std::move(saved);
    const int index = static_cast<int>(graph_.ops.size());
    for (const Out& o : outputs) op.outputs.push_back(AddTensor(o.name, o.bytes, index));
    graph_.ops.push_back(std::move(op));
    return index;
  }
  LayerOp& op(int i) { return graph_.ops[i]; }
  int ops() const { return static_cast<int>(graph_.ops.size()); }
  // The collectives op `i` runs around its forward and its backward.
  void Collectives(int i, Comm forward, Comm backward) {
    LayerOp& o = graph_.ops[i];
    o.forward_comm_s += forward.exposed;
    o.hidden_forward_comm_s += forward.hidden;
    o.backward_comm_s += backward.exposed;
    o.hidden_backward_comm_s += backward.hidden;
  }
  int output(int op_index, int k = 0) const { return graph_.ops[op_index].outputs[k]; }
  double bytes(int tensor) const { return graph_.tensors[tensor].bytes; }

  // A GEMM: FLOPs forward, twice that backward (input and weight gradients); traffic: inputs,
  // outputs and `weight_bytes` once per pass.
  int Gemm(const std::string& name, std::vector<std::string> groups, std::vector<int> inputs, const std::vector<Out>& outputs,
           std::vector<int> saved, double flops, double weight_bytes) {
    const int i = Op(name, OpClass::kGemm, std::move(groups), inputs, outputs, std::move(saved));
    double traffic = weight_bytes;
    for (int in : graph_.ops[i].inputs) traffic += bytes(in);
    for (int out : graph_.ops[i].outputs) traffic += bytes(out);
    LayerOp& op = graph_.ops[i];
    op.forward_flops = flops;
    op.backward_flops = 2 * flops;
    op.forward_bytes = traffic;
    op.backward_bytes = 2 * traffic;
    op.weight_bytes = weight_bytes;
    return i;
  }
  // An elementwise (memory-bound) op: forward reads its inputs and writes its outputs; backward
  // moves `backward_factor` times that.
  int Elementwise(const std::string& name, std::vector<std::string> groups, std::vector<int> inputs,
                  const std::vector<Out>& outputs, std::vector<int> saved, double backward_factor = 1.5) {
    const int i = Op(name, OpClass::kElementwise, std::move(groups), inputs, outputs, std::move(saved));
    double traffic = 0;
    for (int in : graph_.ops[i].inputs) traffic += bytes(in);
    for (int out : graph_.ops[i].outputs) traffic += bytes(out);
    graph_.ops[i].forward_bytes = traffic;
    graph_.ops[i].backward_bytes = backward_factor * traffic;
    return i;
  }

  // A linear layer's GEMM: FP8 when the setup runs FP8.
  int Linear(const std::string& name, std::vector<std::string> groups, std::vector<int> inputs,
             const std::vector<Out>& outputs, std::vector<int> saved, double flops, double weight_bytes) {
    const int i = Gemm(name, std::move(groups), std::move(inputs), outputs, std::move(saved), flops, weight_bytes);
    graph_.ops[i].fp8 = shape_.fp8;
    // Without the transpose cache the backward transposes the FP8 weight again: a byte read and a
    // byte written per element, the 16-bit weight's bytes.
    if (shape_.fp8 && shape_.setup.no_fp8_transpose_cache) graph_.ops[i].backward_bytes += weight_bytes;
    return i;
  }

  LayerGraph Finish() {
    const DeviceSpec& d = shape_.device;
    const double bytes_per_s = d.memory_bandwidth_bytes_per_s * d.efficiency.memory;
    double compute = 0, overlapped = 0;  // the layer's, both passes
    for (LayerOp& op : graph_.ops) {
      const double efficiency = op.kind == OpClass::kFusedAttention ? d.efficiency.attention : d.efficiency.gemm;
      const double quantized = IsFp4(shape_.setup.precision) ? d.peak_fp4_flops * d.efficiency.fp4_gemm
                                                             : d.peak_fp8_flops * d.efficiency.fp8_gemm;
      const double flops_per_s = op.fp8 ? quantized : d.peak_flops * efficiency;
      const double forward = std::max(op.forward_flops / flops_per_s, op.forward_bytes / bytes_per_s);
      const double backward = std::max(op.backward_flops / flops_per_s, op.backward_bytes / bytes_per_s);
      op.forward_s = std::max(forward, op.hidden_forward_comm_s) + op.forward_comm_s;
      op.backward_s = std::max(backward, op.hidden_backward_comm_s) + op.backward_comm_s;
      if (op.kind == OpClass::kGemm && op.weight_bytes > 0) op.weight_grad_s = backward / 2;
      compute += forward + backward;
      overlapped += op.overlapped_forward_comm_s + op.overlapped_backward_comm_s;
    }
    // The overlapped collectives of one micro-batch run beside another's compute of the layer
    // (its forward beside the other's backward and the other way round): what outlasts the
    // layer's compute is waited for, by each op in proportion to its share.
    if (overlapped > compute) {
      const double waited = (overlapped - compute) / overlapped;
      for (LayerOp& op : graph_.ops) {
        op.forward_s += waited * op.overlapped_forward_comm_s;
        op.backward_s += waited * op.overlapped_backward_comm_s;
      }
    }
    // A quantized GEMM keeps its input for the backward quantized (Transformer Engine; NVFP4 its
    // column-wise FP4 copy): a tensor that only such GEMMs save takes the format's bytes.
    std::vector<int> savers(graph_.tensors.size(), 0), fp8_savers(graph_.tensors.size(), 0);
    for (const LayerOp& op : graph_.ops) {
      for (int t : op.saved) {
        ++savers[t];
        if (op.fp8) ++fp8_savers[t];
      }
    }
    for (std::size_t t = 0; t < graph_.tensors.size(); ++t) {
      OpTensor& tensor = graph_.tensors[t];
      tensor.saved_bytes = savers[t] > 0 && savers[t] == fp8_savers[t]
                               ? tensor.bytes / 2 * QuantizedBytesPerElement(shape_.setup.precision)
                               : tensor.bytes;
    }
    if (shape_.device.host_bandwidth_bytes_per_s > 0) {
      graph_.host_bandwidth_bytes_per_s = shape_.device.host_bandwidth_bytes_per_s * d.efficiency.link;
    }
    graph_.offload_modules = shape_.setup.offload_modules;
    return std::move(graph_);
  }

 private:
  int AddTensor(const std::string& name, double bytes, int producer) {
    graph_.tensors.push_back({name, bytes, bytes, producer});
    return static_cast<int>(graph_.tensors.size()) - 1;
  }
  const Shape& shape_;
  LayerGraph graph_;
};

using Groups = std::vector<std::string>;

// Dropout (GPT-style models): saves a 1-byte mask; returns the tensor after it.
int Dropout(GraphBuilder& g, const std::string& name, const Groups& groups, int in, double elements) {
  const int op = g.Op(name, OpClass::kElementwise, groups, {in},
                      {{name + ".out", elements * kActivationBytes}, {name + ".mask", elements * kMaskBytes}}, {});
  g.op(op).saved = {g.output(op, 1)};
  g.op(op).forward_bytes = g.bytes(in) + elements * (kActivationBytes + kMaskBytes);
  g.op(op).backward_bytes = g.op(op).forward_bytes;
  return g.output(op, 0);
}

// The norm of a residual stream: saves its input.
int Norm(GraphBuilder& g, const Shape& s, const std::string& name, const Groups& groups, int in) {
  const int op = g.Elementwise(name, groups, {in}, {{name + ".out", s.Activation(s.model.hidden, false)}}, {in}, 1.5);
  return g.output(op);
}

// The keys a query of a layer attends to, by the layer's mask: every earlier key; the `span`
// latest (a sliding window; DeepSeek's sparse attention, whose query attends to the `span` keys
// its indexer selects, has the same count); or those of its own chunk of `span` tokens (Llama 4).
struct KeyMask {
  enum Kind { kCausal, kWindow, kChunk } kind = kCausal;
  double span = 0;
  // Keys the first n queries of the sequence see together: query i sees min(i, w) keys in a
  // window, (i mod c) in a chunk, i without either; n^2/2 while n is within the span.
  double KeysBefore(double n) const {
    if (kind == kWindow && n > span) return span * span / 2 + (n - span) * span;
    if (kind == kChunk && n > span) {
      const double whole = std::floor(n / span);
      const double rest = n - whole * span;
      return whole * span * span / 2 + rest * rest / 2;
    }
    return n * n / 2;
  }
};

// The mask of a decoder layer's attention: the model's local mask on its local layers, DeepSeek's
// sparse selection on every layer of a model that has it, else causal.
KeyMask MaskOf(const ModelSpec& m, bool local) {
  if (local) {
    return {m.local_attention == LocalAttention::kChunked ? KeyMask::kChunk : KeyMask::kWindow,
            static_cast<double>(m.sliding_window)};
  }
  if (m.sparse.enabled()) return {KeyMask::kWindow, static_cast<double>(m.sparse.topk)};
  return {};
}

// Keys per query before the causal mask: the whole sequence, or within the span (a banded or
// block-diagonal kernel computes only its blocks).
double KeysPerQuery(const Shape& s, const KeyMask& mask) {
  return mask.kind == KeyMask::kCausal ? s.seq : std::min(s.seq, mask.span);
}

// Keys per query a causal kernel computes on the busiest context-parallel rank, averaged over its
// queries: K(n) is KeyMask::KeysBefore. Megatron splits the sequence into 2cp chunks of c = s/2cp
// tokens and gives rank r chunks r and 2cp-1-r: with full attention every rank sees s/2 per
// query, as without context parallelism; with a window the ranks holding the first chunks see
// fewer and the others up to w. Without context parallelism it is K(s)/s (a window: w - w^2/2s).
double CausalKeysPerQuery(const Shape& s, const KeyMask& mask) {
  const double w = KeysPerQuery(s, mask);
  if (w >= s.seq) return 0.5 * s.seq;
  if (s.setup.cp == 1) return mask.kind == KeyMask::kWindow ? w - w * w / (2 * s.seq) : mask.KeysBefore(s.seq) / s.seq;
  const int cp = s.setup.cp;
  const double c = s.seq / (2 * cp);
  double busiest = 0;
  for (int r = 0; r < cp; ++r) {
    busiest = std::max(busiest, mask.KeysBefore((r + 1) * c) - mask.KeysBefore(r * c) +
                                    mask.KeysBefore((2 * cp - r) * c) - mask.KeysBefore((2 * cp - 1 - r) * c));
  }
  return busiest / (2 * c);
}

// The output projection of attention from its per-head `context`.
int OutProjection(GraphBuilder& g, const Shape& s, int context) {
  const ModelSpec& m = s.model;
  const double T = s.tokens, h = m.hidden, a = m.heads, dv = m.v_head_dim;
  const int out = g.Linear("out_proj", {"attn"}, {context}, {{"attention_out", s.Activation(h, false)}}, {context},
                           2 * T * a * dv * h / s.t, a * dv * h * kActivationBytes / s.t);
  g.Collectives(out, s.Leave(), s.Enter());
  return g.output(out);
}

// DeepSeek sparse attention (DeepSeek-V3.2, Megatron's DSAttention), after the latent
// attention's down-projections (`q_in` the query latent, or the normed input `x` without one) and
// the query up-projection `q`:
//  - the lightning indexer's projections, replicated over tensor parallelism on the whole
//    sequence (with sequence parallelism the input and the query latent are all-gathered for it):
//    index queries from q_in, one index key (and its LayerNorm) and a weight per index head from
//    x. Their input is detached (the indexer learns from its own loss only), so the backward is
//    the weight gradients: the forward's FLOPs once;
//  - its scores, each query against every earlier key (a fused kernel: causal, 2 FLOPs per key,
//    index head and dimension; the fp32 logits written and read by the top-k), the top-k, and
//    the indexer's KL loss against the attention's probabilities over the selected keys (those
//    probabilities recomputed from the queries and keys: the attention forward's QK part). Its
//    backward: the gradients of the index queries and key over the selected keys;
//  - the attention in the absorbed (MQA) form of latent attention, which the sparse kernels run:
//    the queries' no-RoPE part is projected into the key-value latent (W_UK absorbed), every
//    head attends to the selected keys of the shared latent (kv_lora + rope wide, values kv_lora
//    wide), and the result is projected up to the value heads (W_UV). The two projections are
//    kv_up's FLOPs and weights, reordered.
// With context parallelism the latent keys and the index keys are all-gathered over the group
// (Megatron's all-gather CP for DSA) before the kernels, and the latent's gradients
// reduce-scattered after: waited for, not overlapped.
int SparseLatentAttention(GraphBuilder& g, const Shape& s, int x, int q_in, int q, int kv_latent) {
  const ModelSpec& m = s.model;
  const LatentAttention& l = m.latent;
  const SparseAttention& sp = m.sparse;
  const Groups attn = {"attn"}, core = {"attn", "core_attn"}, up = {"attn", "mla_up_proj"};
  const double T = s.tokens, h = m.hidden, a = m.heads, dv = m.v_head_dim;
  const double ih = sp.index_heads, id = sp.index_head_dim;
  const double q_width = l.q_lora_rank > 0 ? l.q_lora_rank : h;
  const double latent_qk = l.kv_lora_rank + l.qk_rope_head_dim, latent_v = l.kv_lora_rank;
  const double weight = kActivationBytes / s.t;
  auto cp_gather = [&s](double bytes) {
    return s.setup.cp > 1 ? AllGatherSeconds(bytes * s.setup.cp, s.setup.cp, s.cp.bandwidth, s.cp.latency) : 0.0;
  };

  const int proj = g.Gemm("indexer_proj", attn, {q_in, x},
                          {{"index_q", T * ih * id * kActivationBytes}, {"index_k", T * id * kActivationBytes},
                           {"index_weights", T * ih * kActivationBytes}},
                          {q_in, x}, 2 * T * (q_width * ih * id + h * id + h * ih),
                          (q_width * ih * id + h * id + h * ih) * kActivationBytes);
  g.op(proj).backward_flops = g.op(proj).forward_flops;
  if (s.setup.sequence_parallel && s.t > 1) {
    g.op(proj).forward_comm_s += AllGatherSeconds(T * (h + q_width) * kActivationBytes, s.t, s.tp.bandwidth, s.tp.latency);
  }
  const double all_keys = CausalKeysPerQuery(s, KeyMask{});
  const double selected = CausalKeysPerQuery(s, MaskOf(m, false));
  const int select = g.Op("indexer_topk", OpClass::kFusedAttention, attn,
                          {g.output(proj, 0), g.output(proj, 1), g.output(proj, 2)},
                          {{"topk_indices", T * std::min<double>(sp.topk, s.seq) * 4}},
                          {g.output(proj, 0), g.output(proj, 1), g.output(proj, 2)});
  {
    LayerOp& op = g.op(select);
    op.saved.push_back(op.outputs[0]);
    op.forward_flops = 2 * T * all_keys * ih * id + 2 * T * selected * a * latent_qk / s.t;
    op.backward_flops = 2 * (2 * T * selected * ih * id);
    op.forward_bytes = 2 * T * all_keys * 4 + g.bytes(op.outputs[0]);
    op.backward_bytes = 2 * (g.bytes(g.output(proj, 0)) + g.bytes(g.output(proj, 1)) + g.bytes(g.output(proj, 2)));
    op.forward_comm_s += cp_gather(T * id * kActivationBytes);
  }
  const double nope = l.qk_nope_head_dim;
  const int absorb = g.Gemm("q_absorb", up, {q}, {{"q_latent_heads", s.Activation(a * latent_qk, true)}}, {q},
                              2 * T * a * nope * latent_v / s.t, a * nope * latent_v * weight);
  const int fa = g.Op("sparse_attention", OpClass::kFusedAttention, core,
                      {g.output(absorb), kv_latent, g.output(select)},
                      {{"context_latent", s.Activation(a * latent_v, true)}, {"logsumexp", T * a * 4 / s.t}},
                      {g.output(absorb), kv_latent, g.output(select)});
  {
    LayerOp& op = g.op(fa);
    op.saved.push_back(op.outputs[0]);
    op.saved.push_back(op.outputs[1]);
    op.forward_flops = 2 * T * selected * a * (latent_qk + latent_v) / s.t;
    op.backward_flops = 2.5 * op.forward_flops;
    op.forward_bytes = g.bytes(g.output(absorb)) + g.bytes(kv_latent) + g.bytes(op.outputs[0]);
    op.backward_bytes = 2 * op.forward_bytes;
    const double gather = cp_gather(g.bytes(kv_latent));
    op.forward_comm_s += gather;
    op.backward_comm_s += gather;
  }
  const int v_up = g.Gemm("v_up", up, {g.output(fa)}, {{"context", s.Activation(a * dv, true)}}, {g.output(fa)},
                            2 * T * a * latent_v * dv / s.t, a * latent_v * dv * weight);
  return OutProjection(g, s, g.output(v_up));
}

// Attention from the normed input `x` (in the sequence-parallel region) to the row-parallel
// projection's output.
int Attention(GraphBuilder& g, const Shape& s, int x, bool local) {
  const ModelSpec& m = s.model;
  const Groups attn = {"attn"}, core = {"attn", "core_attn"}, up = {"attn", "mla_up_proj"};
  const double T = s.tokens, h = m.hidden, a = m.heads;
  const double dh = m.head_dim, dv = m.v_head_dim;
  const double kv = m.latent.enabled() ? m.heads : m.kv_heads;
  const double weight = kActivationBytes / s.t;
  const KeyMask mask = MaskOf(m, local);
  int q = -1, k = -1, v = -1, gate = -1;
  if (!m.latent.enabled()) {
    // With a gated output the projection makes the gate beside the queries (as wide).
    std::vector<GraphBuilder::Out> outs = {{"q", s.Activation(a * dh, true)}, {"k", s.Activation(kv * dh, true)},
                                           {"v", s.Activation(kv * dv, true)}};
    const double q_width = m.attention_output_gate ? 2 * a * dh : a * dh;
    if (m.attention_output_gate) outs.push_back({"gate", s.Activation(a * dv, true)});
    const int qkv = g.Linear("qkv", attn, {x}, outs, {x}, 2 * T * h * (q_width + kv * dh + kv * dv) / s.t,
                             h * (q_width + kv * (dh + dv)) * weight);
    g.Collectives(qkv, s.Enter(), s.Leave());
    q = g.output(qkv, 0);
    k = g.output(qkv, 1);
    v = g.output(qkv, 2);
    if (m.attention_output_gate) gate = g.output(qkv, 3);
  } else {
    // Latent attention: replicated down-projections to the low-rank latents, then
    // column-parallel up-projections to per-head queries, keys and values.
    const LatentAttention& l = m.latent;
    int q_in = x;
    double q_in_width = h;
    const int kv_down = g.Linear("kv_down", attn, {x}, {{"kv_latent", T * (l.kv_lora_rank + l.qk_rope_head_dim) * kActivationBytes}},
                               {x}, 2 * T * h * (l.kv_lora_rank + l.qk_rope_head_dim),
                               h * (l.kv_lora_rank + l.qk_rope_head_dim) * kActivationBytes);
    g.Collectives(kv_down, s.Enter(), s.Leave());
    if (l.q_lora_rank > 0) {
      const int q_down = g.Linear("q_down", attn, {x}, {{"q_latent", T * l.q_lora_rank * kActivationBytes}}, {x},
                                2 * T * h * l.q_lora_rank, h * l.q_lora_rank * kActivationBytes);
      q_in = g.output(q_down);
      q_in_width = l.q_lora_rank;
    }
    const int q_up = g.Linear("q_up", up, {q_in}, {{"q", s.Activation(a * dh, true)}}, {q_in},
                            2 * T * q_in_width * a * dh / s.t, q_in_width * a * dh * weight);
    const int kv_latent = g.output(kv_down);
    q = g.output(q_up);
    if (m.sparse.enabled()) return SparseLatentAttention(g, s, x, q_in, q, kv_latent);
    const int kv_up = g.Linear("kv_up", up, {kv_latent}, {{"k", s.Activation(a * dh, true)}, {"v", s.Activation(a * dv, true)}},
                             {kv_latent}, 2 * T * l.kv_lora_rank * a * (l.qk_nope_head_dim + dv) / s.t,
                             l.kv_lora_rank * a * (l.qk_nope_head_dim + dv) * weight);
    k = g.output(kv_up, 0);
    v = g.output(kv_up, 1);
  }
  if (m.qk_norm) {
    const int qn = g.Elementwise("qk_norm", attn, {q, k}, {{"q_normed", g.bytes(q)}, {"k_normed", g.bytes(k)}}, {q, k});
    q = g.output(qn, 0);
    k = g.output(qn, 1);
  }
  int context = -1;
  if (s.setup.flash_attention) {
    // One fused kernel; causal masking skips half the score blocks; its backward recomputes the
    // scores (2.5x the forward FLOPs). Saves the inputs, the output and the row log-sum-exp.
    const int fa = g.Op("flash_attention", OpClass::kFusedAttention, core, {q, k, v},
                        {{"context", s.Activation(a * dv, true)}, {"logsumexp", T * a * 4 / s.t}}, {q, k, v});
    LayerOp& op = g.op(fa);
    op.saved.push_back(op.outputs[0]);
    op.saved.push_back(op.outputs[1]);
    op.forward_flops = 2 * T * CausalKeysPerQuery(s, mask) * a * (dh + dv) / s.t;
    op.backward_flops = 2.5 * op.forward_flops;
    op.forward_bytes = g.bytes(q) + g.bytes(k) + g.bytes(v) + g.bytes(op.outputs[0]);
    op.backward_bytes = 2 * op.forward_bytes;
    // Context parallelism (ring attention): each rank's keys and values visit the other cp - 1
    // ranks, block by block, overlapped with the kernel's work on the block before; the backward
    // also passes their gradients around. A window does not shorten the ring: rank r's second
    // chunk (2cp-1-r) needs the chunk before it, rank r+1's, which a one-way ring (rank r receives
    // from r-1, as Transformer Engine's) delivers on its last hop, cp - 1, for any window of 2
    // tokens or more. The window only removes work on the blocks outside it (the FLOPs above).
    if (s.setup.cp > 1) {
      const double kv_bytes = g.bytes(k) + g.bytes(v);
      const double ring = (s.setup.cp - 1) * (kv_bytes / s.cp.bandwidth + s.cp.latency);
      op.hidden_forward_comm_s = ring;
      op.hidden_backward_comm_s = 2 * ring;
    }
    context = op.outputs[0];
  } else {
    // Megatron's unfused path computes the full s x s scores and masks them (a local layer only
    // the band or the blocks of keys within its span).
    const double keys = KeysPerQuery(s, mask);
    const double scores = T * keys * a / s.t;  // elements per device
    const int qk = g.Gemm("attention_scores", core, {q, k}, {{"scores", scores * kActivationBytes}}, {q, k},
                          2 * T * keys * a * dh / s.t, 0);
    const int softmax = g.Elementwise("softmax", core, {g.output(qk)}, {{"probs", scores * kActivationBytes}}, {}, 1.5);
    int probs = g.output(softmax);
    g.op(softmax).saved = {probs};
    if (m.dropout) probs = Dropout(g, "attention_dropout", core, probs, scores);
    const int pv = g.Gemm("attention_values", core, {probs, v}, {{"context", s.Activation(a * dv, true)}}, {probs, v},
                          2 * T * keys * a * dv / s.t, 0);
    context = g.output(pv);
  }
  if (gate >= 0) {
    // context x sigmoid(gate), both saved for its backward.
    const int gated = g.Elementwise("output_gate", attn, {context, gate}, {{"gated_context", g.bytes(context)}},
                                    {context, gate}, 1.5);
    context = g.output(gated);
  }
  return OutProjection(g, s, context);
}

// A linear-time mixer's depthwise causal convolution (`taps` taps) over `in`, with the SiLU after
// it; saves its input.
int CausalConv(GraphBuilder& g, const std::string& name, int in, double channels, double taps, double tokens) {
  const int conv = g.Elementwise(name, {"attn"}, {in}, {{name + ".out", g.bytes(in)}}, {in}, 2);
  g.op(conv).forward_flops = 2 * tokens * channels * taps;
  g.op(conv).backward_flops = 2 * g.op(conv).forward_flops;
  return g.output(conv);
}

// A linear-time mixer's output: a gated RMSNorm of the scan's output `y` by the gate `z`, then the
// row-parallel output projection of `width` (per device) back to h.
int GatedNormAndOut(GraphBuilder& g, const Shape& s, int y, int z, double width) {
  const int norm = g.Elementwise("gated_norm", {"attn"}, {y, z}, {{"gated_norm.out", g.bytes(y)}}, {y, z}, 1.5);
  const double h = s.model.hidden;
  const int out = g.Linear("out_proj", {"attn"}, {g.output(norm)}, {{"mixer_out", s.Activation(h, false)}},
                           {g.output(norm)}, 2 * s.tokens * width * h, width * h * kActivationBytes);
  g.Collectives(out, s.Leave(), s.Enter());
  return g.output(out);
}

// A fused chunked scan (Mamba-2's SSD, the gated delta rule) as one op of the fused-kernel class:
// its tensor-core products run in on-chip tiles as flash attention's do, so it takes attention's
// efficiency (an assumption: no published run calibrates these kernels yet). Its backward
// recomputes the chunk states and runs the products' two gradients: 2.5x the forward FLOPs, as
// flash attention's. Traffic: its inputs and output, and the chunk states (16-bit), written and
// read back, once per pass and twice in the backward.
int ChunkedScan(GraphBuilder& g, const std::string& name, std::vector<int> inputs, double out_bytes, double flops,
                double state_bytes) {
  const int op = g.Op(name, OpClass::kFusedAttention, {"attn"}, inputs, {{name + ".out", out_bytes}}, inputs);
  LayerOp& o = g.op(op);
  o.forward_flops = flops;
  o.backward_flops = 2.5 * flops;
  double traffic = out_bytes + 2 * state_bytes;
  for (int in : inputs) traffic += g.bytes(in);
  o.forward_bytes = traffic;
  o.backward_bytes = 2 * traffic;
  return g.output(op);
}

// Mamba-2 (Megatron's MambaMixer) from the normed input `x`: the column-parallel input projection
// to z, x, B, C and dt; the causal convolution over x, B and C; the SSD scan; the gated norm and
// the row-parallel output projection. Heads and groups split over the tensor-parallel ranks.
// The SSD scan in chunks of Q tokens, per token: C B^T within its chunk (2 Q N a group), that
// masked product times x (2 Q P a head), the chunk's state B^T x (2 N P a head) and the earlier
// chunks' state read out through C (2 N P a head); the pass of the state from chunk to chunk is
// elementwise and left out. States: H P N values per head and chunk.
int Mamba2Mixer(GraphBuilder& g, const Shape& s, int x) {
  const MambaShape& mb = s.model.mamba;
  const double T = s.tokens, h = s.model.hidden, t = s.t;
  const double H = mb.heads / t, P = mb.head_dim, N = mb.state, G = mb.groups / t, Q = mb.chunk;
  const double inner = H * P, bc = 2 * G * N;
  const int in = g.Linear("in_proj", {"attn"}, {x},
                          {{"z", T * inner * kActivationBytes}, {"xbc", T * (inner + bc) * kActivationBytes},
                           {"dt", T * H * kActivationBytes}},
                          {x}, 2 * T * h * (2 * inner + bc + H), h * (2 * inner + bc + H) * kActivationBytes);
  g.Collectives(in, s.Enter(), s.Leave());
  const int conv = CausalConv(g, "conv1d", g.output(in, 1), inner + bc, mb.conv_kernel, T);
  const double flops = T * (2 * Q * N * G + (2 * Q * P + 4 * N * P) * H);
  const double states = T / Q * H * P * N * kActivationBytes;
  const int y = ChunkedScan(g, "ssd_scan", {conv, g.output(in, 2)}, T * inner * kActivationBytes, flops, states);
  return GatedNormAndOut(g, s, y, g.output(in, 0), inner);
}

// Gated DeltaNet (Qwen3-Next) from the normed input `x`: the column-parallel projections to q, k,
// v, the output gate z, beta and the decay; the causal convolution over q, k and v; the chunked
// gated delta rule; the gated norm and the row-parallel output projection. Heads split over the
// tensor-parallel ranks. The delta rule in chunks of C tokens, per token and value head (q and k
// repeated to the value heads): K K^T within its chunk (2 C dk), the triangular solve (C^2/3),
// the WY factors W and U (2 C dk, 2 C dv), the new values U - W S (2 dk dv), the output Q S
// (2 dk dv) and the masked (Q K^T) V within the chunk (2 C dk + 2 C dv), and the state update
// K^T V (2 dk dv). States: dk dv values per value head and chunk.
int GatedDeltaNet(GraphBuilder& g, const Shape& s, int x) {
  const DeltaNetShape& dn = s.model.deltanet;
  const double T = s.tokens, h = s.model.hidden, t = s.t;
  const double nk = dn.key_heads / t, nv = dn.value_heads / t, dk = dn.key_head_dim, dv = dn.value_head_dim;
  const double C = dn.chunk;
  const double qkv = 2 * nk * dk + nv * dv, width = qkv + nv * dv + 2 * nv;
  const int in = g.Linear("in_proj", {"attn"}, {x},
                          {{"qkv", T * qkv * kActivationBytes}, {"z", T * nv * dv * kActivationBytes},
                           {"beta_decay", T * 2 * nv * kActivationBytes}},
                          {x}, 2 * T * h * width, h * width * kActivationBytes);
  g.Collectives(in, s.Enter(), s.Leave());
  const int conv = CausalConv(g, "conv1d", g.output(in, 0), qkv, dn.conv_kernel, T);
  const double flops = T * nv * (6 * dk * dv + 2 * C * (3 * dk + 2 * dv) + C * C / 3);
  const double states = T / C * nv * dk * dv * kActivationBytes;
  const int y = ChunkedScan(g, "delta_rule", {conv, g.output(in, 2)}, T * nv * dv * kActivationBytes, flops, states);
  return GatedNormAndOut(g, s, y, g.output(in, 1), nv * dv);
}

// A (column-parallel, row-parallel) MLP pair of width `ffn`, sharded over `shard` ranks, on
// `tokens` tokens from `x` to its output; `enter` and `leave` are the collectives around it
// (forward; the backward runs them the other way), `out_divisor` what divides its T x h output.
struct MlpShape {
  double ffn, tokens;
  int shard;
  Comm enter, leave;
  double out_divisor;
};
int Mlp(GraphBuilder& g, const Shape& s, const std::string& prefix, int x, const MlpShape& m) {
  const Groups mlp = {"mlp"};
  const double T = m.tokens, h = s.model.hidden, ffn = m.ffn;
  const double weight = kActivationBytes / m.shard;
  const bool gated = IsGatedMlp(s.model.mlp);
  const double up_width = gated ? 2 * ffn : ffn;
  const char* activation = s.model.mlp == MlpKind::kSwiGlu       ? "swiglu"
                           : s.model.mlp == MlpKind::kGeGlu      ? "geglu"
                           : s.model.mlp == MlpKind::kSquaredRelu ? "squared_relu"
                                                                  : "gelu";
  const int fc1 = g.Linear(prefix + "fc1", mlp, {x}, {{prefix + "fc1.out", T * up_width * kActivationBytes / m.shard}},
                           {x}, 2 * T * h * up_width / m.shard, h * up_width * weight);
  g.Collectives(fc1, m.enter, m.leave);
  const int act = g.Elementwise(prefix + activation, {"mlp", "mlp_act"}, {g.output(fc1)},
                                {{prefix + "act.out", T * ffn * kActivationBytes / m.shard}}, {g.output(fc1)}, 1.5);
  const int fc2 = g.Linear(prefix + "fc2", mlp, {g.output(act)},
                           {{prefix + "fc2.out", T * h * kActivationBytes / m.out_divisor}}, {g.output(act)},
                           2 * T * ffn * h / m.shard, ffn * h * weight);
  g.Collectives(fc2, m.leave, m.enter);
  return g.output(fc2);
}

// The dense MLP (and the shared experts) of width `ffn` in the tensor-parallel region.
MlpShape DenseMlp(const Shape& s, double ffn) { return {ffn, s.tokens, s.t, s.Enter(), s.Leave(), s.sp}; }

// The residual add: no saved tensors.
int Residual(GraphBuilder& g, const Shape& s, const std::string& name, const Groups& groups, int a, int b) {
  const int op = g.Elementwise(name, groups, {a, b}, {{name + ".out", s.Activation(s.model.hidden, false)}}, {}, 0.5);
  return g.output(op);
}

// The MLP half of a decoder layer on the residual stream `h1`: norm, the dense MLP or the MoE
// one, and the residual add.
void MlpBlock(GraphBuilder& g, const Shape& s, int h1, bool moe) {
  const ModelSpec& m = s.model;
  const Groups mlp = {"mlp"};
  const int n2 = Norm(g, s, "norm2", {"mlp", "norm"}, h1);
  int out = -1;
  if (!moe) {
    out = Mlp(g, s, "", n2, DenseMlp(s, m.ffn));
  } else {
    // Each tensor-parallel rank routes its sequence-parallel share of the tokens (Megatron's
    // all-to-all dispatcher): a replicated router, the dispatch all-to-all over the ep expert-
    // parallel ranks, an all-gather over the etp expert tensor-parallel ranks, the local experts
    // as one grouped MLP, and the way back (reduce-scatter, combine all-to-all, weighted sum).
    // The busiest rank's tokens set the time: capacity x the even share with a capacity factor,
    // else the even share x the load imbalance (dropless).
    const double experts = m.moe.experts, k = m.moe.top_k;
    const int etp = ExpertTensorParallel(s.setup);
    const double factor = s.setup.moe_capacity_factor > 0 ? s.setup.moe_capacity_factor : MoeImbalance(s.setup);
    const double routed_tokens = s.tokens / s.t * k * factor;  // on this rank, before the etp gather
    const double routed_bytes = routed_tokens * m.hidden * kActivationBytes;
    const int router = g.Gemm("router", mlp, {n2}, {{"router_probs", s.tokens * experts * 4 / s.sp}}, {n2},
                              2 * s.tokens * m.hidden * experts / s.sp, m.hidden * experts * kActivationBytes);
    const int dispatch = g.Elementwise("dispatch", mlp, {n2, g.output(router)}, {{"dispatched", routed_bytes}},
                                       {g.output(router)}, 1);
    // The exchange each way; a fraction runs beside another micro-batch's compute.
    const double exchange = s.setup.moe_dispatcher == MoeDispatcher::kFlex ? s.ep.FlexDispatch(routed_bytes, k, experts)
                                                                           : s.ep.AllToAll(routed_bytes);
    const double overlap = s.setup.ep_comm_overlap;
    auto exchanges = [&](int op) {
      LayerOp& o = g.op(op);
      o.forward_comm_s = o.backward_comm_s = (1 - overlap) * exchange;
      o.overlapped_forward_comm_s = o.overlapped_backward_comm_s = overlap * exchange;
      // What is left on the critical path is what an overlapped pair hides.
      o.pair_forward_comm_s = o.pair_backward_comm_s = (1 - overlap) * exchange;
    };
    exchanges(dispatch);
    // The host launches the rest of the layer after the token counts reach it, each pass.
    const Efficiencies& e = s.device.efficiency;
    const double local_experts = experts / s.setup.ep;
    const double host_s =
        (s.setup.moe_cuda_graphs ? e.moe_host_graphed_ms : e.moe_host_ms + e.moe_host_expert_ms * local_experts) * 1e-3;
    g.op(dispatch).forward_comm_s += host_s;
    g.op(dispatch).backward_comm_s += host_s;
    const double gather = AllGatherSeconds(routed_bytes * etp, etp, s.etp.bandwidth, s.etp.latency);
    const int routed = Mlp(g, s, "experts.", g.output(dispatch),
                           {static_cast<double>(m.moe.ffn), routed_tokens * etp, etp, {gather, 0}, {gather, 0}, static_cast<double>(etp)});
    std::vector<int> to_combine = {routed};
    if (m.moe.shared_experts > 0) {
      to_combine.push_back(Mlp(g, s, "shared.", n2, DenseMlp(s, static_cast<double>(m.moe.shared_experts) * m.moe.ffn)));
    }
    const int combine = g.Elementwise("combine", mlp, to_combine, {{"moe_out", s.Activation(m.hidden, false)}},
                                      {g.output(router)}, 1);
    exchanges(combine);
    out = g.output(combine);
  }
  if (m.post_norms) out = Norm(g, s, "post_mlp_norm", mlp, out);
  if (m.dropout) out = Dropout(g, "mlp_dropout", mlp, out, s.tokens * m.hidden / s.sp);
  Residual(g, s, "residual2", mlp, h1, out);
}


// The fine-grained offload module whose region saves each op's tensors (recompute.h,
// kOffloadModules), as megatron-core's Transformer Engine layer spec runs a layer: its attention
// (not a linear mixer's, which has no offload regions) and its MoE block; the dense MLP has none.
void AssignOffloadModules(GraphBuilder& g, const DecoderKind& kind) {
  const bool attention = kind.mixer == Mixer::kAttention;
  const bool moe = kind.ffn == Ffn::kMoe;
  for (int o = 0; o < g.ops(); ++o) {
    LayerOp& op = g.op(o);
    auto in = [&](const char* group) { return std::find(op.groups.begin(), op.groups.end(), group) != op.groups.end(); };
    const std::string& n = op.name;
    if (attention && (n == "norm1" || n == "qkv" || n == "qk_norm" || n == "kv_down" || n == "q_down" ||
                      n == "q_up" || n == "kv_up")) {
      op.offload_module = "qkv_linear";
    } else if (attention && in("core_attn")) {
      op.offload_module = "core_attn";
    } else if (attention && n == "out_proj") {
      op.offload_module = "attn_proj";
    } else if (moe && n == "norm2") {
      op.offload_module = "mlp_norm";
    } else if (moe && n == "experts.fc1") {
      op.offload_module = "expert_fc1";
    } else if (moe && n.rfind("experts.", 0) == 0 && in("mlp_act")) {
      op.offload_module = "moe_act";
    }
  }
}

}  // namespace

double AllReduceSeconds(double bytes, int n, double bandwidth, double latency) {
  return 2 * AllGatherSeconds(bytes, n, bandwidth, latency);
}

double AllGatherSeconds(double bytes, int n, double bandwidth, double latency) {
  if (n <= 1) return 0;
  return (n - 1) * (bytes / n / bandwidth + latency);
}

int PaddedVocab(int vocab, int tp) {
  const int multiple = 128 * tp;
  return (vocab + multiple - 1) / multiple * multiple;
}

LayerGraph DecoderLayerGraph(const ModelSpec& m, const DeviceSpec& d, const TrainingSetup& setup, bool moe,
                             bool windowed) {
  return DecoderLayerGraph(m, d, setup, DecoderKind{Mixer::kAttention, moe ? Ffn::kMoe : Ffn::kDense, windowed});
}

LayerGraph DecoderLayerGraph(const ModelSpec& m, const DeviceSpec& d, const TrainingSetup& setup,
                             const DecoderKind& kind) {
  const Shape s(m, d, setup);
  const bool moe = kind.ffn == Ffn::kMoe;
  std::string name = DecoderKindName(kind);
  if (kind.mixer == Mixer::kAttention && kind.ffn != Ffn::kNone) {
    const char* local = !kind.windowed ? "" : m.local_attention == LocalAttention::kChunked ? " chunked" : " windowed";
    name = std::string(moe ? "decoder (MoE)" : "decoder") + local;
  }
  GraphBuilder g(s, name);
  const Groups attn = {"attn"};
  const int x = g.Input("input", s.Activation(m.hidden, false));
  int h1 = x;  // the residual stream after the mixer
  if (kind.mixer != Mixer::kNone) {
    const int n1 = Norm(g, s, "norm1", {"attn", "norm"}, x);
    int mixed = kind.mixer == Mixer::kMamba2         ? Mamba2Mixer(g, s, n1)
                : kind.mixer == Mixer::kGatedDeltaNet ? GatedDeltaNet(g, s, n1)
                                                      : Attention(g, s, n1, kind.windowed);
    if (m.post_norms) mixed = Norm(g, s, "post_attention_norm", attn, mixed);
    if (m.dropout) mixed = Dropout(g, "attention_out_dropout", attn, mixed, s.tokens * m.hidden / s.sp);
    h1 = Residual(g, s, "residual1", attn, x, mixed);
  }
  if (kind.ffn != Ffn::kNone) MlpBlock(g, s, h1, moe);
  AssignOffloadModules(g, kind);
  // An FP8 layer's pass waits for the host: Transformer Engine's scaling bookkeeping and the
  // quantization kernels it launches beside the layer's FP8 GEMMs.
  if (s.fp8) {
    LayerOp& last = g.op(g.ops() - 1);
    last.forward_comm_s += d.efficiency.fp8_host_ms * 1e-3;
    last.backward_comm_s += d.efficiency.fp8_host_ms * 1e-3;
  }
  return g.Finish();
}


LayerGraph EmbeddingGraph(const ModelSpec& m, const DeviceSpec& d, const TrainingSetup& setup) {
  const Shape s(m, d, setup);
  GraphBuilder g(s, "embedding");
  // Token ids (int64) in; a vocabulary-parallel lookup, summed over the tensor-parallel ranks.
  const int ids = g.Input("token_ids", s.tokens * 8);
  const int lookup = g.Elementwise("token_embedding", {}, {ids}, {{"embedded", s.Activation(m.hidden, false)}}, {ids}, 1);
  g.op(lookup).forward_bytes = 2 * s.tokens * m.hidden * kActivationBytes;
  g.op(lookup).backward_bytes = 2 * s.tokens * m.hidden * kActivationBytes;
  g.Collectives(lookup, s.Leave(), s.Enter());
  int out = g.output(lookup);
  if (m.learned_positions > 0) out = g.output(g.Elementwise("position_embedding", {}, {out}, {{"positioned", g.bytes(out)}}, {}, 1));
  if (m.dropout) Dropout(g, "embedding_dropout", {}, out, s.tokens * m.hidden / s.sp);
  return g.Finish();
}

LayerGraph HeadGraph(const ModelSpec& m, const DeviceSpec& d, const TrainingSetup& setup) {
  const Shape s(m, d, setup);
  GraphBuilder g(s, "head");
  const double vocab = PaddedVocab(m.vocab, setup.tp);
  const int x = g.Input("input", s.Activation(m.hidden, false));
  const int normed = Norm(g, s, "final_norm", {}, x);
  const int logits = g.Gemm("lm_head", {}, {normed}, {{"logits", s.tokens * vocab * kActivationBytes / s.t}}, {normed},
                            2 * s.tokens * m.hidden * vocab / s.t, m.hidden * vocab * kActivationBytes / s.t);
  g.Collectives(logits, s.Enter(), s.Leave());
  // Vocabulary-parallel cross-entropy: the softmax in fp32 is saved; three small all-reduces
  // (max, sum, target logit) over the tensor-parallel ranks.
  const int ce = g.Elementwise("cross_entropy", {}, {g.output(logits)}, {{"softmax", s.tokens * vocab * 4 / s.t}}, {}, 1);
  g.op(ce).saved = {g.output(ce)};
  g.op(ce).forward_comm_s = 3 * AllReduceSeconds(s.tokens * 4, s.t, s.tp.bandwidth, s.tp.latency);
  return g.Finish();
}

namespace {

// Appends `part` to `graph` with part's first tensor (its input) replaced by graph's tensor
// `input`; returns the index in `graph` of the first output of part's last op.
int Append(LayerGraph& graph, const LayerGraph& part, int input) {
  const int op_offset = static_cast<int>(graph.ops.size());
  std::vector<int> index(part.tensors.size());
  for (std::size_t t = 0; t < part.tensors.size(); ++t) {
    if (t == 0) {
      index[t] = input;
      continue;
    }
    OpTensor tensor = part.tensors[t];
    if (tensor.producer >= 0) tensor.producer += op_offset;
    index[t] = static_cast<int>(graph.tensors.size());
    graph.tensors.push_back(std::move(tensor));
  }
  for (LayerOp op : part.ops) {
    for (std::vector<int>* list : {&op.inputs, &op.outputs, &op.saved}) {
      for (int& t : *list) t = index[t];
    }
    graph.ops.push_back(std::move(op));
  }
  return graph.ops.back().outputs[0];
}

// The start of a multi-token-prediction module: the next tokens' embeddings (a lookup in the
// shared, vocabulary-parallel table), a norm of them and of the hidden state, and the projection
// of the two to width h (a tensor-parallel GEMM entered and left like the MLP).
LayerGraph MtpProjectionGraph(const ModelSpec& m, const DeviceSpec& d, const TrainingSetup& setup) {
  const Shape s(m, d, setup);
  GraphBuilder g(s, "mtp projection");
  const int x = g.Input("input", s.Activation(m.hidden, false));
  const int ids = g.Input("mtp.token_ids", s.tokens * 8);
  const int lookup =
      g.Elementwise("mtp.embedding", {}, {ids}, {{"mtp.embedded", s.Activation(m.hidden, false)}}, {ids}, 1);
  g.Collectives(lookup, s.Leave(), s.Enter());
  const int hidden_norm = Norm(g, s, "mtp.hidden_norm", {}, x);
  const int embedding_norm = Norm(g, s, "mtp.embedding_norm", {}, g.output(lookup));
  const double h = m.hidden;
  const int projection = g.Linear("mtp.projection", {}, {hidden_norm, embedding_norm},
                                  {{"mtp.projected", s.Activation(h, false)}}, {hidden_norm, embedding_norm},
                                  2 * s.tokens * 2 * h * h / s.t, 2 * h * h * kActivationBytes / s.t);
  g.Collectives(projection, s.Enter() + s.Leave(), s.Enter() + s.Leave());
  return g.Finish();
}

}  // namespace

LayerGraph HeadWithMtpGraph(const ModelSpec& m, const DeviceSpec& d, const TrainingSetup& setup) {
  LayerGraph graph = HeadGraph(m, d, setup);
  if (m.mtp_layers <= 0) return graph;
  graph.name = "head + mtp";
  int hidden = 0;  // the head's input, the last decoder layer's output
  for (int k = 0; k < m.mtp_layers; ++k) {
    const int projected = Append(graph, MtpProjectionGraph(m, d, setup), hidden);
    hidden = Append(graph, DecoderLayerGraph(m, d, setup, m.moe.enabled()), projected);
    Append(graph, HeadGraph(m, d, setup), hidden);
  }
  return graph;
}

WeightGradCost WeightGradOf(const LayerGraph& graph) {
  WeightGradCost w;
  std::vector<bool> counted(graph.tensors.size(), false);
  for (const LayerOp& op : graph.ops) {
    if (op.weight_grad_s <= 0) continue;
    w.seconds += op.weight_grad_s;
    for (int t : op.inputs) {
      if (!counted[t]) w.bytes += graph.tensors[t].saved_bytes;
      counted[t] = true;
    }
    for (int t : op.outputs) {
      if (!counted[t]) w.bytes += graph.tensors[t].bytes;
      counted[t] = true;
    }
  }
  return w;
}

OptionCost EvaluateOption(const LayerGraph& graph, const std::string& option) {
  const unsigned parts = ParseRecompute(option).value().parts;
  const int ops = static_cast<int>(graph.ops.size());
  // in_r[o]: op o is recomputed; discards[o]: and does not keep its outputs.
  std::vector<bool> in_r(ops, false), discards(ops, false);
  for (int o = 0; o < ops; ++o) {
    for (const std::string& group : graph.ops[o].groups) {
      unsigned part = 0;
      if (group == "core_attn") part = kRecomputeCoreAttention;
      if (group == "attn") part = kRecomputeAttention;
      if (group == "mlp") part = kRecomputeMlp;
      if (group == "norm") part = kRecomputeNorms;
      if (group == "mlp_act") part = kRecomputeMlpActivation;
      if (group == "mla_up_proj") part = kRecomputeMlaUpProjection;
      if (parts & (part | kRecomputeLayer)) in_r[o] = true;
      // Output-discarding parts: their outputs are not kept even for the ops that saved them.
      if ((group == "norm" || group == "mla_up_proj") && (parts & part)) discards[o] = true;
    }
    if (parts & kRecomputeLayer) in_r[o] = true;
  }
  const int tensors = static_cast<int>(graph.tensors.size());
  std::vector<bool> saved_any(tensors, false), saved_outside(tensors, false), read_by_r(tensors, false);
  OptionCost cost;
  for (int o = 0; o < ops; ++o) {
    const LayerOp& op = graph.ops[o];
    cost.forward_s += op.forward_s;
    cost.backward_s += op.backward_s;
    cost.forward_comm_s += op.pair_forward_comm_s;
    cost.backward_comm_s += op.pair_backward_comm_s;
    if (in_r[o]) {
      cost.recompute_s += op.forward_s;
      cost.backward_comm_s += op.pair_forward_comm_s;
    }
    for (int t : op.saved) {
      saved_any[t] = true;
      if (!in_r[o]) saved_outside[t] = true;
    }
    if (in_r[o]) {
      for (int t : op.inputs) read_by_r[t] = true;
    }
  }
  double dropped = 0, largest_unsaved = 0;
  std::vector<bool> kept_tensor(tensors, false);
  for (int t = 0; t < tensors; ++t) {
    const OpTensor& tensor = graph.tensors[t];
    const int p = tensor.producer;
    const bool produced_in_r = p >= 0 && in_r[p];
    const bool kept = (!produced_in_r && (saved_any[t] || read_by_r[t])) ||
                      (produced_in_r && !discards[p] && saved_outside[t]);
    if (kept) cost.saved_bytes += tensor.saved_bytes;
    kept_tensor[t] = kept;
    if (saved_any[t] && !kept) dropped += tensor.saved_bytes;
    if (!saved_any[t] && p >= 0) largest_unsaved = std::max(largest_unsaved, tensor.bytes);
  }
  cost.peak_extra_bytes = dropped + largest_unsaved;
  if (parts & kOffloadActivations) {
    // What the layer keeps goes to the host during its forward and returns before its backward,
    // the copies overlapped with the layer's own compute; on the device it occupies memory only
    // while its backward runs. With offload modules, only the tensors those modules save: a kept
    // tensor that every op saving it outside the recomputation lies in one (an op that saves it
    // elsewhere keeps it on the device), of at least Megatron's least size.
    double moved = cost.saved_bytes;
    if (!graph.offload_modules.empty()) {
      std::vector<bool> outside(tensors, false);
      for (int o = 0; o < ops; ++o) {
        if (in_r[o]) continue;
        const LayerOp& op = graph.ops[o];
        const bool offloaded = std::find(graph.offload_modules.begin(), graph.offload_modules.end(),
                                         op.offload_module) != graph.offload_modules.end();
        for (int t : op.saved) {
          if (!offloaded) outside[t] = true;
        }
      }
      moved = 0;
      for (int t = 0; t < tensors; ++t) {
        if (kept_tensor[t] && saved_outside[t] && !outside[t] && graph.tensors[t].bytes >= kMinOffloadedTensorBytes) {
          moved += graph.tensors[t].saved_bytes;
        }
      }
    }
    const double copy = moved / graph.host_bandwidth_bytes_per_s;
    cost.forward_s += std::max(0.0, copy - cost.forward_s);
    cost.backward_s += std::max(0.0, copy - (cost.backward_s + cost.recompute_s));
    cost.peak_extra_bytes += moved;
    cost.host_bytes = moved;
    cost.saved_bytes -= moved;
  }
  return cost;
}

}  // namespace bmpipe
