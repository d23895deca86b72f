#include "bmpipe/baselines/baselines.h"
#include "bmpipe/baselines/common.h"

#include <chrono>

#include <fmt/format.h>

namespace bmpipe {

BaselineResult RunMegatron(const Problem& problem, TargetKind spec, const Deadline& deadline);
BaselineResult RunPipeDream(const Problem& problem, const Deadline& deadline);
BaselineResult RunMerak(const Problem& problem, const Deadline& deadline);
BaselineResult RunAdaPipe(const Problem& problem, const Deadline& deadline);
BaselineResult RunMist(const Problem& problem, const Deadline& deadline);
BaselineResult RunMindFormersTool(const Problem& problem, const Deadline& deadline);

std::vector<BaselineKind> AllBaselines() {
  return {BaselineKind::kMegatron, BaselineKind::kPipeDream, BaselineKind::kMerak,
          BaselineKind::kAdaPipe,  BaselineKind::kMist,      BaselineKind::kMindFormersTool};
}

std::string BaselineName(BaselineKind kind) {
  switch (kind) {
    case BaselineKind::kMegatron:
      return "megatron";
    case BaselineKind::kPipeDream:
      return "pipedream";
    case BaselineKind::kMerak:
      return "merak";
    case BaselineKind::kAdaPipe:
      return "adapipe";
    case BaselineKind::kMist:
      return "mist";
    case BaselineKind::kMindFormersTool:
      return "mindformers-tool";
  }
  return "?";
}

BaselineResult RunBaseline(BaselineKind kind, const Problem& problem, const BaselineOptions& options) {
  const auto began = std::chrono::steady_clock::now();
  const Deadline deadline = options.deadline.Earlier(Deadline::In(options.time_limit_s));
  BaselineResult r;
  switch (kind) {
    case BaselineKind::kMegatron:
      r = RunMegatron(problem, options.megatron_target, deadline);
      break;
    case BaselineKind::kPipeDream:
      r = RunPipeDream(problem, deadline);
      break;
    case BaselineKind::kMerak:
      r = RunMerak(problem, deadline);
      break;
    case BaselineKind::kAdaPipe:
      r = RunAdaPipe(problem, deadline);
      break;
    case BaselineKind::kMist:
      r = RunMist(problem, deadline);
      break;
    case BaselineKind::kMindFormersTool:
      r = RunMindFormersTool(problem, deadline);
      break;
  }
  r.name = BaselineName(kind);
  if (!r.stopped_by.empty()) {
    if (r.stopped_by == kStoppedByTimeLimit) r.stopped_by = fmt::format("time limit {:g} s", options.time_limit_s);
    r.config += (r.config.empty() ? "" : "; ") + ("stopped by " + r.stopped_by);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  return r;
}

}  // namespace bmpipe
