#include "bmpipe/problem/problem.h"

#include <fmt/format.h>

namespace bmpipe {

std::string_view ScheduleName(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kGPipe:
      return "gpipe";
    case ScheduleKind::kOneFOneB:
      return "1f1b";
    case ScheduleKind::kInterleavedOneFOneB:
      return "interleaved-1f1b";
  }
  return "?";
}

bool SameCosts(const Layer& a, const Layer& b) {
  if (a.static_bytes != b.static_bytes || a.update_ns != b.update_ns || a.p2p_ns != b.p2p_ns ||
      a.options.size() != b.options.size()) {
    return false;
  }
  for (std::size_t o = 0; o < a.options.size(); ++o) {
    const LayerOption& x = a.options[o];
    const LayerOption& y = b.options[o];
    if (x.name != y.name || x.forward_ns != y.forward_ns || x.backward_ns != y.backward_ns ||
        x.recompute_ns != y.recompute_ns || x.saved_bytes != y.saved_bytes || x.peak_extra_bytes != y.peak_extra_bytes) {
      return false;
    }
  }
  return true;
}

Status ValidatePipeline(const Pipeline& p, int num_layers) {
  if (p.ranks < 1) return InvalidInput(fmt::format("pipeline.stages = {}: must be at least 1", p.ranks));
  if (p.chunks < 1) {
    return InvalidInput(fmt::format("pipeline.virtual_stages = {}: must be at least 1", p.chunks));
  }
  if (p.micro_batches < 1) {
    return InvalidInput(fmt::format(
        "pipeline.micro_batches = {}: a pipeline needs at least 1 micro-batch; set it to global batch / "
        "(data-parallel size x micro-batch size)",
        p.micro_batches));
  }
  if (p.schedule == ScheduleKind::kGPipe && p.chunks != 1) {
    return InvalidInput(fmt::format(
        "pipeline.virtual_stages = {}: schedule 'gpipe' runs one chunk per rank; set virtual_stages to 1 or "
        "use schedule '1f1b' for interleaving",
        p.chunks));
  }
  if (p.schedule == ScheduleKind::kOneFOneB && p.chunks != 1) {
    return InternalError("1F1B with several chunks per rank must be the interleaved schedule");
  }
  if (p.schedule == ScheduleKind::kInterleavedOneFOneB) {
    if (p.chunks < 2) {
      return InvalidInput(fmt::format(
          "pipeline.virtual_stages = {}: the interleaved schedule needs at least 2 chunks per rank; raise "
          "virtual_stages or use schedule '1f1b'",
          p.chunks));
    }
    if (p.micro_batches % p.ranks != 0) {
      return InvalidInput(fmt::format(
          "pipeline.micro_batches = {}: interleaved 1F1B needs a multiple of pipeline.stages = {} "
          "(Megatron's order); use {} or {}, or set virtual_stages to 1",
          p.micro_batches, p.ranks, p.micro_batches / p.ranks * p.ranks, (p.micro_batches / p.ranks + 1) * p.ranks));
    }
  }
  if (p.stages() > num_layers) {
    return InvalidInput(fmt::format(
        "pipeline: stages x virtual_stages = {} x {} = {} pipeline stages, but the model has only {} layers; "
        "every stage needs at least one layer, so lower pipeline.stages or virtual_stages",
        p.ranks, p.chunks, p.stages(), num_layers));
  }
  return {};
}

Status ValidateProblem(const Problem& problem) {
  if (problem.layers.empty()) return InvalidInput("layers: the model has no layers; list at least one");
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
    if (layer.static_bytes < 0 || layer.update_ns < 0 || layer.p2p_ns < 0) {
      return InvalidInput(fmt::format("layer {} ('{}') has a negative static_bytes, update_s or p2p_s", l, layer.name));
    }
    for (std::size_t o = 0; o < layer.options.size(); ++o) {
      const LayerOption& opt = layer.options[o];
      if (opt.forward_ns < 0 || opt.backward_ns < 0 || opt.recompute_ns < 0 || opt.saved_bytes < 0 ||
          opt.peak_extra_bytes < 0) {
        return InvalidInput(fmt::format("layer {} ('{}') option '{}' has a negative cost", l, layer.name, opt.name));
      }
      for (std::size_t k = 0; k < o; ++k) {
        if (layer.options[k].name == opt.name) {
          return InvalidInput(fmt::format("layer {} ('{}') has two options named '{}'; option names must be unique",
                                          l, layer.name, opt.name));
        }
      }
    }
  }
  return {};
}

}  // namespace bmpipe
