#include "bmpipe/problem/problem.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

namespace bmpipe {

bool SameCosts(const Layer& a, const Layer& b) {
  if (a.static_bytes != b.static_bytes || a.update_ns != b.update_ns || a.p2p_ns != b.p2p_ns ||
      a.weight_grad_ns != b.weight_grad_ns || a.weight_grad_bytes != b.weight_grad_bytes ||
      a.options.size() != b.options.size()) {
    return false;
  }
  for (std::size_t o = 0; o < a.options.size(); ++o) {
    const LayerOption& x = a.options[o];
    const LayerOption& y = b.options[o];
    if (x.name != y.name || x.forward_ns != y.forward_ns || x.backward_ns != y.backward_ns ||
        x.recompute_ns != y.recompute_ns || x.saved_bytes != y.saved_bytes || x.peak_extra_bytes != y.peak_extra_bytes ||
        x.forward_comm_ns != y.forward_comm_ns || x.backward_comm_ns != y.backward_comm_ns) {
      return false;
    }
  }
  return true;
}

namespace {

// The longest iteration and the fullest rank the problem can describe (see kMaxIterationNs), in
// floating point so that the check itself cannot overflow.
Status CheckMagnitudes(const Problem& problem) {
  const double m = problem.pipeline.micro_batches;
  double work = 0, updates = 0, p2p = 0, memory = static_cast<double>(problem.reserved_bytes), transient = 0;
  for (const Layer& layer : problem.layers) {
    double longest = 0, saved = 0;
    for (const LayerOption& o : layer.options) {
      longest = std::max(longest, static_cast<double>(o.forward_ns) + static_cast<double>(o.backward_ns) + static_cast<double>(o.recompute_ns));
      saved = std::max(saved, static_cast<double>(o.saved_bytes));
      transient = std::max(transient, static_cast<double>(o.peak_extra_bytes));
    }
    work += m * longest;
    updates += static_cast<double>(layer.update_ns);
    p2p += 2 * m * static_cast<double>(layer.p2p_ns);
    memory += static_cast<double>(layer.static_bytes) + m * saved;
  }
  if (work + updates + p2p > static_cast<double>(kMaxIterationNs)) {
    return InvalidInput(fmt::format(
        "the iteration could last up to {:.3g} s (pipeline.micro_batches = {} times the layers' forward, backward "
        "and recompute times, plus p2p and updates), more than the {:.3g} s bmpipe represents; check that the times "
        "are in seconds, or plan fewer micro-batches or layers",
        (work + updates + p2p) / kSecondNs, problem.pipeline.micro_batches, ToSeconds(kMaxIterationNs)));
  }
  if (memory + transient > static_cast<double>(kMaxRankBytes)) {
    return InvalidInput(fmt::format(
        "a rank could hold up to {:.3g} bytes (reserved and static bytes, plus pipeline.micro_batches = {} times "
        "the layers' saved_bytes), more than the {:.3g} bytes bmpipe represents; check that the sizes are in bytes, "
        "or plan fewer micro-batches",
        memory + transient, problem.pipeline.micro_batches, static_cast<double>(kMaxRankBytes)));
  }
  return {};
}

}  // namespace

Bytes DeviceMemoryBytes(const Problem& problem) {
  return problem.memory_bytes + (problem.training ? problem.training->headroom_bytes : 0);
}

Bytes HeadroomForError(double usable, double error) {
  if (error <= 0 || usable <= 0) return 0;
  return static_cast<Bytes>(std::ceil(usable * error / (1 + error) / 1e8)) * Bytes{100'000'000};
}

int ZeroStage(const TrainingInfo& training) {
  return std::max(training.zero_stage, training.distributed_optimizer ? 1 : 0);
}

Status ValidateProblem(const Problem& problem) {
  if (const std::optional<TrainingInfo>& t = problem.training) {
    const std::int64_t per_iteration =
        std::int64_t{t->micro_batch_size} * t->data_parallel * problem.pipeline.micro_batches;
    if (t->tensor_parallel < 1 || t->data_parallel < 1 || t->micro_batch_size < 1 || t->seq_length < 1 ||
        t->global_batch_size != per_iteration) {
      return InvalidInput(fmt::format(
          "training: global_batch_size = {} must equal micro_batch_size x data_parallel x pipeline.micro_batches = {} "
          "x {} x {}, with every size at least 1",
          t->global_batch_size, t->micro_batch_size, t->data_parallel, problem.pipeline.micro_batches));
    }
  }
  if (problem.layers.empty()) return InvalidInput("layers: the model has no layers; list at least one");
  if (problem.num_layers() > kMaxLayers) {
    return InvalidInput(fmt::format("layers: the model has {} layers; bmpipe plans at most {}", problem.num_layers(),
                                    kMaxLayers));
  }
  Status pipeline = ValidatePipeline(problem.pipeline, problem.num_layers());
  if (!pipeline.ok()) return pipeline;
  if (problem.memory_bytes <= 0) {
    return InvalidInput(fmt::format("device.memory_bytes = {}: must be positive", problem.memory_bytes));
  }
  if (problem.reserved_bytes < 0 || problem.p2p_ns < 0) {
    return InvalidInput("device.reserved_bytes and p2p_s must not be negative");
  }
  for (int l = 0; l < problem.num_layers(); ++l) {
    const Layer& layer = problem.layers[l];
    if (layer.options.empty()) {
      return InvalidInput(fmt::format("layer {} ('{}') has no options; give at least 'none'", l, layer.name));
    }
    if (static_cast<int>(layer.options.size()) > kMaxOptionsPerLayer) {
      return InvalidInput(fmt::format("layer {} ('{}') has {} options; bmpipe takes at most {} per layer", l,
                                      layer.name, layer.options.size(), kMaxOptionsPerLayer));
    }
    if (layer.static_bytes < 0 || layer.update_ns < 0 || layer.p2p_ns < 0 || layer.weight_grad_ns < 0 ||
        layer.weight_grad_bytes < 0) {
      return InvalidInput(fmt::format(
          "layer {} ('{}') has a negative static_bytes, update_s, p2p_s, weight_grad_s or weight_grad_bytes", l,
          layer.name));
    }
    for (std::size_t o = 0; o < layer.options.size(); ++o) {
      const LayerOption& opt = layer.options[o];
      if (opt.forward_ns < 0 || opt.backward_ns < 0 || opt.recompute_ns < 0 || opt.saved_bytes < 0 ||
          opt.peak_extra_bytes < 0) {
        return InvalidInput(fmt::format("layer {} ('{}') option '{}' has a negative cost", l, layer.name, opt.name));
      }
      if (opt.forward_comm_ns < 0 || opt.forward_comm_ns > opt.forward_ns) {
        return InvalidInput(fmt::format("layer {} ('{}') option '{}': forward_comm_s is part of forward_s (0 to {} s)",
                                        l, layer.name, opt.name, ToSeconds(opt.forward_ns)));
      }
      if (opt.backward_comm_ns < 0 || opt.backward_comm_ns > opt.backward_ns + opt.recompute_ns - layer.weight_grad_ns) {
        return InvalidInput(fmt::format(
            "layer {} ('{}') option '{}': backward_comm_s is part of backward_s + recompute_s outside the layer's "
            "weight_grad_s (0 to {} s)",
            l, layer.name, opt.name, ToSeconds(std::max<TimeNs>(0, opt.backward_ns + opt.recompute_ns - layer.weight_grad_ns))));
      }
      if (layer.weight_grad_ns > opt.backward_ns) {
        return InvalidInput(fmt::format("layer {} ('{}'): weight_grad_s is part of every option's backward_s and "
                                        "cannot exceed option '{}''s",
                                        l, layer.name, opt.name));
      }
      for (std::size_t k = 0; k < o; ++k) {
        if (layer.options[k].name == opt.name) {
          return InvalidInput(fmt::format("layer {} ('{}') has two options named '{}'; option names must be unique",
                                          l, layer.name, opt.name));
        }
      }
    }
  }
  if (problem.pipeline.SplitBackward()) {
    const bool any = std::any_of(problem.layers.begin(), problem.layers.end(),
                                 [](const Layer& layer) { return layer.weight_grad_ns > 0; });
    if (!any) {
      return InvalidInput(fmt::format(
          "pipeline.schedule = '{}' splits each backward into its input-gradient and weight-gradient parts, but no "
          "layer gives weight_grad_s; give each layer's weight-gradient time (bmpipe build computes it), or "
          "use schedule '1f1b'",
          ScheduleName(problem.pipeline.schedule)));
    }
  }
  return CheckMagnitudes(problem);
}

}  // namespace bmpipe
