#include "bmpipe/frameworks/torch/profiler_trace.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "bmpipe/core/units.h"
#include "bmpipe/core/text.h"
#include "bmpipe/schedule/pipeline.h"

namespace bmpipe {
namespace {

constexpr std::string_view kAnnotation = "bmpipe.layer ";
constexpr std::string_view kBackwardFunction = "autograd::engine::evaluate_function: ";
// A region bmpipe.torch checkpoints, each time it runs: inside a backward function, a recomputation.
constexpr std::string_view kRegion = "bmpipe.region";

struct Span {
  double begin = 0, end = 0;  // microseconds
  std::int64_t tid = 0;
  // Within a hundredth of a microsecond: the trace's times are microseconds with three decimals,
  // and a child's end (its start plus its duration) may round past its parent's.
  bool Contains(const Span& o) const { return tid == o.tid && begin <= o.begin + 0.01 && o.end <= end + 0.01; }
};

struct Annotation {
  Span span;
  int layer = 0;
  Bytes param_bytes = 0;
  std::int64_t params = 0;
  int instance = -1;      // the forward (index into the layer's) it is, or that it recomputes
  bool recompute = false;
};

struct Backward {
  Span span;
  std::int64_t seq = -1;
  bool top = true;  // not inside another backward function
};

struct CpuOp {
  Span span;
  std::int64_t seq = -1;
  std::int64_t external = -1;
};

struct MemoryEvent {
  double ts = 0;
  Bytes total = 0;
};

// A string field, or "" when absent or of another type (traces from other tools vary).
std::string Text(const Json& e, const char* key) {
  const auto it = e.find(key);
  return it != e.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::int64_t Tid(const Json& e) {
  const auto it = e.find("tid");
  const Json t = it != e.end() ? *it : Json(0);
  return t.is_number_integer() ? t.get<std::int64_t>() : static_cast<std::int64_t>(std::hash<std::string>{}(t.dump()));
}

std::optional<std::int64_t> IntArg(const Json& e, const char* key) {
  if (!e.contains("args") || !e["args"].is_object() || !e["args"].contains(key)) return std::nullopt;
  const Json& v = e["args"][key];
  if (!v.is_number_integer()) return std::nullopt;
  return v.get<std::int64_t>();
}

// "bmpipe.layer 3 param_bytes 49408 params 12352"
std::optional<Annotation> ParseAnnotation(const std::string& name) {
  if (name.rfind(kAnnotation, 0) != 0) return std::nullopt;
  Annotation a;
  long long layer = -1, bytes = -1, params = -1;
  char tail = 0;
  if (std::sscanf(name.c_str() + kAnnotation.size(), "%lld param_bytes %lld params %lld%c", &layer, &bytes, &params,
                  &tail) != 3 ||
      layer < 0 || layer > kMaxLayers || bytes < 0 || params < 0) {
    return std::nullopt;
  }
  a.layer = static_cast<int>(layer);
  a.param_bytes = bytes;
  a.params = params;
  return a;
}

template <typename T>
T Median(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

}  // namespace

Result<std::vector<TracedLayer>> ReadTorchTrace(const Json& trace, const std::string& source) {
  const Json* events = trace.is_object() && trace.contains("traceEvents") ? &trace["traceEvents"] : &trace;
  if (!events->is_array()) {
    return InvalidInput(source + ": not a Chrome trace: no traceEvents array (torch.profiler's export_chrome_trace "
                                 "writes one)");
  }
  std::vector<Annotation> annotations;
  std::vector<Span> regions;
  std::vector<Backward> backwards;
  std::vector<CpuOp> ops;
  std::vector<std::pair<std::int64_t, double>> kernels;  // External id, duration
  std::map<int, std::vector<MemoryEvent>> memory;        // by device type
  for (const Json& e : *events) {
    if (!e.is_object() || !e.contains("name") || !e["name"].is_string()) continue;
    const std::string name = e["name"].get<std::string>();
    const std::string ph = Text(e, "ph");
    const std::string cat = Text(e, "cat");
    // Times are finite and memory counters a size a device can hold: a NaN or an overflowing
    // counter would make every cost derived from them meaningless.
    for (const char* key : {"ts", "dur"}) {
      if (e.contains(key) && e[key].is_number() && !std::isfinite(e[key].get<double>())) {
        return InvalidInput(fmt::format("{}: event '{}': {} is not a finite number of microseconds", source,
                                        Abbreviated(name), key));
      }
    }
    if (name == "[memory]") {
      const std::optional<std::int64_t> total = IntArg(e, "Total Allocated");
      if (total && (*total < 0 || static_cast<double>(*total) > kMaxInputBytes)) {
        return InvalidInput(fmt::format("{}: a '[memory]' event's Total Allocated {} bytes is no device's memory "
                                        "(0 to {:g} bytes)",
                                        source, *total, kMaxInputBytes));
      }
      if (!total || !e.contains("ts") || !e["ts"].is_number()) continue;
      memory[static_cast<int>(IntArg(e, "Device Type").value_or(0))].push_back({e["ts"].get<double>(), *total});
      continue;
    }
    if (ph != "X" || !e.contains("ts") || !e.contains("dur") || !e["ts"].is_number() || !e["dur"].is_number()) continue;
    const Span span{e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>(), Tid(e)};
    if (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset") {
      if (const std::optional<std::int64_t> ext = IntArg(e, "External id")) kernels.push_back({*ext, e["dur"].get<double>()});
      continue;
    }
    if (name == kRegion) {
      regions.push_back(span);
      continue;
    }
    if (std::optional<Annotation> a = ParseAnnotation(name)) {
      a->span = span;
      annotations.push_back(*a);
      continue;
    }
    if (name.rfind(kAnnotation, 0) == 0) {
      return InvalidInput(fmt::format("{}: annotation '{}': expected 'bmpipe.layer <index> param_bytes <bytes> params "
                                      "<count>' (bmpipe.torch.annotate writes it)",
                                      source, name));
    }
    const std::optional<std::int64_t> seq = IntArg(e, "Sequence number");
    if (name.rfind(kBackwardFunction, 0) == 0) {
      backwards.push_back({span, seq.value_or(-1)});
    }
    if (cat == "cpu_op") ops.push_back({span, name.rfind(kBackwardFunction, 0) == 0 ? -1 : seq.value_or(-1),
                                        IntArg(e, "External id").value_or(-1)});
  }
  if (annotations.empty()) {
    return InvalidInput(source + ": no layer annotations ('bmpipe.layer ...'): profile the steps with the layers "
                                 "annotated (bmpipe.torch.annotate)");
  }
  auto by_begin = [](const auto& a, const auto& b) { return a.span.begin < b.span.begin; };
  std::sort(annotations.begin(), annotations.end(), by_begin);
  std::sort(backwards.begin(), backwards.end(), by_begin);
  std::sort(ops.begin(), ops.end(), by_begin);
  // Backward functions run nested (one evaluates others); the outermost of each nest is "top".
  std::map<std::int64_t, std::vector<const Backward*>> open;  // by thread: the nest around the current one
  for (Backward& b : backwards) {
    std::vector<const Backward*>& stack = open[b.span.tid];
    while (!stack.empty() && !stack.back()->span.Contains(b.span)) stack.pop_back();
    b.top = stack.empty();
    stack.push_back(&b);
  }
  // The outermost backward functions of each thread, in order of their start: they do not
  // overlap on a thread, so the last one starting before a span is the only one that can hold it
  // (a binary search, not a scan: the backward runs on its own thread on a GPU).
  std::map<std::int64_t, std::vector<const Backward*>> tops;
  for (const Backward& b : backwards) {
    if (b.top) tops[b.span.tid].push_back(&b);
  }
  auto backward_of = [&](const Span& s) -> const Backward* {
    const auto on = tops.find(s.tid);
    if (on == tops.end()) return nullptr;
    const std::vector<const Backward*>& list = on->second;
    const auto after = std::upper_bound(list.begin(), list.end(), s.begin + 0.01,
                                        [](double t, const Backward* b) { return t < b->span.begin; });
    if (after == list.begin()) return nullptr;
    const Backward* b = *std::prev(after);
    return b->span.Contains(s) ? b : nullptr;
  };

  int layers = 0;
  for (const Annotation& a : annotations) layers = std::max(layers, a.layer + 1);
  std::vector<TracedLayer> out(static_cast<std::size_t>(layers));
  std::vector<bool> seen(static_cast<std::size_t>(layers), false);
  std::map<std::int64_t, std::pair<int, int>> forward_of_seq;  // sequence number -> (layer, instance)
  for (Annotation& a : annotations) {
    TracedLayer& l = out[static_cast<std::size_t>(a.layer)];
    if (seen[static_cast<std::size_t>(a.layer)] && (l.param_bytes != a.param_bytes || l.params != a.params)) {
      return InvalidInput(fmt::format("{}: layer {} is annotated with two parameter sizes", source, a.layer));
    }
    seen[static_cast<std::size_t>(a.layer)] = true;
    l.index = a.layer;
    l.param_bytes = a.param_bytes;
    l.params = a.params;
    a.recompute = backward_of(a.span) != nullptr;
    if (a.recompute) continue;
    a.instance = static_cast<int>(l.forward_s.size());
    l.forward_s.push_back((a.span.end - a.span.begin) / 1e6);
    l.backward_s.push_back(0);
    l.recompute_s.push_back(0);
    const auto first = std::lower_bound(ops.begin(), ops.end(), a.span.begin,
                                        [](const CpuOp& op, double t) { return op.span.begin < t; });
    for (auto it = first; it != ops.end() && it->span.begin <= a.span.end; ++it) {
      if (it->seq >= 0 && a.span.Contains(it->span)) forward_of_seq[it->seq] = {a.layer, a.instance};
    }
  }
  for (int i = 0; i < layers; ++i) {
    if (!seen[static_cast<std::size_t>(i)]) {
      return InvalidInput(fmt::format("{}: layer {} is never annotated (layers 0..{} are): annotate every layer",
                                      source, i, layers - 1));
    }
  }
  // Backward functions, and the recomputation inside them, to the forwards they belong to.
  auto owner = [&](const Backward& b) -> std::optional<std::pair<int, int>> {
    const auto it = forward_of_seq.find(b.seq);
    if (it == forward_of_seq.end()) return std::nullopt;
    return it->second;
  };
  const bool gpu = !kernels.empty();
  for (const Backward& b : backwards) {
    if (!b.top) continue;
    if (const auto o = owner(b); o && !gpu) {
      out[static_cast<std::size_t>(o->first)].backward_s[static_cast<std::size_t>(o->second)] += (b.span.end - b.span.begin) / 1e6;
    }
  }
  // Recomputation: checkpointed regions, and whole layers, run again inside a backward function;
  // a span inside another one counts with it.
  std::vector<Span> recomputed;
  for (const Span& r : regions) {
    if (backward_of(r) != nullptr) recomputed.push_back(r);
  }
  for (const Annotation& a : annotations) {
    if (a.recompute) recomputed.push_back(a.span);
  }
  std::sort(recomputed.begin(), recomputed.end(), [](const Span& x, const Span& y) {
    return x.begin != y.begin ? x.begin < y.begin : x.end > y.end;
  });
  // Sorted by start (the longer first), a span is inside an outermost one only if inside the last
  // outermost of its thread (spans on a thread nest): linear, not a scan of every earlier one.
  std::vector<Span> outermost;
  std::map<std::int64_t, Span> last_outermost;
  for (const Span& r : recomputed) {
    auto it = last_outermost.find(r.tid);
    if (it != last_outermost.end() && it->second.Contains(r)) continue;
    outermost.push_back(r);
    last_outermost[r.tid] = r;
  }
  std::map<std::int64_t, std::vector<Span>> outermost_of;  // by thread, in order of their start
  for (const Span& r : outermost) outermost_of[r.tid].push_back(r);
  auto in_recomputation = [&](const Span& s) {
    const auto on = outermost_of.find(s.tid);
    if (on == outermost_of.end()) return false;
    const auto after = std::upper_bound(on->second.begin(), on->second.end(), s.begin + 0.01,
                                        [](double t, const Span& r) { return t < r.begin; });
    return after != on->second.begin() && std::prev(after)->Contains(s);
  };
  for (const Span& r : outermost) {
    const Backward* b = backward_of(r);
    const auto o = b ? owner(*b) : std::nullopt;
    if (!o || gpu) continue;
    const double sec = (r.end - r.begin) / 1e6;
    out[static_cast<std::size_t>(o->first)].recompute_s[static_cast<std::size_t>(o->second)] += sec;
    out[static_cast<std::size_t>(o->first)].backward_s[static_cast<std::size_t>(o->second)] -= sec;
  }
  if (gpu) {
    // The accelerator's time: each kernel to the op that launched it, the op to the innermost of a
    // recomputed forward, a forward, or a backward function it runs in.
    std::map<std::int64_t, double> kernel_s;
    for (const auto& [ext, dur] : kernels) kernel_s[ext] += dur / 1e6;
    std::map<std::int64_t, std::vector<const Annotation*>> annotations_of;  // by thread, in order of start
    for (const Annotation& a : annotations) annotations_of[a.span.tid].push_back(&a);
    for (TracedLayer& l : out) std::fill(l.forward_s.begin(), l.forward_s.end(), 0.0);
    for (const CpuOp& op : ops) {
      const auto k = kernel_s.find(op.external);
      if (k == kernel_s.end()) continue;
      // The layer range around the op: the last one on its thread that starts before it (layer
      // ranges on a thread do not overlap), if that one contains it.
      const Annotation* inner = nullptr;
      if (const auto on = annotations_of.find(op.span.tid); on != annotations_of.end()) {
        const auto after = std::upper_bound(on->second.begin(), on->second.end(), op.span.begin,
                                            [](double t, const Annotation* a) { return t < a->span.begin; });
        if (after != on->second.begin() && (*std::prev(after))->span.Contains(op.span)) inner = *std::prev(after);
      }
      const Backward* b = backward_of(op.span);
      if (b == nullptr && inner != nullptr && !inner->recompute) {
        out[static_cast<std::size_t>(inner->layer)].forward_s[static_cast<std::size_t>(inner->instance)] += k->second;
      } else if (b != nullptr) {
        if (const std::optional<std::pair<int, int>> o = owner(*b)) {
          TracedLayer& l = out[static_cast<std::size_t>(o->first)];
          (in_recomputation(op.span) ? l.recompute_s : l.backward_s)[static_cast<std::size_t>(o->second)] += k->second;
        }
      }
      kernel_s.erase(k);  // a kernel counts once, for the op that launched it
    }
  }
  // Memory: the accelerator's where the trace has it, else the host's.
  std::vector<MemoryEvent> mem;
  if (!memory.empty()) mem = memory.rbegin()->second;
  std::sort(mem.begin(), mem.end(), [](const MemoryEvent& a, const MemoryEvent& b) { return a.ts < b.ts; });
  auto allocated_at = [&](double t) -> Bytes {
    const auto it = std::upper_bound(mem.begin(), mem.end(), t, [](double x, const MemoryEvent& m) { return x < m.ts; });
    return it == mem.begin() ? 0 : std::prev(it)->total;
  };
  for (const Annotation& a : annotations) {
    if (a.recompute) continue;
    const Bytes begin = allocated_at(a.span.begin), end = allocated_at(a.span.end);
    Bytes peak = end;
    for (auto it = std::upper_bound(mem.begin(), mem.end(), a.span.begin,
                                    [](double x, const MemoryEvent& m) { return x < m.ts; });
         it != mem.end() && it->ts <= a.span.end; ++it) {
      peak = std::max(peak, it->total);
    }
    TracedLayer& l = out[static_cast<std::size_t>(a.layer)];
    l.kept_bytes.push_back(std::max<Bytes>(0, end - begin));
    l.peak_extra_bytes.push_back(peak - end);
  }
  for (const TracedLayer& l : out) {
    if (std::all_of(l.backward_s.begin(), l.backward_s.end(), [](double s) { return s <= 0; })) {
      return InvalidInput(fmt::format("{}: layer {} has no backward in the trace: profile training steps (forward and "
                                      "backward), not inference",
                                      source, l.index));
    }
  }
  if (mem.empty()) {
    return InvalidInput(source + ": no memory events ('[memory]'): profile with profile_memory=True");
  }
  return out;
}

Result<Problem> ProblemFromTraces(const std::vector<TraceOption>& traces, const Problem& base,
                                  double optimizer_bytes_per_parameter) {
  if (traces.empty()) return InvalidInput("give at least one trace (an option and its file)");
  Problem problem = base;
  problem.layers.clear();
  for (const TraceOption& t : traces) {
    Result<std::vector<TracedLayer>> read = ReadTorchTrace(t.trace, t.source);
    if (!read.ok()) return read.error();
    const std::vector<TracedLayer>& layers = read.value();
    if (problem.layers.empty()) {
      for (const TracedLayer& l : layers) {
        Layer layer;
        layer.name = fmt::format("layer {}", l.index);
        layer.entry = l.index;
        layer.static_bytes = 2 * l.param_bytes +
                             static_cast<Bytes>(std::llround(optimizer_bytes_per_parameter * static_cast<double>(l.params)));
        layer.p2p_ns = base.p2p_ns;
        problem.layers.push_back(layer);
      }
    } else if (layers.size() != problem.layers.size()) {
      return InvalidInput(fmt::format("{}: {} layers, but {} has {}: trace the same model for every option", t.source,
                                      layers.size(), traces.front().source, problem.layers.size()));
    }
    for (const TracedLayer& l : layers) {
      Layer& layer = problem.layers[static_cast<std::size_t>(l.index)];
      for (const LayerOption& o : layer.options) {
        if (o.name == t.option) return InvalidInput(fmt::format("option '{}' is given twice", t.option));
      }
      // Each time within what a problem file may state (kMaxInputSeconds), as `plan` would read it.
      for (const auto& [what, s] : {std::pair<const char*, double>{"forward", Median(l.forward_s)},
                                    {"backward", Median(l.backward_s)},
                                    {"recompute", Median(l.recompute_s)}}) {
        if (s > kMaxInputSeconds) {
          return InvalidInput(fmt::format("{}: layer {}'s {} takes {:.3g} s, more than the {:g} s a problem states; is "
                                          "the trace's time unit microseconds?",
                                          t.source, l.index, what, s, kMaxInputSeconds));
        }
      }
      auto ns = [](double s) { return static_cast<TimeNs>(std::llround(std::max(0.0, s) * kSecondNs)); };
      layer.options.push_back({t.option, ns(Median(l.forward_s)), ns(Median(l.backward_s)), ns(Median(l.recompute_s)),
                               Median(l.kept_bytes), Median(l.peak_extra_bytes)});
    }
  }
  if (Status valid = ValidateProblem(problem); !valid.ok()) return valid.error();
  return problem;
}

Result<Problem> TraceBaseProblem(int ranks, int chunks, int micro_batches, const std::string& schedule,
                                 double memory_bytes, double reserved_bytes, double p2p_s) {
  Problem base;
  base.name = "profiled";
  base.pipeline.ranks = ranks;
  base.pipeline.chunks = chunks;
  base.pipeline.micro_batches = micro_batches;
  const std::optional<ScheduleKind> kind = ScheduleFromName(schedule);
  if (!kind) return InvalidInput(fmt::format("schedule '{}': use one of {}", schedule, ScheduleNames()));
  base.pipeline.schedule = *kind == ScheduleKind::kOneFOneB && chunks > 1 ? ScheduleKind::kInterleavedOneFOneB : *kind;
  const std::optional<Bytes> memory = CheckedBytes(memory_bytes);
  const std::optional<Bytes> reserved = CheckedBytes(reserved_bytes);
  if (!memory || *memory <= 0) return InvalidInput(fmt::format("memory {:g} bytes: give the device memory", memory_bytes));
  if (!reserved) return InvalidInput(fmt::format("reserved {:g} bytes: give the memory reserved on every device", reserved_bytes));
  if (!(p2p_s >= 0 && p2p_s < 1e6)) return InvalidInput(fmt::format("p2p {:g} s: give seconds, 0 or more", p2p_s));
  base.memory_bytes = *memory;
  base.reserved_bytes = *reserved;
  base.p2p_ns = static_cast<TimeNs>(std::llround(p2p_s * kSecondNs));
  return base;
}

}  // namespace bmpipe
